"""The worker's per-event glue without a broker: order, acks, redelivery, error boundary."""

from __future__ import annotations

import asyncio

import pytest

from streams.core.monitors import Semantics
from tests.factories import run_finish, run_start, step
from tests.unit.worker.harness import GatedStore, rig


def test_a_runs_events_wait_behind_its_pending_etrace_event_while_other_runs_proceed(sem: Semantics) -> None:
    async def go() -> None:
        store = GatedStore(hold=1)
        r = rig(sem, store, partitions=1)  # one partition: one offset order
        await r.feed(run_start("slow"))  # offset 0: its E3 query (the first) waits on the gate
        await r.feed(step("slow", 1))  # offset 1: queued behind it
        await r.feed(run_start("fast"))  # offsets 2, 3: another run, not held back
        await r.feed(step("fast", 1))
        for _ in range(200):
            if len(r.steps_of("fast")) == 2:
                break
            await asyncio.sleep(0.01)
        assert r.steps_of("fast") == [0, 1]
        assert r.steps_of("slow") == []
        assert r.stream.acked == []  # offset 0 is pending: nothing after it may be acked
        store.gate.set()
        await r.drain()
        assert r.steps_of("slow") == [0, 1]  # in step order
        assert r.stream.acked == [0, 1, 2, 3]  # released as one contiguous prefix
        assert r.processor.ack_order.waiting() == 0

    asyncio.run(go())


def test_acks_are_released_only_as_a_contiguous_prefix_of_offsets(sem: Semantics) -> None:
    async def go() -> None:
        store = GatedStore(hold=1)
        r = rig(sem, store, partitions=1)  # one partition: one offset order
        await r.feed(run_start("a"))  # 0: waits
        await r.feed(b"not json", key=b"x")  # 1: dead-lettered inline
        await r.feed(step("nobody", 1))  # 2: unknown run, dead-lettered inline
        await asyncio.sleep(0.05)
        assert [d["reason"] for d in r.deadletters] == ["invalid_json", "unknown_run"]
        assert r.stream.acked == []
        store.gate.set()
        await r.drain()
        assert r.stream.acked == [0, 1, 2]

    asyncio.run(go())


def test_a_replayed_step_gets_its_decision_resent_only_if_it_is_the_runs_last(sem: Semantics) -> None:
    async def go() -> None:
        r = rig(sem, GatedStore())
        for ev in (run_start("r"), step("r", 1), step("r", 2)):
            await r.feed(ev)
            await r.drain()
        r.now[0] += 50.0  # redelivered after a crash, later
        await r.feed(step("r", 1))  # answered before step 2 came: nothing
        await r.feed(step("r", 2))  # its decision may have died with the worker: re-sent as is
        await r.drain()
        assert r.decisions[-1] == r.decisions[-2]  # processed_ts of the first copy too
        await r.feed(step("r", 3))
        await r.feed(run_finish("r"))
        await r.drain()
        assert r.steps_of("r") == [0, 1, 2, 2, 3]
        assert r.deadletters == []
        assert r.stream.acked == list(range(7))
        assert r.metrics.duplicates.labels("step")._value.get() == 2

    asyncio.run(go())


