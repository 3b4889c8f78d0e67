"""Text similarity for the monitors: a cascade over two embedders.

The fast (static) embedder runs on every step; the full sentence model (MiniLM) is asked only
when the fast one is unsure (similarity inside an ambiguous band), for claims, and at drift
checkpoints. Vectors are cached per text by the embedders themselves (one cache layer,
streams.embeddings.cache), stacks of repeating anchor sets here; similarities are rounded so a threshold decision cannot flip on the last float bit between the worker and
`replay`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence

import numpy as np

from ..embedding_port import Embedder, Vector


class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Hashable, Vector] = OrderedDict()

    def get(self, key: Hashable) -> Vector | None:
        v = self.data.get(key)
        if v is not None:
            self.data.move_to_end(key)
        return v

    def put(self, key: Hashable, v: Vector) -> None:
        self.data[key] = v
        if len(self.data) > self.size:
            self.data.popitem(last=False)


def _unit(v: Vector) -> Vector:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


# Anchor sets kept stacked. A run's sets (sprawl's topics, a loop window) repeat from one of its
# steps to the next, so a few per live run are enough; a set not kept is stacked again from
# cached vectors (microseconds). 5,000 sets of ~10 texts kept ~60 MB and took an hour of a
# 40-agent soak to fill.
STACKS_KEPT = 1_024


class Semantics:
    """Rounded cosine similarities over two embedders, fast and full."""

    def __init__(self, fast: Embedder, full: Embedder, stacks: int = STACKS_KEPT) -> None:
        self.fast_model = fast
        self.full_model = full
        self._mats = _LRU(stacks)
        self.compared = 0  # vectors compared so far: the monitors' per-step work, for tests

    @property
    def stacks(self) -> tuple[int, int]:
        """(anchor sets kept stacked, their bound): the `similarity_stacks` cache gauge."""
        return len(self._mats.data), self._mats.size

    @staticmethod
    def _vec(model: Embedder, text: str) -> Vector:
        # One text per call: a batch could change BLAS blocking and the last bits.
        return np.asarray(model.embed([text])[0], dtype=np.float32)

    def fast(self, text: str) -> Vector:
        return self._vec(self.fast_model, text)

    def full(self, text: str) -> Vector:
        return self._vec(self.full_model, text)

    def fast_sims(self, text: str, others: Sequence[str]) -> list[float]:
        if not others:
            return []
        self.compared += len(others)
        q = self.fast(text)
        key = tuple(others)
        m = self._mats.get(key)
        if m is None:
            # Anchor sets (sprawl's topics, a loop window) repeat from step to step: stack once.
            m = np.stack([self.fast(o) for o in others])
            self._mats.put(key, m)
        return [round(float(x), 4) for x in m @ q]

    def fast_centroid_sims(self, texts: Sequence[str], refs: Sequence[Sequence[str]]) -> list[float]:
        """Cosine of the centroid of `texts` to the centroid of each group in `refs`.

        A static model embeds a text as the mean of its token vectors, so the centroid of
        per-text vectors stands in for the embedding of their concatenation, and reuses the
        per-step vectors other monitors already computed."""
        self.compared += len(texts) + sum(len(r) for r in refs)
        q = self._centroid(texts)
        out = []
        for group in refs:
            # A reference group (drift's opening focus, the task) is the same from one check
            # to the next: its centroid is kept with the stacked anchor sets.
            key = ("centroid", *group)
            c = self._mats.get(key)
            if c is None:
                c = self._centroid(group)
                self._mats.put(key, c)
            out.append(round(float(c @ q), 4))
        return out

    def _centroid(self, texts: Sequence[str]) -> Vector:
        return _unit(np.mean(np.stack([self.fast(t) for t in texts]), axis=0))

    def full_sim(self, a: str, b: str) -> float:
        self.compared += 1
        return round(float(self.full(a) @ self.full(b)), 4)

    def full_sims(self, text: str, others: Sequence[str]) -> list[float]:
        if not others:
            return []
        self.compared += len(others)
        q = self.full(text)
        m = np.stack([self.full(o) for o in others])
        return [round(float(x), 4) for x in m @ q]

    def matches(
        self, text: str, others: Sequence[str], fast_hi: float, fast_lo: float, max_full: int = 4
    ) -> list[float]:
        """Cascade: trust the fast model far from a threshold, ask the full one in between.

        Returns one similarity per other text on the full model's scale: 1.0 where the fast
        model is sure of a match (>= fast_hi), 0.0 where it is sure there is none (< fast_lo),
        the full model's cosine for at most `max_full` ambiguous ones (the most similar first)."""
        fast = self.fast_sims(text, others)
        out = [1.0 if s >= fast_hi else 0.0 for s in fast]
        ambiguous = sorted((i for i, s in enumerate(fast) if fast_lo <= s < fast_hi), key=lambda i: -fast[i])
        for i in ambiguous[:max_full]:
            out[i] = self.full_sim(text, others[i])
        return out
