"""The vector cache: bounded by entries and by memory."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streams.embeddings.cache import CachedEmbedder, entry_bytes
from streams.embeddings.vectors import FloatArray


class Counting:
    name, dim = "counting", 8

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> FloatArray:
        self.calls += len(texts)
        return np.ones((len(texts), self.dim), dtype=np.float32)


def test_long_texts_are_evicted_by_the_memory_bound_before_the_entry_bound() -> None:
    long = ["x" * 20_000 + f"{i:02d}" for i in range(50)]
    one = entry_bytes(long[0], np.ones(8, dtype=np.float32))
    cache = CachedEmbedder(Counting(), 1_000, max_bytes=10 * one)
    for t in long:
        cache.embed([t])
    assert cache.cache_len == 10 and cache.cache_bytes <= 10 * one
    assert cache.has(long[-1]) and not cache.has(long[0])  # the oldest went first


def test_short_texts_are_bounded_by_entries_and_a_hit_is_not_recomputed() -> None:
    model = Counting()
    cache = CachedEmbedder(model, 3, max_bytes=10**9)
    for t in ("a", "b", "c", "d"):
        cache.embed([t])
    assert cache.cache_len == 3 and not cache.has("a")
    cache.embed(["d"])
    assert model.calls == 4
    cache.put(["d"], np.zeros((1, 8), dtype=np.float32))  # replacing an entry is not counted twice
    assert cache.cache_bytes == sum(entry_bytes(t, np.ones(8, dtype=np.float32)) for t in "bcd")
    cache.cache_clear()
    assert cache.cache_len == 0 and cache.cache_bytes == 0
