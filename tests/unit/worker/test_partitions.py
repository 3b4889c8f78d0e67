"""Events on another partition than their run's are refused `wrong_partition`, in both modes:
a run's state, its share of the per-org cap and its evictions live on its key's partition, so a
misrouted copy must never open a second state where none of them reach it."""

from __future__ import annotations

import asyncio

from streams.core.monitors import Semantics
from streams.core.retention import RunsHeld, evict_request, version
from streams.kafka import wire
from streams.worker.state_parts import is_part, run_key_of
from tests.factories import run_start, step
from tests.unit.worker.harness import PARTITIONS, GatedStore, Rig, key_partition, rig

TENANT_TOPICS = {"mt.alice.steps": "alice", "mt.bob.steps": "bob"}


def elsewhere(run_id: str) -> int:
    """A partition that is not the run's."""
    return (key_partition(run_id.encode()) + 1) % PARTITIONS


def capped(r: Rig, max_runs_per_org: int) -> None:
    """Give the rig's run table a per-org cap (split over its partitions)."""
    r.runs.held = RunsHeld(max_runs_per_org, lambda rid: wire.partition_for(rid, PARTITIONS), PARTITIONS)


def test_a_run_start_on_another_partition_is_dead_lettered_and_opens_nothing(sem: Semantics) -> None:
    async def go() -> Rig:
        r = rig(sem, GatedStore())
        await r.feed(run_start("stray"), partition=elsewhere("stray"))
        await r.drain()
        return r

    r = asyncio.run(go())
    assert r.decisions == []
    (dl,) = r.deadletters
    assert dl["reason"] == "wrong_partition" and dl["run_id"] == "stray"
    assert dl["source"]["partition"] == elsewhere("stray")
    assert f"hashes to partition {key_partition(b'stray')}" in dl["detail"]
    assert r.table == {} and len(r.runs.held) == 0
    assert r.processor.deadlettered.get("stray") is not None  # /runs/{id} says why


def test_a_misrouted_step_leaves_the_live_run_as_it_was(sem: Semantics) -> None:
    async def go() -> Rig:
        r = rig(sem, GatedStore())
        await r.feed(run_start("live"))
        await r.drain()
        await r.feed(step("live", 1, thought="forged"), partition=elsewhere("live"))
        await r.drain()
        await r.feed(step("live", 1))  # the run's own step 1 is still step 1
        await r.drain()
        return r

    r = asyncio.run(go())
    assert r.steps_of("live") == [0, 1]
    assert [d["reason"] for d in r.deadletters] == ["wrong_partition"]
    st = r.runs.lookup("live")
    assert st is not None and st.last_step == 1


def test_misrouted_run_starts_cannot_pass_the_cap_and_the_count_matches_the_table(sem: Semantics) -> None:
    """The issue's flood: 20 run_starts against a cap of 8, most produced to a wrong partition."""

    async def go() -> Rig:
        r = rig(sem, GatedStore())
        capped(r, 8)  # 2 per partition
        for i in range(20):
            rid = f"flood-{i}"
            await r.feed(run_start(rid, org_id="acme"), partition=elsewhere(rid) if i % 4 else None)
            await r.drain()
        return r

    r = asyncio.run(go())
    reasons = [d["reason"] for d in r.deadletters]
    assert reasons.count("wrong_partition") == 15
    records = [k for k in r.table if not is_part(k)]
    assert len(records) == len(r.runs.held) <= 8  # runs_held and table_entries agree
    for key in records:
        assert key_partition(key) == wire.partition_for(key.decode(), PARTITIONS)
    assert {run_key_of(k) for k in r.table if is_part(k)} == set(records)  # no run's parts without it


def test_an_eviction_record_on_another_partition_is_refused_and_the_run_stays(sem: Semantics) -> None:
    async def go() -> Rig:
        r = rig(sem, GatedStore(), idle_s=60.0, control_key="k")
        await r.feed(run_start("r"))
        await r.drain()
        st = r.runs.lookup("r")
        assert st is not None
        r.now[0] += 61  # idle: a record on the right partition would apply
        await r.feed(evict_request("r", version(st), "k"), key=b"r", partition=elsewhere("r"))
        return r

    r = asyncio.run(go())
    assert r.runs.lookup("r") is not None
    assert [(d["reason"], d["run_id"]) for d in r.deadletters] == [("wrong_partition", "r")]


def test_a_tenant_cannot_open_a_copy_of_another_tenants_run_on_another_partition(sem: Semantics) -> None:
    async def go() -> Rig:
        r = rig(sem, GatedStore(), tenant_of=TENANT_TOPICS.get)
        await r.feed(run_start("bobs-run", task="bob's task"), topic="mt.bob.steps")
        await r.drain()
        await r.feed(run_start("bobs-run"), topic="mt.alice.steps", partition=elsewhere("bobs-run"))
        await r.feed(step("bobs-run", 1), topic="mt.alice.steps", partition=elsewhere("bobs-run"))
        await r.feed(run_start("alices-own"), topic="mt.alice.steps", partition=elsewhere("alices-own"))
        await r.drain()
        await r.feed(step("bobs-run", 1), topic="mt.bob.steps")
        await r.drain()
        return r

    r = asyncio.run(go())
    assert [(d["reason"], d["run_id"]) for d in r.deadletters] == [
        ("wrong_partition", "bobs-run"),
        ("wrong_partition", "bobs-run"),
        ("wrong_partition", "alices-own"),
    ]
    st = r.runs.lookup("bobs-run")
    assert st is not None and st.config.org_id == "bob" and st.last_step == 1
    assert r.steps_of("bobs-run") == [0, 1]  # bob's own steps, nothing of alice's
    assert [k for k in r.table if not is_part(k)] == [b"bobs-run"] and len(r.runs.held) == 1
    assert {run_key_of(k) for k in r.table if is_part(k)} == {b"bobs-run"}
