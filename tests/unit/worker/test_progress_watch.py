"""The progress watch without a broker: a worker that owns partitions with events waiting and
evaluates none is not ready past the threshold, and exits past the longer one (issue 38: a
worker restarted after kill -9 sat 120 s on 4 partitions, 0 processed, `/ready` 200)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest

from streams.worker import gauges
from streams.worker.ack_order import AckOrder
from streams.worker.gauges import PartitionProbe, ProgressWatch
from streams.worker.metrics import Metrics
from streams.worker.run_table import RunTable
from tests.factories import run_start, step
from tests.unit.worker.harness import GatedStore, rig

STEPS = "rb.steps"


@dataclass(frozen=True)
class TP:
    topic: str
    partition: int


P0, P1 = TP(STEPS, 0), TP(STEPS, 1)


class Consumer:
    """What the probe reads of Faust's consumer: the assignment, high watermarks (known after
    a fetch) and positions (None: the consumer has none, e.g. no group coordinator: hangs)."""

    def __init__(self, high: dict[TP, int | None], position: dict[TP, int | None]) -> None:
        self.high, self.pos = high, position
        self.asked: list[TP] = []

    def assignment(self) -> set[TP]:
        return set(self.high)

    def highwater(self, tp: TP) -> int | None:
        return self.high[tp]

    async def position(self, tp: TP) -> int:
        self.asked.append(tp)
        pos = self.pos.get(tp)
        if pos is None:
            await asyncio.sleep(3600)  # aiokafka waits for a position that never comes
        assert pos is not None
        return pos


class Rig:
    def __init__(
        self, consumer: Consumer, exit_after_s: float = 0.0, processed: dict[Any, int] | None = None
    ) -> None:
        self.now = [100.0]
        self.active = [True]
        self.processed: dict[Any, int] = {} if processed is None else processed
        self.stuck: list[str] = []
        self.metrics = Metrics(process=False)
        self.consumer = consumer
        self.probe = PartitionProbe(
            self.metrics,
            RunTable({}, 10, lambda _run_id: 0, 4),
            lambda: consumer,
            {STEPS},
            AckOrder(),
            self.processed,
            watch=ProgressWatch(30.0, exit_after_s, self.stuck.append),
            active=lambda: self.active[0],
            clock=lambda: self.now[0],
        )

    def tick(self, seconds: float = 1.0) -> dict[str, float]:
        self.now[0] += seconds
        asyncio.run(self.probe.publish())
        return self.probe.not_progressing

    def gauge(self, partition: str) -> float | None:
        return self.metrics.registry.get_sample_value("rb_progress_stall_seconds", {"partition": partition})


@pytest.fixture(autouse=True)
def quick_position(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gauges, "POSITION_TIMEOUT_S", 0.01)


def test_a_restarted_worker_with_events_waiting_and_no_position_is_not_ready_and_exits_later():
    r = Rig(Consumer({P0: 50, P1: None}, {}), exit_after_s=120.0)  # P1: never fetched
    assert r.tick() == {}
    for _ in range(28):
        assert r.tick() == {}
    assert r.gauge("0") == 0.0
    assert r.tick(2.0) == {"0": 30.0, "1": 30.0}  # the clock started at the first look
    assert r.gauge("0") == 30.0 and r.gauge("1") == 30.0
    assert r.stuck == []
    r.tick(90.0)
    assert len(r.stuck) == 1 and "no progress for 120s on partitions 0, 1" in r.stuck[0]
    assert "RB_STALL_EXIT_S=120" in r.stuck[0] and "nothing is lost" in r.stuck[0]
    r.tick()
    assert len(r.stuck) == 1  # one line, once


def test_an_idle_worker_is_ready_and_asks_for_positions_once_per_threshold():
    c = Consumer({P0: 7, P1: 0}, {P0: 7, P1: 0})  # everything read: nothing waiting
    r = Rig(c, exit_after_s=60.0)
    for _ in range(100):
        assert r.tick() == {}
    assert 4 <= len(c.asked) <= 8  # each partition every ~30 s, not every second
    assert r.stuck == []


def test_a_worker_evaluating_events_is_progressing_whatever_its_lag():
    c = Consumer({P0: 10_000}, {})
    r = Rig(c, exit_after_s=60.0)
    for k in range(200):
        r.processed[P0] = k  # one event a second, far behind
        assert r.tick() == {}
    assert c.asked == [] and r.stuck == []


def test_a_partition_that_stops_evaluating_with_lag_is_reported_from_its_own_offsets():
    c = Consumer({P0: 100}, {})  # no position needed: this ownership evaluated events
    r = Rig(c)
    r.tick()
    r.processed[P0] = 40
    r.tick()
    for _ in range(29):
        assert r.tick() == {}
    assert r.tick() == {"0": 30.0}
    assert c.asked == []
    r.processed[P0] = 41  # it moves again
    assert r.tick() == {}


def test_a_partition_caught_up_by_its_own_offsets_is_not_stalled():
    r = Rig(Consumer({P0: 41}, {}))
    r.tick()
    r.processed[P0] = 40  # the last offset: nothing waiting after it
    for _ in range(100):
        assert r.tick() == {}


def test_nothing_counts_while_the_tables_recover_or_a_rebalance_runs():
    r = Rig(Consumer({P0: 50}, {}), exit_after_s=60.0)
    r.active[0] = False
    for _ in range(300):
        assert r.tick() == {}
    r.active[0] = True
    for _ in range(29):
        assert r.tick() == {}
    assert r.tick() == {"0": 30.0}
    assert r.stuck == []


def test_an_offset_from_an_earlier_ownership_is_not_taken_for_progress_or_position():
    c = Consumer({P0: 500}, {P0: 500})
    r = Rig(c)
    r.processed[P0] = 10  # evaluated long ago, before the partition went to another worker
    for _ in range(100):
        assert r.tick() == {}  # the position says nothing waits
    assert c.asked


def test_a_revoked_partition_is_forgotten():
    c = Consumer({P0: 50, P1: 50}, {})
    r = Rig(c)
    for _ in range(31):
        r.tick()
    assert set(r.probe.not_progressing) == {"0", "1"}
    del c.high[P1]
    assert r.tick() == {"0": 31.0}
    assert r.gauge("1") is None


class KeyTP(NamedTuple):
    """A partition as Faust names it (`.topic`, `.partition`), equal to the harness's tuple."""

    topic: str
    partition: int


