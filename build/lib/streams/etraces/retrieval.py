"""Runs the core's E-trace plans against the pattern store, off the event loop.

Queries run on a small thread pool (the MiniLM query embedding and local-mode Qdrant are
CPU work), at most `concurrency` at a time, each plan under one deadline. A store that
fails or times out is given `retry_after_s` of rest (answers say it is unavailable, at once)
before the next attempt, so a dead store costs nothing per step and recovery is automatic.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.embedding import Embedder
from ..core.etraces import Answer, Plan
from .pattern_store import PatternStore, QdrantPatternStore

log = logging.getLogger(__name__)


class Retriever:
    def __init__(
        self,
        store: PatternStore | None,
        *,
        timeout_s: float = 0.15,
        concurrency: int = 2,
        retry_after_s: float = 5.0,
        failures_to_trip: int = 3,
        observe: Callable[[str, float, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self.failures_to_trip = failures_to_trip
        self.observe = observe or (lambda tier, seconds, outcome: None)
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="rb-etrace")
        self._slots = threading.BoundedSemaphore(max(1, concurrency))
        self._lock = threading.Lock()
        self._failures = 0
        self._down_until = 0.0
        self.last_error: str | None = None
        self.up = store is not None

    # -- health ---------------------------------------------------------------
    def _unavailable(self) -> str | None:
        if self.store is None:
            return "no pattern store configured"
        with self._lock:
            if self.clock() < self._down_until:
                wait = self._down_until - self.clock()
                return f"pattern store failing ({self.last_error}), next try in {wait:.0f}s"
        return None

    def _failed(self, why: str) -> None:
        with self._lock:
            self._failures += 1
            self.last_error = why
            if self._failures >= self.failures_to_trip or why.startswith("unreachable"):
                if self.up:
                    log.warning("pattern store marked down: %s", why)
                self.up = False
                self._down_until = self.clock() + self.retry_after_s

    def _succeeded(self) -> None:
        with self._lock:
            if not self.up:
                log.warning("pattern store back up")
            self._failures = 0
            self.up = True
            self._down_until = 0.0

    # -- answering ------------------------------------------------------------
    def _run_plan(self, plan: Plan) -> list[Answer]:
        """Blocking: every query of the plan, each answer timed and classified."""
        assert self.store is not None
        out: list[Answer] = []
        for q in plan.queries:
            t0 = time.perf_counter()
            try:
                a = self.store.answer(q)
            except Exception as exc:  # the store's failure must not cost the decision
                why = _describe(exc)
                self._failed(why)
                self.observe(q.tier, time.perf_counter() - t0, "error")
                out.append(Answer(q.tier, error=why))
                continue
            self._succeeded()
            self.observe(q.tier, time.perf_counter() - t0, "answered")
            out.append(a)
        return out

    def answer_now(self, plan: Plan) -> list[Answer]:
        """Synchronous, no deadline: `replay` (results depend only on the store's content)."""
        why = self._unavailable()
        if why:
            return [Answer(q.tier, error=why) for q in plan.queries]
        return self._run_plan(plan)

    async def answer(self, plan: Plan) -> list[Answer]:
        """Within `timeout_s`, or answers that say why not. Never raises."""
        why = self._unavailable()
        if why:
            for q in plan.queries:
                self.observe(q.tier, 0.0, "skipped")
            return [Answer(q.tier, error=why) for q in plan.queries]
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        # The slot is taken on the pool thread and released when the work really ends, so
        # abandoned (timed-out) queries still count against the bound.
        fut = loop.run_in_executor(self._pool, self._guarded, plan, t0)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.timeout_s)
        except TimeoutError:
            why = f"timeout after {self.timeout_s * 1000:.0f} ms"
            self._failed(why)
            for q in plan.queries:
                self.observe(q.tier, time.perf_counter() - t0, "timeout")
            return [Answer(q.tier, error=why) for q in plan.queries]

    def _guarded(self, plan: Plan, t0: float) -> list[Answer]:
        if not self._slots.acquire(timeout=self.timeout_s):
            return [Answer(q.tier, error="busy") for q in plan.queries]
        try:
            if time.perf_counter() - t0 > self.timeout_s:  # already too late: skip the work
                return [Answer(q.tier, error="busy") for q in plan.queries]
            return self._run_plan(plan)
        finally:
            self._slots.release()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.store is not None:
            self.store.close()


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if any(
        s in low
        for s in (
            "connection refused",
            "connecterror",
            "connect call failed",
            "name or service",
            "all connection attempts failed",
        )
    ):
        return "unreachable: " + text[:160]
    return text[:200]


def open_store(settings: Any, embedder: Embedder) -> QdrantPatternStore:
    """The store the settings name: a server if `qdrant_url`, else local mode on disk."""
    if settings.qdrant_url:
        return QdrantPatternStore(
            embedder,
            url=settings.qdrant_url,
            api_key=settings.qdrant_api_key.get_secret_value() or None,
            timeout_s=settings.etrace_timeout_ms / 1000,
        )
    return QdrantPatternStore(embedder, path=settings.patterns_dir)
