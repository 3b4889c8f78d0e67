"""Runs the core's E-trace plans against the pattern store, off the event loop.

The core answers E1/E2 one decision late (see `core.etrace_rules`): when a step plans queries, the
worker calls `prefetch` once that step's decision is sent, and the queries run on a small
thread pool (the MiniLM query embedding and local-mode Qdrant are CPU work) while the agent
makes its model call. The run's next decision then finds them answered (`ready`) and waits
for nothing; if they are not in yet (a worker that restarted in between, a burst), `answer`
waits for them at most `timeout_s` and otherwise answers with the reason. E3 (no
embedding) runs on a thread of its own, so it never queues behind an embedding.

A store that fails or times out is given `retry_after_s` of rest (answers say it is
unavailable, at once) before the next attempt, so a dead store costs nothing per step and
recovery is automatic.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..core.embedding_port import Embedder
from ..core.etrace_rules import Answer, Plan, Query
from ..shared.logsafe import safe_for_log
from .pattern_store import PatternStore, QdrantPatternStore

log = logging.getLogger(__name__)

MAX_PREFETCHED = 4096  # runs whose next decision has queries in flight or answered, per worker


@dataclass
class _Job:
    """One plan on its way through a pool: abandoned jobs that have not started are skipped."""

    queries: tuple[Query, ...]
    future: Future[list[Answer]] = field(default_factory=Future)
    abandoned: bool = False


class Retriever:
    def __init__(
        self,
        store: PatternStore | None,
        *,
        timeout_s: float = 0.15,
        concurrency: int = 2,
        retry_after_s: float = 5.0,
        failures_to_trip: int = 3,
        max_prefetched: int = MAX_PREFETCHED,
        observe: Callable[[str, float, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self._on_close = on_close  # what the store uses and the retriever owns (the embedder)
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self.failures_to_trip = failures_to_trip
        self.max_prefetched = max(1, max_prefetched)
        self.observe = observe or (lambda tier, seconds, outcome: None)
        self.clock = clock
        # Embedding queries (E1, E2): at most `concurrency` at a time, also once abandoned.
        self._pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="rb-etrace")
        # Queries without text (E3: a cached scroll) never wait behind an embedding.
        self._quick = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="rb-etrace-e3")
        self._prefetched: OrderedDict[Hashable, _Job] = OrderedDict()  # event loop only
        self._lock = threading.Lock()
        self._failures = 0
        self._down_until = 0.0
        self.last_error: str | None = None
        self.up = store is not None

    @property
    def prefetched(self) -> int:
        """Runs with answers in flight or waiting (at most max_prefetched): a cache gauge."""
        return len(self._prefetched)

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
                    log.warning("pattern store marked down: %s", safe_for_log(why))
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
    def _run_plan(self, queries: tuple[Query, ...] | list[Query]) -> list[Answer]:
        """Blocking: every query of the plan, each answer timed and classified."""
        assert self.store is not None
        out: list[Answer] = []
        for q in queries:
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

    def _work(self, job: _Job) -> None:
        """On a pool thread: the plan's answers, unless nobody wants them any more."""
        if not job.future.set_running_or_notify_cancel():
            return
        try:
            if job.abandoned:  # its decision went out without it: skip the work
                job.future.set_result([Answer(q.tier, error="busy") for q in job.queries])
            else:
                job.future.set_result(self._run_plan(job.queries))
        except BaseException as exc:  # pragma: no cover - _run_plan answers errors itself
            job.future.set_exception(exc)

    def _submit(self, queries: tuple[Query, ...]) -> _Job:
        job = _Job(queries)
        pool = self._pool if any(q.text is not None for q in queries) else self._quick
        pool.submit(self._work, job)
        return job

    def answer_now(self, plan: Plan) -> list[Answer]:
        """Synchronous, no deadline: `replay` (results depend only on the store's content)."""
        why = self._unavailable()
        if why:
            return [Answer(q.tier, error=why) for q in plan.queries]
        return self._run_plan(plan.queries)

    def prefetch(self, key: Hashable, plan: Plan) -> None:
        """Start answering `plan` in the background for `key`'s (the run's) next decision.

        Called from the event loop only. A run has at most one prefetch (a newer one replaces
        it); past `max_prefetched` runs the oldest is dropped (its decision will query again)."""
        if not plan or self._unavailable():
            return
        old = self._prefetched.pop(key, None)
        if old is not None:
            old.abandoned = True
        while len(self._prefetched) >= self.max_prefetched:
            _, dropped = self._prefetched.popitem(last=False)
            dropped.abandoned = True
        self._prefetched[key] = self._submit(tuple(plan.queries))

    def discard(self, key: Hashable) -> None:
        """The run ended: its prefetched answers will not be asked for."""
        job = self._prefetched.pop(key, None)
        if job is not None:
            job.abandoned = True

    def _cached(self, plan: Plan) -> list[Answer] | None:
        """Every answer of the plan from the store's memory (no I/O), or None."""
        if self.store is None:
            return None
        out: list[Answer] = []
        for q in plan.queries:
            a = self.store.cached(q)
            if a is None:
                return None
            out.append(a)
        return out

    def ready(self, key: Hashable, plan: Plan) -> bool:
        """True if `answer(plan, key)` would return without waiting."""
        if self._unavailable():
            return True
        job = self._prefetched.get(key)
        if job is not None and job.queries == tuple(plan.queries) and job.future.done():
            return True
        return job is None and self._cached(plan) is not None

    async def answer(self, plan: Plan, key: Hashable | None = None) -> list[Answer]:
        """The plan's answers, prefetched for `key` or asked now, after at most `timeout_s` of
        waiting; otherwise answers that say why not. Never raises."""
        job = self._prefetched.pop(key, None) if key is not None else None
        if job is not None and job.queries != tuple(plan.queries):
            job.abandoned = True  # planned for another state of the run (cannot happen in order)
            job = None
        if job is None or not job.future.done():
            why = self._unavailable()
            if why:
                if job is not None:
                    job.abandoned = True
                for q in plan.queries:
                    self.observe(q.tier, 0.0, "skipped")
                return [Answer(q.tier, error=why) for q in plan.queries]
        if job is None:
            now = self._cached(plan)
            if now is not None:
                for q in plan.queries:
                    self.observe(q.tier, 0.0, "answered")
                return now
            job = self._submit(tuple(plan.queries))
        if job.future.done():
            return job.future.result()
        t0 = time.perf_counter()
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job.future)), self.timeout_s)
        except TimeoutError:
            job.abandoned = True
            why = f"timeout after {self.timeout_s * 1000:.0f} ms"
            self._failed(why)
            for q in plan.queries:
                self.observe(q.tier, time.perf_counter() - t0, "timeout")
            return [Answer(q.tier, error=why) for q in plan.queries]

    def close(self) -> None:
        for job in self._prefetched.values():
            job.abandoned = True
        self._prefetched.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._quick.shutdown(wait=False, cancel_futures=True)
        if self.store is not None:
            self.store.close()
        if self._on_close is not None:
            self._on_close()


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