def test_a_failure_inside_the_pipeline_is_dead_lettered_and_acked(
    sem: Semantics, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def go() -> None:
        r = rig(sem, GatedStore())
        await r.feed(run_start("r"))
        await r.drain()

        async def broken(key: bytes, value: bytes, partition: int, *, tenant: str | None) -> None:
            raise RuntimeError("producer gone")

        monkeypatch.setattr(r.processor, "_send_decision", broken)
        await r.feed(step("r", 1))
        await r.drain()
        assert [d["reason"] for d in r.deadletters] == ["internal_error"]
        assert "send: RuntimeError" in r.deadletters[0]["detail"]
        assert r.stream.acked == [0, 1]
        assert r.runs.lookup("r") is not None and r.runs.lookup("r").last_step == 1  # type: ignore[union-attr]

    asyncio.run(go())


def test_run_counts_follow_every_stored_state(sem: Semantics) -> None:
    async def go() -> None:
        r = rig(sem, GatedStore())
        for ev in (run_start("a"), run_start("b"), step("a", 1), run_finish("b")):
            await r.feed(ev)
            await r.drain()
        assert r.runs.active == 1 and r.runs.finished == 1
        counted = (+r.runs.by_state, r.runs.finished, dict(r.runs.seen))
        r.runs.recount()  # what a recovery rebuilds from the table
        assert (+r.runs.by_state, r.runs.finished, dict(r.runs.seen)) == counted

    asyncio.run(go())


def test_queries_a_step_plans_run_after_its_decision_and_the_next_decision_does_not_wait(
    sem: Semantics,
) -> None:
    async def go() -> None:
        store = GatedStore()
        r = rig(sem, store)
        await r.feed(run_start("r"))
        await r.drain()
        await r.feed(step("r", 1))  # plans E2: its decision goes out at once, saying so
        assert r.steps_of("r") == [0, 1] and len(r.processor.chains) == 0
        assert "E2 retrieving" in (r.decisions[-1]["skipped_reason"] or "")
        for _ in range(500):  # the query runs in the background after the decision
            if "e2" in store.asked:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        await r.feed(step("r", 2))  # answered from the prefetch: decided inline, no task
        assert r.steps_of("r") == [0, 1, 2] and len(r.processor.chains) == 0
        assert r.decisions[-1]["skipped_reason"] is None
        assert store.asked.count("e2") == 1
        waits = r.metrics.etrace_waits.collect()[0].samples
        count = next(s.value for s in waits if s.name.endswith("_count"))
        zero = next(s.value for s in waits if s.name.endswith("_bucket") and s.labels["le"] == "0.0005")
        assert count == 2 and zero >= 1  # run_start's E3 and step 2's E2 (which did not wait)

    asyncio.run(go())


def test_a_finished_run_drops_its_prefetched_queries(sem: Semantics) -> None:
    async def go() -> None:
        r = rig(sem, GatedStore())
        await r.feed(run_start("r"))
        await r.drain()
        await r.feed(step("r", 1))
        assert "r" in r.processor.retriever._prefetched
        await r.feed(run_finish("r"))
        assert "r" not in r.processor.retriever._prefetched

    asyncio.run(go())


def _drifter_steps() -> list[dict[str, object]]:
    from streams.local.simulate import trajectory

    task, steps = trajectory("drifter", 41, 0)
    return [run_start("d", task=task)] + [step("d", k, **s) for k, s in enumerate(steps, start=1)]


def test_a_drift_checks_texts_are_handed_to_the_prefetch_after_the_planning_decision(sem: Semantics) -> None:
    async def go() -> None:
        handed: list[tuple[int, tuple[str, ...]]] = []
        r = rig(sem, GatedStore(), prefetch=lambda texts: handed.append((len(r.decisions), tuple(texts))))
        for ev in _drifter_steps():
            await r.feed(ev)
            await r.drain()
        assert handed, "the drifter's checks were never handed over"
        for sent_before, texts in handed:
            assert len(texts) == 2 and all(texts)
            planned = r.decisions[sent_before - 1]  # the decision sent just before the handover
            nxt = r.decisions[sent_before]
            assert nxt["step"] == planned["step"] + 1
        assert any("silent_topic_drift" in d["monitors"]["fired"] for d in r.decisions)

    asyncio.run(go())


def test_a_failing_prefetch_is_counted_and_the_run_goes_on(sem: Semantics) -> None:
    async def go() -> None:
        def broken(texts: object) -> None:
            raise RuntimeError("embedding process gone")

        r = rig(sem, GatedStore(), prefetch=broken)
        events = _drifter_steps()
        for ev in events:
            await r.feed(ev)
            await r.drain()
        assert r.steps_of("d") == list(range(len(events)))  # every event answered
        assert r.deadletters == []
        assert r.metrics.internal_errors.labels("prefetch")._value.get() > 0
        assert r.stream.acked == list(range(len(events)))

    asyncio.run(go())


def test_a_dead_letter_is_logged_at_warning_with_its_run_and_reason_and_a_flood_is_counted(
    sem: Semantics, caplog: pytest.LogCaptureFixture
) -> None:
    from streams.worker import processor

    r = rig(sem, partitions=1)

    async def feed() -> None:
        await r.feed(run_start("bad-run", fsm_thresholds={"slow_treshold": 0.5}))
        for i in range(processor.DEADLETTER_LOG_LINES + 5):
            await r.feed(step(f"nobody-{i}", 1))

    with caplog.at_level("INFO", logger=processor.__name__):
        asyncio.run(feed())
    lines = [rec for rec in caplog.records if "dead-lettered" in rec.getMessage()]
    assert all(rec.levelname == "WARNING" for rec in lines)
    first = lines[0].getMessage()
    assert (
        "run bad-run (steps[0] offset 0)" in first
        and "invalid_fsm_thresholds: unknown fsm_thresholds" in first
    )
    assert len(lines) == processor.DEADLETTER_LOG_LINES  # the other 6 wait for the window's end
    assert len(r.deadletters) == processor.DEADLETTER_LOG_LINES + 6
    r.processor._dl_window = (-processor.DEADLETTER_LOG_WINDOW_S, *r.processor._dl_window[1:])
    asyncio.run(r.feed(step("nobody-else", 1)))
    assert "6 more dead-letters" in caplog.records[-2].getMessage()


def test_the_worker_says_a_runs_later_events_follow_its_refused_run_start_as_replay_does(
    sem: Semantics,
) -> None:
    async def go() -> None:
        r = rig(sem, GatedStore(), partitions=1)
        await r.feed(run_start("m", escalaton={"stop_after": 2}))
        await r.feed(step("m", 1))
        await r.drain()
        first, later = r.deadletters
        assert first["reason"] == "invalid_run_start" and later["reason"] == "unknown_run"
        assert later["detail"].endswith(f"its run_start was refused (invalid_run_start: {first['detail']})")

    asyncio.run(go())
