"""The retrieval adapter: deadlines, bounded concurrency, a failing store, recovery.

Faults are injected around the real embedded Qdrant store (or with a real closed port for
an unreachable server), never with a stand-in store."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from streams.core.etrace_rules import Answer, Plan, Query
from streams.etraces.pattern_store import QdrantPatternStore
from streams.etraces.patterns import parse_pattern
from streams.etraces.retrieval import Retriever
from tests.models import models

SIT = "I need to fix the failing session test; the token expiry check raises KeyError."
PLAN = Plan((Query("e2", SIT, None, None, 2, 0.7),))


class Faulty:
    """The real store with switchable faults: raise, or answer slowly."""

    def __init__(self, store: QdrantPatternStore) -> None:
        self.store = store
        self.error: Exception | None = None
        self.delay = 0.0
        self.calls = 0
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()

    def answer(self, query: Query) -> Answer:
        with self._lock:
            self.calls += 1
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if self.delay:
                time.sleep(self.delay)
            if self.error is not None:
                raise self.error
            return self.store.answer(query)
        finally:
            with self._lock:
                self.active -= 1

    def cached(self, query: Query) -> Answer | None:
        return None  # every query goes through `answer`, where the faults are

    def close(self) -> None:
        self.store.close()


@pytest.fixture(scope="module")
def real_store() -> QdrantPatternStore:
    store = QdrantPatternStore(models().full)
    store.upsert([parse_pattern({"id": "p", "tier": "e2", "title": "t", "guidance": "g", "situation": SIT})])
    return store


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_answers_come_from_the_store(real_store: QdrantPatternStore) -> None:
    r = Retriever(Faulty(real_store), timeout_s=5)
    (a,) = asyncio.run(r.answer(PLAN))
    assert a.error is None and [h.pattern_id for h in a.hits] == ["p"]


def test_a_slow_store_yields_a_timeout_answer_not_a_late_decision(real_store: QdrantPatternStore) -> None:
    store = Faulty(real_store)
    store.delay = 0.5
    r = Retriever(store, timeout_s=0.05)
    (a,) = asyncio.run(r.answer(PLAN))
    assert a.error == "timeout after 50 ms" and a.hits == ()


def test_failures_rest_the_store_then_it_is_retried_and_recovers(real_store: QdrantPatternStore) -> None:
    store, clock = Faulty(real_store), Clock()
    seen: list[str] = []
    r = Retriever(
        store,
        timeout_s=5,
        retry_after_s=5,
        failures_to_trip=3,
        clock=clock,
        observe=lambda t, s, o: seen.append(o),
    )
    store.error = RuntimeError("disk on fire")
    for _ in range(3):
        (a,) = asyncio.run(r.answer(PLAN))
        assert a.error == "RuntimeError: disk on fire"
    assert not r.up and store.calls == 3
    (a,) = asyncio.run(r.answer(PLAN))  # resting: answered at once, store not called
    assert a.error is not None and a.error.startswith(
        "pattern store failing (RuntimeError: disk on fire), next try in"
    )
    assert store.calls == 3 and seen[-1] == "skipped"
    store.error = None
    clock.t += 5.1
    (a,) = asyncio.run(r.answer(PLAN))
    assert a.error is None and r.up and store.calls == 4


def test_an_unreachable_server_is_rested_after_the_first_failure() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = QdrantPatternStore(models().full, url=f"http://127.0.0.1:{port}", timeout_s=1)
    r = Retriever(store, timeout_s=2)
    (a,) = asyncio.run(r.answer(PLAN))
    # the collection check is the first call to fail
    assert a.error is not None and a.error.startswith("unreachable: ")
    assert not r.up
    (a,) = asyncio.run(r.answer(PLAN))
    assert a.error is not None and a.error.startswith("pattern store failing (unreachable")


def test_concurrency_is_bounded_even_for_abandoned_queries(real_store: QdrantPatternStore) -> None:
    store = Faulty(real_store)
    store.delay = 0.2
    r = Retriever(store, timeout_s=0.05, concurrency=1, failures_to_trip=100)

    async def many() -> list[list[Answer]]:
        return await asyncio.gather(*(r.answer(PLAN) for _ in range(4)))

    results = asyncio.run(many())
    assert all(ans[0].error is not None for ans in results)
    time.sleep(0.5)
    assert store.max_active == 1


def test_no_store_answers_with_the_reason() -> None:
    (a,) = Retriever(None).answer_now(PLAN)
    assert a.error == "no pattern store configured"


def test_replay_answers_synchronously(real_store: QdrantPatternStore) -> None:
    (a,) = Retriever(Faulty(real_store)).answer_now(PLAN)
    assert [h.pattern_id for h in a.hits] == ["p"]


def test_a_prefetched_plan_is_answered_without_waiting(real_store: QdrantPatternStore) -> None:
    store = Faulty(real_store)
    r = Retriever(store, timeout_s=5)

    async def go() -> list[Answer]:
        r.prefetch("run-1", PLAN)
        for _ in range(500):
            if r.ready("run-1", PLAN):
                break
            await asyncio.sleep(0.01)
        assert r.ready("run-1", PLAN)
        return await r.answer(PLAN, "run-1")

    (a,) = asyncio.run(go())
    assert [h.pattern_id for h in a.hits] == ["p"] and store.calls == 1
    assert not r.ready("run-1", PLAN)  # consumed: a second answer would query again


def test_a_prefetch_still_running_is_waited_for_at_most_the_deadline(real_store: QdrantPatternStore) -> None:
    store = Faulty(real_store)
    store.delay = 0.5
    r = Retriever(store, timeout_s=0.05, failures_to_trip=100)

    async def go() -> tuple[list[Answer], float]:
        r.prefetch("run-1", PLAN)
        assert not r.ready("run-1", PLAN)
        t0 = time.perf_counter()
        answers = await r.answer(PLAN, "run-1")
        return answers, time.perf_counter() - t0

    (a,), waited = asyncio.run(go())
    assert a.error == "timeout after 50 ms" and waited < 0.3
    assert store.calls == 1  # the prefetched query, not a second one


def test_a_prefetch_for_another_plan_is_not_used(real_store: QdrantPatternStore) -> None:
    store = Faulty(real_store)
    r = Retriever(store, timeout_s=5)
    other = Plan((Query("e2", "something else entirely", None, None, 2, 0.7),))

    async def go() -> list[Answer]:
        r.prefetch("run-1", other)
        return await r.answer(PLAN, "run-1")

    (a,) = asyncio.run(go())
    assert [h.pattern_id for h in a.hits] == ["p"]


def test_abandoned_prefetches_are_skipped_and_their_number_is_bounded(real_store: QdrantPatternStore) -> None:
    store = Faulty(real_store)
    store.delay = 0.2
    r = Retriever(store, timeout_s=5, concurrency=1, max_prefetched=2)

    async def go() -> None:
        for i in range(5):  # runs 0-2 are dropped (oldest first) and never reach the store
            r.prefetch(f"run-{i}", PLAN)
        r.discard("run-3")  # the run ended
        await asyncio.sleep(0.6)

    asyncio.run(go())
    assert store.calls <= 2  # the first (already running) and run-4's
    assert r.ready("run-4", PLAN) and not r.ready("run-3", PLAN)


def test_e3_does_not_queue_behind_an_embedding(real_store: QdrantPatternStore) -> None:
    store = Faulty(real_store)
    r = Retriever(store, timeout_s=5, concurrency=1)
    e3 = Plan((Query("e3", None, None, None, 32, None),))

    async def go() -> float:
        store.delay = 0.3
        r.prefetch("run-1", PLAN)  # occupies the only embedding thread
        await asyncio.sleep(0.05)
        store.delay = 0.0
        t0 = time.perf_counter()
        await r.answer(e3, "run-2")
        return time.perf_counter() - t0

    assert asyncio.run(go()) < 0.2


def test_fresh_e3_rules_are_answered_on_the_event_loop_without_a_thread(
    real_store: QdrantPatternStore,
) -> None:
    r = Retriever(real_store, timeout_s=5)
    e3 = Plan((Query("e3", None, None, None, 32, None),))
    real_store.answer(e3.queries[0])  # warm the store's 10 s cache
    assert r.ready("run-1", e3)
    before = r._quick._work_queue.qsize() if hasattr(r._quick, "_work_queue") else 0
    (a,) = asyncio.run(r.answer(e3, "run-1"))
    assert a.error is None and a.tier == "e3"
    assert getattr(r._quick, "_threads", set()) == set() and before == 0  # no thread was started
