"""Tenants share the worker's time: a tenant with a backlog is paced only while other tenants
are active, and two tenants' events of one run id never interleave."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

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


def _fetcher_with(buffered: dict[str, int]) -> Any:
    """A real aiokafka `Fetcher` (its own `fetched_records`) holding `buffered` (partition ->
    records waiting), in that order, as after fetches that came back in that order."""
    from aiokafka.consumer.fetcher import Fetcher, FetchResult

    class State:
        paused = False

        def __init__(self) -> None:
            self.position = 0

        def consumed_to(self, offset: int) -> None:
            self.position = offset

    states = {tp: State() for tp in buffered}
    assignment = SimpleNamespace(active=True, state_value=states.__getitem__)
    f = Fetcher.__new__(Fetcher)
    f._subscriptions = SimpleNamespace(reassignment_in_progress=False, is_assigned=lambda tp: True)
    f._wait_consume_future = None
    f._closed = False
    f._records = {
        tp: FetchResult(tp, assignment=assignment, partition_records=_Records(0, n), backoff=0.1)
        for tp, n in buffered.items()
    }
    return f


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