def test_an_idle_worker_whose_held_run_was_evaluated_last_is_not_stalled(sem: Any) -> None:
    """A run's event queued behind its pending E-trace event is evaluated after later offsets
    of other runs on its partition. Once everything is answered nothing waits, however long
    the worker then stays idle: it neither turns not ready nor exits."""
    store = GatedStore(hold=1)
    w = rig(sem, store, partitions=1)  # one partition: one offset order
    tp = KeyTP(STEPS, 0)
    c = Consumer({tp: 0}, {tp: 0})
    r = Rig(c, exit_after_s=60.0, processed=w.processor.processed)
    r.tick()  # owned before its events come: the watch follows this ownership's offsets

    async def go() -> None:
        await w.feed(run_start("slow"), topic=STEPS)  # 0: its E-trace query waits on the gate
        await w.feed(step("slow", 1), topic=STEPS)  # 1: queued behind it, evaluated last
        await w.feed(run_start("fast"), topic=STEPS)  # 2, 3: another run, evaluated first
        await w.feed(step("fast", 1), topic=STEPS)
        for _ in range(200):
            if len(w.steps_of("fast")) == 2:
                break
            await asyncio.sleep(0.01)
        assert w.steps_of("slow") == []
        store.gate.set()
        await w.drain()

    asyncio.run(go())
    assert w.steps_of("slow") == [0, 1] and w.steps_of("fast") == [0, 1]  # every event answered
    c.high[tp] = c.pos[tp] = 4
    for _ in range(200):
        assert r.tick() == {}
    assert r.stuck == []
    assert r.metrics.registry.get_sample_value("rb_consumer_lag_messages", {"partition": "0"}) == 0


def test_ready_is_503_and_names_the_partitions_not_progressing():
    from streams.worker.views import ready_answer
    from tests.unit.worker.test_views import View

    assert ready_answer(View(), True, {}, {}) == (200, {"ready": True})
    assert ready_answer(View(), True, {}, {"0": 31.0}) == (
        503,
        {"ready": False, "not_progressing": {"0": 31.0}},
    )
    assert ready_answer(View(), True, {"3": 45.0}, {"0": 31.0}) == (
        503,
        {"ready": False, "stalled_partitions": {"3": 45.0}, "not_progressing": {"0": 31.0}},
    )
