"""Tenants share the worker's time: a tenant with a backlog is paced only while other tenants
are active, and two tenants' events of one run id never interleave."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from streams.core.monitors import Semantics
from streams.worker.fairness import (
    TENANT_FETCH_MAX_WAIT_MS,
    FairShare,
    share_fetched_records,
    shorten_fetch_wait,
)
from tests.factories import run_start
from tests.unit.worker.harness import GatedStore, rig


def test_a_tenant_alone_or_keeping_up_is_never_paused() -> None:
    now = [0.0]
    fair = FairShare(clock=lambda: now[0])
    assert fair.took("flood", 0.05, backlog=True) == 0.0  # alone
    now[0] += 0.1
    fair.took("calm", 0.01, backlog=False)
    assert fair.took("calm", 0.01, backlog=False) == 0.0  # keeping up: no backlog
    assert fair.paused_s == 0.0


def test_a_backlogged_tenant_gets_one_share_while_others_are_active() -> None:
    now = [0.0]
    fair = FairShare(window_s=5.0, max_pause_s=0.5, clock=lambda: now[0])
    fair.took("calm", 0.01, backlog=False)
    assert fair.took("flood", 0.04, backlog=True) == 0.04  # two active: at most half the time
    fair.took("third", 0.01, backlog=False)
    assert abs(fair.took("flood", 0.04, backlog=True) - 0.08) < 1e-9  # three: a third
    assert fair.took("flood", 2.0, backlog=True) == 0.5  # one very long event: capped
    now[0] += 5.1  # the others went quiet
    assert fair.took("flood", 0.04, backlog=True) == 0.0


def test_two_tenants_starting_one_run_id_at_once_are_taken_one_after_the_other(sem: Semantics) -> None:
    """Each tenant's topic has its own agent, so their events may be taken at once; the run
    is held from its lookup to its store, so the second start sees the first's run and is
    refused (org_mismatch), instead of both opening it."""
    topics = {"mt.alice.steps": "alice", "mt.bob.steps": "bob"}

    async def go() -> Any:
        r = rig(sem, GatedStore(), tenant_of=topics.get)
        plain = r.processor._send_decision

        async def slow_send(key: bytes, value: bytes, partition: int, *, tenant: str | None) -> None:
            await asyncio.sleep(0.02)  # a send that waits on the broker: the other agent runs
            await plain(key, value, partition, tenant=tenant)

        r.processor._send_decision = slow_send
        await asyncio.gather(
            r.feed(run_start("shared", e_traces_enabled=False), topic="mt.alice.steps"),
            r.feed(run_start("shared", e_traces_enabled=False), topic="mt.bob.steps"),
        )
        await r.drain()
        return r

    r = asyncio.run(go())
    assert [d["step"] for d in r.decisions] == [0]
    assert [d["reason"] for d in r.deadletters] == ["org_mismatch"]
    st = r.runs.lookup("shared")
    assert st is not None and st.config.org_id == "alice"
    assert len(r.processor.chains) == 0


def test_the_fetch_wait_is_shortened_on_the_started_consumer_and_refused_before_it() -> None:
    import inspect

    from aiokafka.consumer.fetcher import Fetcher

    # aiokafka reads the attribute for every fetch request it builds (an upgrade renaming it
    # would leave the worker on Faust's 1.5 s wait with only a warning).
    assert "self._fetch_max_wait_ms," in inspect.getsource(Fetcher._get_actions_per_node)
    fetcher = SimpleNamespace(_fetch_max_wait_ms=1500)
    started = SimpleNamespace(_thread=SimpleNamespace(_consumer=SimpleNamespace(_fetcher=fetcher)))
    assert shorten_fetch_wait(started) is True
    assert fetcher._fetch_max_wait_ms == TENANT_FETCH_MAX_WAIT_MS
    assert shorten_fetch_wait(SimpleNamespace(_thread=SimpleNamespace(_consumer=None))) is False


class _Records:
    """aiokafka's partition records as `FetchResult` reads them: an iterator whose
    `next_fetch_offset` follows what was taken."""

    def __init__(self, start: int, n: int) -> None:
        self._it = iter(range(start, start + n))
        self.next_fetch_offset = start

    def __iter__(self) -> _Records:
        return self

    def __next__(self) -> int:
        offset = next(self._it)
        self.next_fetch_offset = offset + 1
        return offset


class _State:
    """A partition's state in aiokafka's assignment, as the fetcher reads and moves it."""

    paused = False
    has_valid_position = True
    resume_fut = None
    highwater: int | None = None  # the broker's end at the last fetch

    def __init__(self) -> None:
        self.position = 0

    def consumed_to(self, offset: int) -> None:
        self.position = offset


def _fetcher_with(buffered: dict[Any, int], idle: tuple[Any, ...] = ()) -> Any:
    """A real aiokafka `Fetcher` (its own `fetched_records` and fetch planning) holding
    `buffered` (partition -> records waiting), in that order, as after fetches that came back
    in that order; `idle` partitions are assigned with nothing buffered. One broker (node 0)
    leads every partition."""
    from aiokafka.consumer.fetcher import Fetcher, FetchResult

    states = {tp: _State() for tp in (*buffered, *idle)}
    assignment = SimpleNamespace(active=True, state_value=states.__getitem__, tps=list(states))
    f = Fetcher.__new__(Fetcher)
    f._subscriptions = SimpleNamespace(reassignment_in_progress=False, is_assigned=lambda tp: True)
    f._client = SimpleNamespace(cluster=SimpleNamespace(leader_for_partition=lambda tp: 0))
    f._preferred_read_replica = {}
    f._in_flight = set()
    f._fetch_waiters = set()
    f._wait_consume_future = None
    f._closed = False
    f._fetcher_timeout, f._fetch_max_wait_ms, f._fetch_min_bytes = 0.2, 100, 1
    f._fetch_max_bytes, f._max_partition_fetch_bytes = 50 * 2**20, 2**20
    f._isolation_level, f._client_rack = 0, None
    f._assignment = assignment
    f._records = {
        tp: FetchResult(tp, assignment=assignment, partition_records=_Records(0, n), backoff=0.1)
        for tp, n in buffered.items()
    }
    return f


def _fetch_planned(fetcher: Any) -> list[tuple[str, int]]:
    """The partitions aiokafka's fetch routine would ask its broker for now (none while it
    waits out a backoff)."""
    requests = fetcher._get_actions_per_node(fetcher._assignment)[0]
    return sorted((topic, p[0]) for _, req in requests for topic, parts in req.topics for p in parts)


def test_a_hand_over_shares_its_records_between_the_partitions_that_have_some() -> None:
    """A small-step flood's fetch buffers hundreds of records per partition; aiokafka hands
    them over in buffer order, 12 at a time, so another tenant's record fetched after them
    waited for the flood's whole batch (2.4 s measured). Shared, it goes in the next one."""
    buffered = {"flood-0": 500, "flood-1": 500, "flood-2": 500, "flood-3": 500, "calm-0": 1}
    consumer = SimpleNamespace(_thread=SimpleNamespace(_consumer=SimpleNamespace(_fetcher=None)))
    assert share_fetched_records(consumer) is False  # not started yet

    async def hand_overs(fetcher: Any, n: int) -> list[dict[str, list[int]]]:
        return [await fetcher.fetched_records(set(buffered), timeout=0, max_records=12) for _ in range(n)]

    plain = asyncio.run(hand_overs(_fetcher_with(buffered), 3))
    assert [list(h) for h in plain] == [["flood-0"]] * 3  # the control: calm waits behind flood-0

    fetcher = _fetcher_with(buffered)
    consumer._thread._consumer._fetcher = fetcher
    assert share_fetched_records(consumer) is True
    assert share_fetched_records(consumer) is True  # once
    first = asyncio.run(hand_overs(fetcher, 1))[0]
    assert first["calm-0"] == [0]
    assert sum(len(v) for v in first.values()) <= 12 and len(first) == 5

    # every record handed over once, in order per partition, at most 12 per hand-over
    taken: dict[str, list[int]] = {k: list(v) for k, v in first.items()}
    for _ in range(2_000 // 12 + 10):  # (aiokafka finds a partition spent one call late)
        if not fetcher._records:
            break
        (h,) = asyncio.run(hand_overs(fetcher, 1))
        assert sum(len(v) for v in h.values()) <= 12
        for tp, offsets in h.items():
            taken.setdefault(tp, []).extend(offsets)
    assert taken == {tp: list(range(n)) for tp, n in buffered.items()}


def test_records_waiting_for_a_full_buffer_hold_back_no_other_partitions_fetch() -> None:
    """aiokafka sends its broker no fetch while any partition's fetched records are younger
    than 100 ms. The flood's records wait for its full buffer (Faust leaves the partition out
    of the hand-overs), so every flood fetch held calm's next fetch 100 ms: calm's p95 ~95 ms
    (BENCHMARKS.md section 10). Once a hand-over leaves them out, the rest is fetched at once,
    and the waiting records stay where they are until their partition is handed over again."""
    from aiokafka.structs import TopicPartition as TP

    flood, calm = TP("mt.flood.steps", 0), TP("mt.calm.steps", 0)

    async def go() -> None:
        fetcher = _fetcher_with({flood: 8}, idle=(calm,))
        assert _fetch_planned(fetcher) == []  # the control: aiokafka holds calm's fetch back
        fetcher._wait_consume_future = asyncio.get_running_loop().create_future()
        consumer = SimpleNamespace(_thread=SimpleNamespace(_consumer=SimpleNamespace(_fetcher=fetcher)))
        assert share_fetched_records(consumer) is True
        assert await fetcher.fetched_records({calm}, timeout=0, max_records=12) == {}  # flood left out
        assert _fetch_planned(fetcher) == [("mt.calm.steps", 0)]
        assert fetcher._wait_consume_future.done()  # the fetch routine looks again at once
        assert fetcher.fetched_records.released == 1
        got = await fetcher.fetched_records({calm, flood}, timeout=0, max_records=12)
        assert got == {flood: list(range(8))}  # nothing lost or skipped

    asyncio.run(go())


def test_records_of_a_partition_with_a_backlog_hold_back_no_fetch_but_a_caught_up_ones_do() -> None:
    """The flood's partitions that are still handed over take several hand-overs to empty
    (measured: 35 ms while calm's partitions went unasked). A partition further behind the
    broker's end than one hand-over holds nothing; a caught-up one (a calm tenant's step) keeps
    aiokafka's short hold, so that its partition is in the next fetch once its records are taken."""
    from aiokafka.structs import TopicPartition as TP

    flood, calm = TP("mt.flood.steps", 0), TP("mt.calm.steps", 0)

    def plan_with_flood_behind(behind: int) -> list[tuple[str, int]]:
        fetcher = _fetcher_with({flood: 8}, idle=(calm,))
        state = fetcher._assignment.state_value(flood)
        state.highwater = state.position + behind
        consumer = SimpleNamespace(_thread=SimpleNamespace(_consumer=SimpleNamespace(_fetcher=fetcher)))
        assert share_fetched_records(consumer) is True
        return _fetch_planned(fetcher)

    assert plan_with_flood_behind(300) == [("mt.calm.steps", 0)]
    assert plan_with_flood_behind(8) == []  # caught up: held, as aiokafka does


def test_a_hand_over_that_waited_for_a_fetch_still_shares_it() -> None:
    """A hand-over that found nothing buffered waits for the next fetch; aiokafka's would then
    hand over in buffer order (the flood's 12 first, calm's record in a later hand-over)."""
    flood = {f"flood-{i}": 200 for i in range(4)}

    async def arrive(fetcher: Any) -> None:
        from aiokafka.consumer.fetcher import FetchResult

        await asyncio.sleep(0.01)
        for tp, n in (*flood.items(), ("calm-0", 1)):  # one fetch, the flood's partitions first
            fetcher._records[tp] = FetchResult(
                tp, assignment=fetcher._assignment, partition_records=_Records(0, n), backoff=0.1
            )
        for waiter in list(fetcher._fetch_waiters):  # as aiokafka's fetch routine wakes them
            fetcher._notify(waiter)

    async def first_hand_over(shared: bool) -> Any:
        fetcher = _fetcher_with({}, idle=(*flood, "calm-0"))
        fetcher._loop = asyncio.get_running_loop()
        if shared:
            consumer = SimpleNamespace(_thread=SimpleNamespace(_consumer=SimpleNamespace(_fetcher=fetcher)))
            assert share_fetched_records(consumer) is True
        parts = {*flood, "calm-0"}
        got, _ = await asyncio.gather(
            fetcher.fetched_records(parts, timeout=2.0, max_records=12), arrive(fetcher)
        )
        return got

    assert list(asyncio.run(first_hand_over(shared=False))) == ["flood-0"]  # the control
    got = asyncio.run(first_hand_over(shared=True))
    assert got["calm-0"] == [0] and sum(len(v) for v in got.values()) <= 12


def test_a_hand_over_that_finds_no_fetch_returns_empty_at_its_timeout() -> None:
    async def go() -> Any:
        fetcher = _fetcher_with({}, idle=("calm-0",))
        fetcher._loop = asyncio.get_running_loop()
        consumer = SimpleNamespace(_thread=SimpleNamespace(_consumer=SimpleNamespace(_fetcher=fetcher)))
        share_fetched_records(consumer)
        got = await fetcher.fetched_records({"calm-0"}, timeout=0.05, max_records=12)
        return got, fetcher._fetch_waiters

    got, waiters = asyncio.run(go())
    assert got == {} and not waiters  # its waiter is gone, as aiokafka's own


def test_a_release_that_fails_leaves_aiokafkas_planning_running_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The release runs inside aiokafka's fetch routine, which an error would stop for good (no
    more fetches): an aiokafka whose internals moved keeps its own hold instead."""
    from aiokafka.structs import TopicPartition as TP

    from streams.worker.fairness import SharedHandOver

    def moved(self: SharedHandOver, wake: bool) -> None:
        raise AttributeError("_backoff")

    monkeypatch.setattr(SharedHandOver, "_release_waiting", moved)
    flood, calm = TP("mt.flood.steps", 0), TP("mt.calm.steps", 0)
    fetcher = _fetcher_with({flood: 8}, idle=(calm,))
    consumer = SimpleNamespace(_thread=SimpleNamespace(_consumer=SimpleNamespace(_fetcher=fetcher)))
    assert share_fetched_records(consumer) is True
    with caplog.at_level("WARNING", logger="streams.worker.fairness"):
        assert _fetch_planned(fetcher) == []  # aiokafka's own plan: held, as before the fix
        assert _fetch_planned(fetcher) == []
    assert [r.getMessage().startswith("could not release") for r in caplog.records] == [True]
