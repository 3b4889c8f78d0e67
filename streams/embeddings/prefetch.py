"""The monitors' MiniLM work, done ahead of the decision that needs it, in the embedding child.

A drift check is planned at one step and made at the run's next step (`core.monitors.drift`);
the texts it compares are known a step early (`Effects.to_embed`). The worker hands them to
`EmbedPrefetch` once the planning step's decision is sent: the child process embeds them (at
low priority, off the worker's GIL) into the cache in front of the monitors' full model, so the
next step's check is a cache hit instead of 15-45 ms of numpy on the event loop. Nothing
depends on it finishing in time: a text not cached yet is embedded inline, with the same bits
(one text per forward pass on both sides), so decisions are the same as replay's either way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from .cache import CachedEmbedder
from .process import FloatArray, ProcessEmbedder

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 64  # batches the child may hold; beyond that a batch is left to the decision path


class EmbedPrefetch:
    """`__call__(texts)`: embed the uncached ones in `child`, into `cache`. Never raises, never
    waits. `observe(outcome, n)` counts texts: embedded, cached (nothing to do), skipped (too
    many in flight), failed."""

    def __init__(
        self,
        cache: CachedEmbedder,
        child: ProcessEmbedder,
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
        observe: Callable[[str, int], None] | None = None,
    ) -> None:
        self.cache = cache
        self.child = child
        self.max_in_flight = max_in_flight
        self._observe = observe or (lambda outcome, n: None)
        self._lock = threading.Lock()
        self.in_flight = 0

    def __call__(self, texts: Sequence[str]) -> None:
        wanted = list(dict.fromkeys(texts))
        todo = [t for t in wanted if not self.cache.has(t)]
        if len(todo) < len(wanted):
            self._observe("cached", len(wanted) - len(todo))
        if not todo:
            return
        with self._lock:
            if self.in_flight >= self.max_in_flight:
                self._observe("skipped", len(todo))
                return
            self.in_flight += 1
        try:
            fut = self.child.submit_each(todo)
        except Exception as exc:  # a dead child: replaced on the next call; inline meanwhile
            self._finished()
            self._observe("failed", len(todo))
            log.warning("embedding prefetch failed: %s", exc)
            return
        fut.add_done_callback(lambda f: self._done(todo, f))

    def _done(self, todo: list[str], fut: Future[FloatArray]) -> None:
        """In the executor's thread: cache the rows (the cache has its own lock)."""
        self._finished()
        if fut.cancelled() or fut.exception() is not None:
            self._observe("failed", len(todo))
            return
        self.cache.put(todo, fut.result())
        self._observe("embedded", len(todo))

    def _finished(self) -> None:
        with self._lock:
            self.in_flight -= 1
