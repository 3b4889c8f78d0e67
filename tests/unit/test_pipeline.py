"""The pipeline around the engine: evictions, the per-org cap, seal and store, in order."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from streams.core.engine import Engine
from streams.core.events import Limits
from streams.core.results import Decided, Refused, Sealed
from streams.core.retention import BAD_SIGNATURE, RunsHeld, evict_request, version
from streams.kafka import wire
from streams.pipeline import Evicted, EvictionRule, MemoryRuns, Pipeline
from streams.replay import Replayer
from tests.factories import b, run_finish, run_start, step
from tests.models import semantics

SEM = semantics()


def pipeline(cap: int = 0, key: str = "k", windows: tuple[float, float] | None = None) -> Pipeline:
    return Pipeline(
        Engine(None, SEM, Limits()), MemoryRuns(RunsHeld(cap, lambda _: 0, 1)), EvictionRule(key, windows)
    )


def run(p: Pipeline, raw: bytes, now: float = 1.0, key: object = None) -> Sealed | Evicted:
    return p.run(raw, now, lambda plan: [], **({} if key is None else {"key": key}))


def test_an_outcome_is_frozen_and_sealing_it_leaves_it_as_it_was() -> None:
    p = pipeline()
    out = p.take(b(run_start("r", e_traces_enabled=True)), 1.0)
    assert isinstance(out, Decided) and out.effects.answer_now  # E3 on the first call
    before = orjson.dumps(out.decision), out.state.encode()
    sealed = p.seal(out, [])
    assert sealed.decision is not out.decision and "E3" in (sealed.decision or {})["skipped_reason"]
    assert (orjson.dumps(out.decision), out.state.encode()) == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.now = 2.0  # type: ignore[misc]


def test_a_signed_eviction_for_the_runs_state_removes_it_and_the_org_may_start_another() -> None:
    p = pipeline(cap=1)
    run(p, b(run_start("a")))
    refused = run(p, b(run_start("b")))
    assert isinstance(refused, Sealed) and refused.rejection and refused.rejection.reason == "too_many_runs"
    run(p, b(run_finish("a")))
    st = p.runs.lookup("a")
    assert st is not None
    out = run(p, evict_request("a", version(st), "k"), key=b"a")
    assert isinstance(out, Evicted) and out.applied == "finished" and p.runs.lookup("a") is None
    started = run(p, b(run_start("b")))
    assert isinstance(started, Sealed) and started.opens_run


def test_a_stale_eviction_keeps_the_run_and_a_forged_one_is_dead_lettered() -> None:
    p = pipeline()
    run(p, b(run_start("r")))
    st = p.runs.lookup("r")
    assert st is not None
    old = version(st)
    run(p, b(step("r", 1)))
    stale = run(p, evict_request("r", old, "k"), key=b"r")
    assert isinstance(stale, Evicted) and stale.applied is None and stale.rejection is None
    forged = run(p, evict_request("r", old, "not-k"), key=b"r")
    assert isinstance(forged, Evicted) and forged.forged and forged.deadletter is not None
    assert forged.deadletter["reason"] == "invalid_control" and forged.deadletter["detail"] == BAD_SIGNATURE
    assert p.runs.lookup("r") is not None


def test_an_unsigned_eviction_is_judged_by_the_clock_when_the_pipeline_has_one() -> None:
    live = pipeline(key="", windows=(60.0, 3600.0))
    offline = pipeline(key="")
    for p in (live, offline):
        run(p, b(run_start("r")))
        run(p, b(run_finish("r")))
    st = live.runs.lookup("r")
    assert st is not None
    early = run(live, evict_request("r", version(st)), now=30.0, key=b"r")
    assert isinstance(early, Evicted) and early.rejection and "is not expired" in early.rejection.detail
    late = run(live, evict_request("r", version(st)), now=61.0, key=b"r")
    assert isinstance(late, Evicted) and late.applied == "finished"
    # without a clock to trust (replay), a matching unsigned record applies
    replayed = run(offline, evict_request("r", version(st)), now=2.0, key=b"r")
    assert isinstance(replayed, Evicted) and replayed.applied == "finished"


def test_a_run_start_that_fails_when_sealed_is_not_counted_against_its_org() -> None:
    tiny = Limits(max_decision_bytes=10)  # no decision fits: the run_start fails at seal
    p = Pipeline(Engine(None, SEM, tiny), MemoryRuns(RunsHeld(1, lambda _: 0, 1)))
    out = p.run(b(run_start("a")), 1.0, lambda plan: [])
    assert isinstance(out, Sealed) and out.failed_stage == "state_size" and not out.opens_run
    assert p.runs.held.held("default") == 0 and p.runs.lookup("a") is None


def test_a_store_that_cannot_read_a_run_fails_that_event_only() -> None:
    class Unreadable(MemoryRuns):
        def lookup(self, run_id: str) -> None:
            raise OSError("disk gone")

    p = Pipeline(Engine(None, SEM, Limits()), Unreadable(RunsHeld(0, lambda _: 0, 1)))
    out = p.take(b(step("r", 1)), 1.0)
    assert isinstance(out, Refused) and out.failed_stage == "evaluate"
    assert out.rejection.detail == "evaluate: OSError: disk gone"


def test_an_eviction_on_another_tenants_topic_is_ignored_as_forged_and_answered_as_for_no_run() -> None:
    p = pipeline()
    started = p.run(b(run_start("t")), 1.0, lambda plan: [], tenant="acme")
    assert isinstance(started, Sealed) and started.opens_run
    st = p.runs.lookup("t")
    assert st is not None
    out = p.run(evict_request("t", version(st), "k"), 2.0, lambda plan: [], key=b"t", tenant="evil")
    assert isinstance(out, Evicted) and out.forged and out.applied is None
    assert out.rejection is None  # nothing said: what a signed record for an unused id gets
    assert p.runs.lookup("t") is not None  # and the worker's sweep keeps its backoff (not settled)
    unused = p.run(evict_request("u", version(st), "k"), 2.0, lambda plan: [], key=b"u", tenant="evil")
    assert isinstance(unused, Evicted) and unused.rejection is None and unused.applied is None


def test_a_new_run_that_is_never_stored_is_released_from_its_orgs_count() -> None:
    p = pipeline(cap=1)
    out = p.take(b(run_start("a")), 1.0)
    assert isinstance(out, Decided) and p.runs.held.held("default") == 1
    p.release(out)  # the adapter failed (or was cancelled) before it stored the state
    assert p.runs.held.held("default") == 0
    stored = run(p, b(run_start("a")))
    assert isinstance(stored, Sealed) and stored.opens_run
    p.release(p.take(b(step("a", 1)), 2.0))  # a known run: nothing to release
    assert p.runs.held.held("default") == 1


def test_an_eviction_whose_run_cannot_be_read_is_an_internal_error_not_an_exception() -> None:
    class Unreadable(MemoryRuns):
        def lookup(self, run_id: str) -> None:
            raise OSError("disk gone")

    p = Pipeline(Engine(None, SEM, Limits()), Unreadable(RunsHeld(0, lambda _: 0, 1)), EvictionRule("k"))
    out = p.take(evict_request("r", (1, False, 0, None), "k"), 1.0, key=b"r")
    assert isinstance(out, Evicted) and out.rejection is not None and out.rejection.reason == "internal_error"
    assert out.deadletter is not None and out.deadletter["detail"] == "evict: OSError: disk gone"


def test_replay_checks_a_partition_it_is_given_as_the_worker_does_and_takes_a_file_as_routed() -> None:
    """Worker and replay run this same check: given the partition an input was read from
    (the worker always, replay of Kafka records) a misrouted input is `wrong_partition`;
    a file's lines carry none and are decided as if produced keyed by run_id."""

    def partition_of(rid: str) -> int:
        return wire.partition_for(rid, 4)

    raw = b(run_start("r"))
    with_partition = Replayer(sem=SEM, partitions=4)
    decision, dead = with_partition.feed(raw, key=b"r", partition=(partition_of("r") + 1) % 4)
    assert decision is None and dead is not None and dead["reason"] == "wrong_partition"
    assert with_partition.states == {} and len(with_partition.held) == 0
    decision, dead = with_partition.feed(raw, key=b"r", partition=partition_of("r"))
    assert decision is not None and dead is None
    from_file, _ = Replayer(sem=SEM, partitions=4).feed(raw)
    assert from_file is not None and orjson.dumps(
        {k: v for k, v in from_file.items() if k != "processed_ts"}
    ) == orjson.dumps({k: v for k, v in decision.items() if k != "processed_ts"})


