"""Monitor texts embedded ahead in the embedding process, into the monitors' cache."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import numpy as np
import pytest

from streams.embeddings.cache import CachedEmbedder
from streams.embeddings.minilm import MiniLMEmbedder
from streams.embeddings.prefetch import EmbedPrefetch
from streams.embeddings.process import ProcessEmbedder
from tests.models import models

TEXTS = ["The marketing site's hero image looks blurry", "Fix the bug where CSV exports drop the last row"]


@pytest.fixture(scope="module")
def child():
    m = models().full.model
    assert isinstance(m, MiniLMEmbedder)
    c = ProcessEmbedder(m.model_dir, name=m.name, dim=m.dim)
    yield c
    c.close()


def _wait(prefetch: EmbedPrefetch) -> None:
    for _ in range(600):
        if prefetch.in_flight == 0:
            return
        threading.Event().wait(0.1)
    raise AssertionError("prefetch did not finish")


def test_texts_land_in_the_cache_with_the_in_process_bits(child) -> None:
    minilm = models().full.model
    cache = CachedEmbedder(minilm, 100)
    seen: list[tuple[str, int]] = []
    prefetch = EmbedPrefetch(cache, child, observe=lambda o, n: seen.append((o, n)))
    prefetch(TEXTS)
    _wait(prefetch)
    assert all(cache.has(t) for t in TEXTS)
    for t in TEXTS:
        assert np.array_equal(cache.embed([t])[0], minilm.embed([t])[0])
    assert seen == [("embedded", 2)]
    prefetch(TEXTS)  # nothing left to do
    assert seen[-1] == ("cached", 2) and prefetch.in_flight == 0


class _Stuck:
    """A child that never answers until released."""

    def __init__(self) -> None:
        self.futures: list[Future[np.ndarray]] = []

    def submit_each(self, texts):
        f: Future[np.ndarray] = Future()
        self.futures.append(f)
        return f


def test_past_the_in_flight_bound_texts_are_left_to_the_decision_path() -> None:
    cache = CachedEmbedder(models().full.model, 100)
    stuck = _Stuck()
    seen: list[tuple[str, int]] = []
    prefetch = EmbedPrefetch(cache, stuck, max_in_flight=1, observe=lambda o, n: seen.append((o, n)))  # type: ignore[arg-type]
    prefetch(["a first text"])
    prefetch(["a second text"])
    assert seen == [("skipped", 1)] and prefetch.in_flight == 1
    stuck.futures[0].set_exception(RuntimeError("the child died"))
    assert seen[-1] == ("failed", 1) and prefetch.in_flight == 0
    assert not cache.has("a first text")


def test_a_child_that_cannot_take_the_batch_is_counted_and_never_raises() -> None:
    class Broken:
        def submit_each(self, texts):
            raise RuntimeError("no child")

    seen: list[tuple[str, int]] = []
    prefetch = EmbedPrefetch(
        CachedEmbedder(models().full.model, 10), Broken(), observe=lambda o, n: seen.append((o, n))
    )  # type: ignore[arg-type]
    prefetch(["text"])
    assert seen == [("failed", 1)] and prefetch.in_flight == 0
