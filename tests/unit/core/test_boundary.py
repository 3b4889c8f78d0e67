"""The core is total: no input and no failure inside makes `Engine.read`/`step`/`seal` raise, a
failure is an internal_error naming its stage, and the run stays consistent (its next step is
answered). Exact integers, saturating sums, the key check, config conflicts, the run cap."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.core.engine import Engine
from streams.core.events import Limits, deadletter_bytes, validator
from streams.core.fsm import FSMParams, FSMState
from streams.core.policy import Policy
from streams.core.results import Decided, Refused, Sealed
from streams.core.retention import RunsHeld
from streams.core.state import TraceState
from streams.pipeline import MemoryRuns, Pipeline
from streams.replay import Replayer
from streams.shared.contract import TOKENS_MAX
from tests.driving import outcome, sealed
from tests.factories import b, run_start, step
from tests.models import semantics
from tests.poison import Runs, materialize, recipes

LIMITS = Limits()
SEM = semantics()


def _raises(current: FSMState, history: Sequence[float], params: FSMParams) -> FSMState:
    if history and history[-1] == 0.5:
        raise ValueError("boom")
    return Policy().transition("default")(current, history, params)


class Store(dict[str, TraceState]):
    """The table, as the worker uses it: read, step, seal, then store."""

    def __init__(self, policy: Policy | None = None) -> None:
        super().__init__()
        self.policy = policy

    def feed(self, ev: dict | bytes, key: object = None, **kw) -> Sealed:
        raw = b(ev) if isinstance(ev, dict) else ev
        extra = {} if key is None else {"key": key}
        res = sealed(raw, self.get, LIMITS, 1.0, SEM, policy=self.policy, **extra, **kw)
        if res.state_bytes is not None:
            self[res.run_id] = TraceState.decode(res.state_bytes)  # as read back from the table
        return res


def test_the_issue_reproduction_is_decision_zero_then_two_dead_letters():
    rp = Replayer(sem=SEM)
    lines = [
        b'{"type":"run_start","schema_version":1,"run_id":"r"}',
        b'{"type":"step","schema_version":1,"run_id":"r","step":1,"tokens":18446744073709551615}',
        b'{"type":"step","schema_version":1,"run_id":"r","step":2,"tokens":1}',
    ]
    out = [rp.feed(line, key=b"r") for line in lines]
    assert out[0][0] is not None and out[0][0]["step"] == 0 and out[0][1] is None
    assert out[1][0] is None and out[1][1]["reason"] == "schema_violation"
    assert "tokens" in out[1][1]["detail"] and "9007199254740992" in out[1][1]["detail"]
    assert out[2][0] is None and out[2][1]["reason"] == "out_of_order"


def test_token_sums_saturate_at_2_pow_53_and_every_decision_encodes_and_validates():
    s = Store()
    s.feed(run_start("r", token_budget=TOKENS_MAX))
    for k in range(1, 5):
        res = s.feed(step("r", k, tokens=TOKENS_MAX))
        assert res.rejection is None and res.decision["tokens_used"] == TOKENS_MAX
        validator("decision").validate(orjson.loads(res.decision_bytes))
    assert s["r"].tokens_used == TOKENS_MAX


RAISING = Policy(transitions={**Policy().transitions, "unit-raises-at-0.5": _raises})


def test_a_failure_inside_evaluation_is_an_internal_error_and_the_next_step_is_answered():
    s = Store(policy=RAISING)
    s.feed(run_start("r", fsm_transition="unit-raises-at-0.5"))
    assert s.feed(step("r", 1, difficulty=0.1)).decision["step"] == 1
    res = s.feed(step("r", 2, difficulty=0.5))
    assert res.decision is None and res.rejection.reason == "internal_error"
    assert res.rejection.detail == "evaluate: ValueError: boom" and res.failed_stage == "evaluate"
    assert res.rejection.run_id == "r" and res.rejection.step == 2
    # The step's number is used up; nothing else about the run changed.
    assert s["r"].last_step == 2 and s["r"].scored_steps == 1 and s["r"].history == [0.1]
    assert s.feed(step("r", 3, difficulty=0.1)).decision["step"] == 3
    assert s.feed(step("r", 2, difficulty=0.1)).duplicate  # a re-sent copy of the failed step


def test_an_unencodable_result_is_an_internal_error_at_encode_with_the_fallback_state():
    s = Store()
    s.feed(run_start("r"))
    res = outcome(b(step("r", 1)), s.get, LIMITS, 2.0, SEM)
    assert isinstance(res, Decided)
    res.decision["model"] = 2**70  # what a bug could put there: no encoder holds it
    out = Engine(None, SEM, LIMITS).seal(res)
    assert out.rejection.reason == "internal_error" and out.failed_stage == "encode"
    assert out.rejection.detail.startswith("encode: TypeError: Integer exceeds 64-bit range")
    assert out.decision_bytes is None
    assert TraceState.decode(out.state_bytes).last_step == 1  # consumed: step 2 is next


def test_a_failure_while_completing_e_traces_is_an_internal_error_at_complete():
    s = Store()
    res = outcome(b(run_start("r")), s.get, LIMITS, 1.0, SEM)
    assert isinstance(res, Decided) and res.effects.answer_now  # decision 0 plans E3
    engine = Engine(None, SEM, LIMITS)
    bad = engine.seal(res, [object()])  # type: ignore[list-item]  # an answer that is not one
    assert bad.rejection.reason == "internal_error" and bad.failed_stage == "complete"
    assert bad.state is None  # a failed run_start leaves no run behind
    assert engine.seal(res, []).decision["step"] == 0  # the outcome itself was not changed


def test_a_failing_lookup_is_an_internal_error_not_an_exception():
    class Broken(MemoryRuns):
        def lookup(self, run_id: str) -> TraceState | None:
            raise OSError("disk gone")

    res = Pipeline(Engine(None, SEM, LIMITS), Broken(RunsHeld(0, lambda _: 0, 1))).take(b(step("r", 1)), 1.0)
    assert isinstance(res, Refused)
    assert res.rejection.reason == "internal_error" and res.rejection.detail == "evaluate: OSError: disk gone"
    assert res.state is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("step", 1.0), ("step", 2.0**31), ("step", 2**31), ("tokens", 1e3), ("tokens", TOKENS_MAX + 1)],
)
def test_integer_fields_take_exact_bounded_integers_only(field, value):
    s = Store()
    s.feed(run_start("r"))
    res = s.feed(step("r", 1, **{field: value}))
    assert res.rejection is not None and res.rejection.reason == "schema_violation", res.rejection


def test_integers_past_64_bits_are_schema_violations_not_out_of_order():
    s = Store()
    s.feed(run_start("r"))
    raw = b'{"type":"step","schema_version":1,"run_id":"r","step":1180591620717411303424}'
    assert s.feed(raw).rejection.reason == "schema_violation"
    raw = b'{"type":"run_start","schema_version":1,"run_id":"q","token_budget":18446744073709551616}'
    assert s.feed(raw).rejection.reason == "schema_violation"


def test_a_float_schema_version_is_a_schema_violation():
    res = Store().feed(b'{"type":"run_start","schema_version":1.0,"run_id":"r"}')
    assert res.rejection.reason == "schema_violation" and "integer" in res.rejection.detail


def test_the_key_is_checked_before_the_lookup():
    s = Store()
    s.feed(run_start("r"), key=b"r")
    looked: list[str] = []

    def lookup(run_id: str) -> TraceState | None:
        looked.append(run_id)
        return None  # the run lives on another partition: this one cannot see it

    res = sealed(b(step("r", 1)), lookup, LIMITS, 1.0, SEM, key=b"elsewhere")
    assert res.rejection.reason == "key_mismatch" and looked == []
    assert sealed(b(step("r", 1)), lookup, LIMITS, 1.0, SEM, key=None).rejection.reason == "key_mismatch"
    assert s.feed(step("r", 1), key=b"r").decision["step"] == 1


def test_a_repeated_run_start_with_another_config_is_reported_and_ignored():
    s = Store()
    s.feed(run_start("r", token_budget=100, model_routing={"FAST": "a"}))
    assert s.feed(run_start("r", token_budget=100, model_routing={"FAST": "a"})).duplicate
    res = s.feed(run_start("r", token_budget=999, model_routing={"FAST": "b"}))
    assert res.rejection.reason == "config_conflict"
    assert "model_routing, token_budget" in res.rejection.detail
    assert s["r"].config.token_budget == 100 and s["r"].duplicates == 1
    bad = s.feed(run_start("r", fsm_thresholds={"fast_window": 0}))
    assert bad.rejection.reason == "config_conflict" and "invalid config" in bad.rejection.detail


def test_new_runs_past_an_orgs_cap_are_refused_per_partition_until_one_is_evicted():
    held = RunsHeld(4, lambda rid: 0 if rid.startswith("a") else 1, partitions=2)  # 2 per partition
    runs = MemoryRuns(held)
    pipeline = Pipeline(Engine(None, SEM, LIMITS), runs)

    def start(rid: str, org: str = "acme") -> Sealed:
        out = pipeline.run(b(run_start(rid, org_id=org)), 1.0, lambda _: [])
        assert isinstance(out, Sealed)
        return out

    assert start("a1").decision and start("a2").decision
    full = start("a3")
    assert full.rejection.reason == "too_many_runs" and "RB_MAX_RUNS_PER_ORG" in full.rejection.detail
    assert start("b1").decision  # the other partition has room
    assert start("a3", org="globex").decision  # other orgs are not affected
    assert start("a1").duplicate  # a run it holds is not refused
    runs.delete(b"a1", runs.states["a1"])  # evicted
    assert start("a3").rejection.reason == "config_conflict"  # a3 exists (globex): not new
    assert start("a4").decision
    assert held.held("acme") == 3


def test_replay_applies_the_cap_as_the_worker_counts_it():
    rp = Replayer(sem=SEM, max_runs_per_org=1, partitions=1)
    assert rp.feed(b(run_start("a")))[0] is not None
    assert rp.feed(b(run_start("b")))[1]["reason"] == "too_many_runs"
    assert rp.feed(b(run_start("c", org_id="other")))[0] is not None


def test_replay_applies_the_overall_cap_as_the_worker_counts_it():
    rp = Replayer(sem=SEM, max_runs_per_org=0, partitions=1, max_runs=2)
    assert rp.feed(b(run_start("a", org_id="o1")))[0] is not None
    assert rp.feed(b(run_start("b", org_id="o2")))[0] is not None
    decision, dl = rp.feed(b(run_start("c", org_id="o3")))
    assert decision is None and dl["reason"] == "table_full" and "RB_MAX_RUNS" in dl["detail"]
    assert rp.feed(b(run_start("a", org_id="o1")))[1] is None  # a run it holds is not refused


def test_dead_letter_records_always_encode():
    rec = {
        "type": "deadletter",
        "schema_version": 1,
        "reason": "internal_error",
        "detail": "x",
        "run_id": "r",
        "step": 2**70,
        "original": "",
        "original_bytes": 0,
        "truncated": False,
        "source": {"bad": object()},
        "processed_ts": 1.0,
    }
    out = orjson.loads(deadletter_bytes(rec))
    assert out["reason"] == "internal_error" and "record reduced" in out["detail"]
    validator("deadletter").validate(out)


LIVE = ["p-live0", "p-live1", "p-live2"]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.lists(recipes(len(LIVE)), min_size=1, max_size=12))
def test_any_poison_event_gets_one_answer_and_every_decision_matches_the_schema(corpus):
    rp = Replayer(sem=SEM, max_runs_per_org=6, partitions=2, control_key="k")
    for rid in LIVE:
        assert rp.feed(b(run_start(rid, org_id="fuzz")), key=rid.encode())[0] is not None
    runs = Runs("p", LIVE, ["p-control"])
    for r in corpus:
        for rid in LIVE:
            runs.next_step[rid] = rp.states[rid].last_step + 1 if rid in rp.states else 1
        _, key, value = materialize(r, runs)
        decision, dead = rp.feed(value, key=key)  # never raises
        assert decision is None or dead is None
        if decision is not None:
            validator("decision").validate(orjson.loads(orjson.dumps(decision)))
        if dead is not None:
            validator("deadletter").validate(orjson.loads(deadletter_bytes(dead)))
            assert dead["detail"]