def test_the_later_events_of_a_run_whose_run_start_was_refused_say_so_with_its_reason() -> None:
    p = pipeline()
    refused = run(p, b(run_start("r", escalaton={"stop_after": 2})))
    assert isinstance(refused, Sealed) and refused.deadletter is not None
    assert refused.deadletter["reason"] == "invalid_run_start"
    later = run(p, b(step("r", 1)))
    assert isinstance(later, Sealed) and later.deadletter is not None
    assert later.deadletter["reason"] == "unknown_run"
    assert later.deadletter["detail"] == (
        "no run_start seen for run 'r': its run_start was refused "
        "(invalid_run_start: unknown field 'escalaton'; did you mean 'escalation'?)"
    )
    # a run never started is told nothing more; one started after all is forgotten as refused
    ghost = run(p, b(step("ghost", 1)))
    assert isinstance(ghost, Sealed) and ghost.deadletter is not None
    assert ghost.deadletter["detail"] == "no run_start seen for run 'ghost'"
    assert isinstance(run(p, b(run_start("r"))), Sealed)
    assert isinstance(p.take(b(step("r", 1)), 2.0), Decided)


def test_a_refused_run_start_is_remembered_per_tenant() -> None:
    p = pipeline()
    p.take(b(run_start("r", org_id="a", escalaton={})), 1.0, tenant="a")
    out = p.take(b(step("r", 1, org_id="b")), 1.0, tenant="b")
    assert isinstance(out, Refused) and out.rejection.reason == "unknown_run"
    assert "refused" not in out.rejection.detail
