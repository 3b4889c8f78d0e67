"""Eviction without a broker: requests go through the run's own order and respect versions."""

from __future__ import annotations

import asyncio

import orjson

from streams.core.etrace_rules import Plan, Query
from streams.core.monitors import Semantics
from streams.core.retention import OTHER_RUN, evict_request, parse_evict, version
from tests.factories import run_finish, run_start, step
from tests.unit.worker.harness import GatedStore, Rig, rig


def test_an_expired_run_is_asked_for_once_then_evicted_through_its_partition(sem: Semantics) -> None:
    async def go() -> None:
        r = rig(sem, GatedStore(), retention_s=60.0)
        for ev in (run_start("r"), step("r", 1), run_finish("r")):
            await r.feed(ev)
            await r.drain()
        assert await r.retention.sweep(r.now[0] + 30) == 0  # not expired yet
        assert await r.retention.sweep(r.now[0] + 61) == 1
        assert await r.retention.sweep(r.now[0] + 62) == 0  # asked already, not applied yet
        key, value, _ = r.steps_sent[0]
        assert key == b"r" and parse_evict(value) is not None
        r.now[0] += 61
        await r.feed(value, key=key)  # the request comes back in order with the run's events
        assert r.runs.lookup("r") is None and b"r" not in r.table
        assert r.runs.finished == 0 and b"r" not in r.runs.seen
        assert r.deadletters == []

    asyncio.run(go())


def test_eviction_respects_versions_a_run_that_moved_on_is_kept(sem: Semantics) -> None:
    async def go() -> None:
        r = rig(sem, GatedStore(), idle_s=60.0)
        for ev in (run_start("r"), step("r", 1)):
            await r.feed(ev)
            await r.drain()
        r.now[0] += 61
        assert await r.retention.sweep(r.now[0]) == 1
        key, request, _ = r.steps_sent[0]
        await r.feed(step("r", 2))  # the run moved on before the request came back
        await r.drain()
        await r.feed(request, key=key)
        st = r.runs.lookup("r")
        assert st is not None and st.last_step == 2
        assert r.deadletters == []  # stale, not refused

    asyncio.run(go())


async def one_idle_run(sem: Semantics, control_key: str = "k") -> tuple[Rig, tuple[int, bool, int]]:
    """A rig holding run "r" (idle timeout 60 s) and the run's version."""
    r = rig(sem, GatedStore(), idle_s=60.0, control_key=control_key)
    await r.feed(run_start("r"))
    await r.drain()
    st = r.runs.lookup("r")
    assert st is not None
    return r, version(st)


def test_a_forged_or_misrouted_eviction_is_refused_and_the_run_kept(sem: Semantics) -> None:
    async def go() -> None:
        r, ver = await one_idle_run(sem)
        r.now[0] += 61
        await r.feed(evict_request("r", ver, "not-the-key"), key=b"r")
        await r.feed(evict_request("r", ver, "k"), key=b"other")
        assert r.runs.lookup("r") is not None
        assert [d["reason"] for d in r.deadletters] == ["invalid_control", "invalid_control"]

    asyncio.run(go())


def test_without_a_control_key_a_run_that_is_not_expired_is_not_evicted(sem: Semantics) -> None:
    async def go() -> None:
        r, ver = await one_idle_run(sem, control_key="")  # unsigned records: anyone may write one
        await r.feed(evict_request("r", ver), key=b"r")  # matches the run, but too early
        assert r.runs.lookup("r") is not None
        assert [d["reason"] for d in r.deadletters] == ["invalid_control"]
        assert "is not expired" in r.deadletters[0]["detail"]

    asyncio.run(go())


def test_a_request_made_for_an_earlier_run_of_the_id_is_refused(sem: Semantics) -> None:
    async def go() -> None:
        r, ver = await one_idle_run(sem)
        r.now[0] += 61
        earlier = evict_request("r", (*ver[:3], 1_600_000_000.0), "k")  # signed, another run_start ts
        await r.feed(earlier, key=b"r")
        assert r.runs.lookup("r") is not None
        assert [d["detail"] for d in r.deadletters] == [OTHER_RUN]

    asyncio.run(go())


