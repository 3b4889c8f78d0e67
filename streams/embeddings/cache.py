"""The one vector cache: a bounded LRU of text -> vector in front of any `Embedder`.

The monitors re-embed the same thoughts, tool inputs and the task text on every step; a hit
costs a dict lookup instead of a forward pass. The models themselves never cache; every
embedder the worker, replay or the pattern store uses is wrapped once, in `models.load_models`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ..core.embedding_port import Embedder
from .vectors import FloatArray

ENTRY_OVERHEAD = 200  # bytes a cached entry costs beyond its text and vector (dict slot, objects)


def entry_bytes(text: str, row: FloatArray) -> int:
    """What one cached text costs, about: its characters (up to 4 bytes each), the vector."""
    return len(text) * (1 if text.isascii() else 4) + row.nbytes + ENTRY_OVERHEAD


class CachedEmbedder:
    """`model` behind a bounded LRU. Cached rows are read-only; `embed` always returns a fresh
    array, so callers may modify it. Each distinct uncached text is computed once per call.

    Bounded twice: at most `size` texts and `max_bytes` of texts and vectors together (a
    producer's steps may carry texts of 20,000 characters: 20,000 of them would be 400 MB)."""

    def __init__(self, model: Embedder, size: int, max_bytes: int | None = None) -> None:
        self.model = model
        self.name = model.name
        self.dim = model.dim
        self._size = max(0, size)
        self._max_bytes = max_bytes
        self._bytes = 0
        self._cache: OrderedDict[str, FloatArray] = OrderedDict()
        self._lock = threading.Lock()

    def _keep(self, text: str, row: FloatArray) -> None:
        """Cache a row (under the lock), then evict the oldest past either bound."""
        old = self._cache.pop(text, None)
        if old is not None:
            self._bytes -= entry_bytes(text, old)
        self._cache[text] = row
        self._bytes += entry_bytes(text, row)
        limit = self._max_bytes
        while self._cache and (len(self._cache) > self._size or (limit is not None and self._bytes > limit)):
            t, r = self._cache.popitem(last=False)
            self._bytes -= entry_bytes(t, r)

    def embed(self, texts: Sequence[str]) -> FloatArray:
        if isinstance(texts, str):  # a bare str is a Sequence[str] too: almost always a bug
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if len(texts) == 1:  # the monitors' case: one text per call
            return self._one(texts[0])
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, t in enumerate(texts):
                hit = self._cache.get(t)
                if hit is not None:
                    self._cache.move_to_end(t)
                    out[i] = hit
                else:
                    missing.setdefault(t, []).append(i)
        if missing:
            todo = list(missing)
            vecs = self.model.embed(todo)
            with self._lock:
                for t, v in zip(todo, vecs, strict=True):
                    out[missing[t]] = v
                    if self._size:
                        row = v.copy()
                        row.setflags(write=False)
                        self._keep(t, row)
        return out

    def _one(self, text: str) -> FloatArray:
        """`embed([text])`, without the bookkeeping of a batch (a cached text, or one the
        monitors embed for the first time: most steps bring one)."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit[None, :].copy()
        out = np.empty((1, self.dim), dtype=np.float32)
        out[0] = self.model.embed([text])[0]
        if self._size:
            row = out[0].copy()
            row.setflags(write=False)
            with self._lock:
                self._keep(text, row)
        return out

    def has(self, text: str) -> bool:
        with self._lock:
            return text in self._cache

    def put(self, texts: Sequence[str], vecs: FloatArray) -> None:
        """Cache vectors computed elsewhere (by the same model, one text per pass: the
        prefetch of `streams.embeddings.prefetch`)."""
        if not self._size:
            return
        with self._lock:
            for t, v in zip(texts, vecs, strict=True):
                row = np.array(v, dtype=np.float32)
                row.setflags(write=False)
                self._keep(t, row)

    def cache_clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._bytes = 0

    @property
    def cache_len(self) -> int:
        return len(self._cache)

    @property
    def capacity(self) -> int:
        """The LRU's bound (entries)."""
        return self._size

    @property
    def cache_bytes(self) -> int:
        """What the cached texts and vectors take, about (bounded by `max_bytes`)."""
        return self._bytes