def test_an_evicted_run_leaves_every_per_run_structure(sem: Semantics) -> None:
    """An abandoned run never sends run_finish: its eviction is what frees what the worker
    keeps for it (assemble wires `on_delete` to the retriever as here)."""

    async def go() -> None:
        r = rig(sem, GatedStore(), idle_s=60.0)
        retriever = r.processor.retriever
        r.runs.on_delete.append(retriever.discard)
        await r.feed(run_start("r"))
        await r.drain()
        retriever.prefetch("r", Plan((Query("e2", "a situation", None, None, 2, 0.7),)))
        assert retriever.prefetched == 1
        r.now[0] += 61
        assert await r.retention.sweep(r.now[0]) == 1 and r.retention.asked == 1
        key, request, _ = r.steps_sent[0]
        await r.feed(request, key=key)
        assert r.runs.lookup("r") is None
        assert retriever.prefetched == 0 and r.retention.asked == 0
        assert r.runs.decoded_kept == 0 and len(r.runs.seen) == 0 and len(r.runs.held) == 0

    asyncio.run(go())


def test_a_request_whose_run_left_another_way_is_forgotten(sem: Semantics) -> None:
    async def go() -> None:
        r = rig(sem, GatedStore(), idle_s=60.0)
        await r.feed(run_start("r"))
        await r.drain()
        r.now[0] += 61
        assert await r.retention.sweep(r.now[0]) == 1 and r.retention.asked == 1
        r.runs.recount({})  # a rebalance took the run's partition: the request is not ours
        await r.retention.sweep(r.now[0])
        assert r.retention.asked == 0

    asyncio.run(go())


def test_an_idle_run_evicted_without_run_finish_sends_one_abandoned_outcome(sem: Semantics) -> None:
    async def go() -> None:
        r = rig(sem, GatedStore(), idle_s=60.0)
        for ev in (
            run_start("idle"),
            step("idle", 1),
            run_start("done"),
            step("done", 1),
            run_finish("done"),
        ):
            await r.feed(ev)
            await r.drain()
        assert [k for k, _ in r.outcomes] == [b"done"]  # the finished run's, on its run_finish
        r.now[0] += 61
        assert await r.retention.sweep(r.now[0]) == 1  # the finished one is kept longer
        for key, value, _ in r.steps_sent:
            await r.feed(value, key=key)
        assert r.runs.lookup("idle") is None
        (key, value) = r.outcomes[1]
        rec = orjson.loads(value)
        assert key == b"idle" and (rec["outcome"], rec["ended_by"], rec["steps"]) == (
            "abandoned",
            "evicted",
            1,
        )
        assert len(r.outcomes) == 2
        body = r.metrics.render()[0].decode()
        assert (
            'rb_runs_finished_total{arm="none",experiment="none",org="default",outcome="abandoned"} 1.0'
            in body
        )
        assert (
            'rb_runs_finished_total{arm="none",experiment="none",org="default",outcome="success"} 1.0' in body
        )

    asyncio.run(go())


def test_a_copy_of_a_run_finish_re_sends_the_same_outcome_bytes_and_counts_once(sem: Semantics) -> None:
    """A worker killed after storing the finished state, before the record reached the broker,
    reads the run_finish again on restart: it must send the record then, and the same one."""

    async def go() -> None:
        r = rig(sem, GatedStore())
        for ev in (
            run_start("r"),
            step("r", 1),
            run_finish("r", "failure: boom"),
            run_finish("r", "success"),
        ):
            await r.feed(ev)
            await r.drain()
        assert len(r.outcomes) == 2 and r.outcomes[0] == r.outcomes[1]
        assert orjson.loads(r.outcomes[0][1])["outcome"] == "failure: boom"  # the first finish holds
        body = r.metrics.render()[0].decode()
        assert 'outcome="failure"} 1.0' in body and "rb_run_steps_count" in body

    asyncio.run(go())


def test_an_idle_run_stays_stored_until_its_abandoned_record_is_on_the_broker(sem: Semantics) -> None:
    """Removed first, a kill -9 before the record left the producer would lose both the record
    and the state that makes it: the eviction waits for the record's delivery."""

    async def go() -> None:
        r = rig(sem, GatedStore(), idle_s=60.0)
        seen: list[tuple[bool, bool]] = []

        async def send_outcome(key: bytes, value: bytes, *, delivered: bool = False) -> None:
            seen.append((delivered, r.runs.lookup(key.decode()) is not None))

        r.processor._send_outcome = send_outcome
        await r.feed(run_start("idle"))
        await r.drain()
        r.now[0] += 61
        assert await r.retention.sweep(r.now[0]) == 1
        key, value, _ = r.steps_sent[0]
        await r.feed(value, key=key)
        assert seen == [(True, True)]  # waited for, with the state still there
        assert r.runs.lookup("idle") is None and b"idle" not in r.table

    asyncio.run(go())
