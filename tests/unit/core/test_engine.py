from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.events import Limits
from streams.core.fsm import DifficultyFSM, FSMState
from streams.core.state import TraceState
from tests.driving import sealed
from tests.factories import b, run_finish, run_start, step
from tests.models import semantics

LIMITS = Limits()


class Store(dict):
    def feed(self, ev, now=1.0):
        res = sealed(b(ev) if isinstance(ev, dict) else ev, self.get, LIMITS, now, semantics())
        if res.state is not None:
            self[res.run_id] = res.state
        return res


def started(run_id="r", **kw):
    s = Store()
    res = s.feed(run_start(run_id, **kw))
    assert res.decision is not None
    return s, res.decision


def test_run_start_is_answered_by_decision_zero_in_init():
    _, d = started(model_routing={"FAST": "small"}, token_budget=1000)
    assert d["step"] == 0
    assert d["fsm_state"] == "INIT"
    assert d["previous_state"] is None
    assert d["difficulty"] is None
    assert d["model"] is None  # no routing on the first call
    assert d["budget_used"] == 0.0
    assert d["monitors"] == {"scores": {}, "fired": [], "composite": 0.0, "failure_type": None}
    assert d["injections"] == [] and d["inject"] is False and d["injection_text"] is None


def test_every_decision_matches_the_decision_schema():
    s, d0 = started(model_routing={"FAST": "small", "SLOW": "big"}, token_budget=500)
    from jsonschema import Draft202012Validator

    from streams.shared.contract import load_schema

    dv = Draft202012Validator(load_schema("decision"))
    dv.validate(d0)
    for i in range(1, 20):
        dv.validate(s.feed(step("r", i, difficulty=0.05 if i < 10 else 0.9)).decision)


def test_step_k_is_answered_by_decision_k_with_states_from_the_fsm():
    # the FSM's own routing: the default ladder would route the repeated step's escalation
    s, _ = started(
        model_routing={"FAST": "small", "SLOW": "big", "NORMAL": "mid"}, escalation={"enabled": False}
    )
    seq = [0.1] * 6 + [0.35] + [0.7] * 5 + [0.4]
    expect, state, hist = [], FSMState.INIT, []
    for x in seq:
        hist.append(x)
        prev, state = state, DifficultyFSM().transition(state, hist)
        expect.append((prev.value, state.value))
    got = []
    for i, x in enumerate(seq, start=1):
        d = s.feed(step("r", i, difficulty=x)).decision
        assert d["step"] == i and d["difficulty"] == x and d["difficulty_source"] == "agent"
        got.append((d["previous_state"], d["fsm_state"]))
        want = {"FAST": "small", "SLOW": "big", "NORMAL": "mid"}[d["fsm_state"]]
        if d["model"] != want:  # issue 39: a switch down that the stint cannot repay is declined
            assert d["fsm_state"] == "FAST" and d["model"] == "mid"
            assert d["routing_reason"].startswith(("declined:", "return:"))
    assert got == expect
    assert [g[1] for g in got][5] == "FAST" and [g[1] for g in got][11] == "SLOW"


def test_fast_decision_says_e_traces_were_skipped():
    s, _ = started()
    for i in range(1, 7):
        d = s.feed(step("r", i, difficulty=0.0)).decision
    assert d["fsm_state"] == "FAST"
    assert d["skipped_reason"] == "FSM=FAST, e-traces skipped"


def test_agent_supplied_difficulty_wins_and_is_clamped():
    s, _ = started(scorer="heuristic")
    assert s.feed(step("r", 1, difficulty=7.0, thought="")).decision["difficulty"] == 1.0
    assert s.feed(step("r", 2, difficulty=-3)).decision["difficulty"] == 0.0
    d = s.feed(step("r", 3, thought="")).decision
    assert d["difficulty"] == 0.5 and d["difficulty_source"] == "scorer"


def test_unrouted_state_gives_null_model():
    s, _ = started(model_routing={"SLOW": "big"})
    assert s.feed(step("r", 1, difficulty=0.5)).decision["model"] is None


def test_tokens_and_budget_accumulate():
    s, _ = started(token_budget=1000)
    s.feed(step("r", 1, tokens=250))
    d = s.feed(step("r", 2, tokens=250)).decision
    assert d["tokens_used"] == 500 and d["budget_used"] == 0.5 and d["token_budget"] == 1000


def test_a_copy_of_an_older_step_gives_no_second_decision_and_is_counted():
    s, _ = started()
    s.feed(step("r", 1))
    s.feed(step("r", 2))
    res = s.feed(step("r", 1))
    assert res.duplicate and res.decision is None and res.rejection is None
    assert s["r"].duplicates == 1 and s["r"].last_step == 2


def test_a_copy_of_the_run_start_after_a_step_is_ignored():
    s, _ = started()
    s.feed(step("r", 1, difficulty=0.9))
    res = s.feed(run_start("r"))
    assert res.duplicate and res.decision is None
    assert s["r"].last_step == 1


def test_gap_in_steps_is_dead_lettered_as_out_of_order():
    s, _ = started()
    res = s.feed(step("r", 3))
    assert res.rejection.reason == "out_of_order" and "expected step 1" in res.rejection.detail
    assert s.feed(step("r", 1)).decision["step"] == 1  # the run continues


def test_step_for_unknown_run_is_dead_lettered():
    res = Store().feed(step("ghost", 1))
    assert res.rejection.reason == "unknown_run" and res.rejection.run_id == "ghost"


def test_step_after_finish_is_dead_lettered():
    s, _ = started()
    s.feed(step("r", 1))
    assert s.feed(run_finish("r", "failure: Timeout")).decision is None
    assert s["r"].finished and s["r"].outcome == "failure: Timeout"
    assert s.feed(step("r", 2)).rejection.reason == "run_finished"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "invalid_json"),
        (b"[1,2]", "not_an_object"),
        (b"", "invalid_json"),
        (None, "invalid_json"),
        (b'{"type":"step","schema_version":2,"run_id":"r","step":1}', "unsupported_schema_version"),
        (b'{"type":"step","run_id":"r","step":1}', "unsupported_schema_version"),
        (b'{"type":"bogus","schema_version":1,"run_id":"r"}', "schema_violation"),
        (b'{"type":"step","schema_version":1,"run_id":"r"}', "schema_violation"),
        (b'{"type":"step","schema_version":1,"run_id":"r","step":0}', "schema_violation"),
        (b'{"type":"step","schema_version":1,"run_id":"r","step":-4}', "schema_violation"),
        (b'{"type":"step","schema_version":1,"run_id":"r","step":"3"}', "schema_violation"),
        (b'{"type":"step","schema_version":1,"run_id":"r","step":1,"tokens":-1}', "schema_violation"),
        (b'{"type":"step","schema_version":1,"run_id":"","step":1}', "schema_violation"),
        (b'{"type":"run_finish","schema_version":1,"run_id":"r","outcome":"meh"}', "schema_violation"),
        (
            b'{"type":"run_start","schema_version":1,"run_id":"r","model_routing":{"TURBO":"x"}}',
            "schema_violation",
        ),
        (b'{"type":"step","schema_version":1,"run_id":"r","step":1,"difficulty":NaN}', "invalid_json"),
        (b'{"type":"step","schema_version":true,"run_id":"r","step":1}', "unsupported_schema_version"),
    ],
)
def test_bad_input_is_rejected_with_a_machine_readable_reason(raw, reason):
    res = Store().feed(raw)
    assert res.rejection is not None, res
    assert res.rejection.reason == reason
    assert res.decision is None and res.state is None


def test_oversized_event_is_rejected_before_parsing():
    raw = b(step("r", 1, thought="x" * (LIMITS.max_event_bytes + 1)))
    assert Store().feed(raw).rejection.reason == "too_large"


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"fast_threshold": 2}, "fast_threshold must be within"),
        ({"fast_window": 0}, "fast_window"),
        ({"fast_threshold": 0.7}, "below slow_threshold"),
        ({"fast_threshold": "low"}, "must be a number"),
        ({"whatever": 1}, "unknown fsm_thresholds"),
    ],
)
def test_invalid_fsm_thresholds_are_dead_lettered_for_that_run(overrides, fragment):
    res = Store().feed(run_start("r", fsm_thresholds=overrides))
    assert res.rejection.reason == "invalid_fsm_thresholds"
    assert fragment in res.rejection.detail


def test_fsm_threshold_overrides_apply_to_the_run():
    s, _ = started(fsm_thresholds={"fast_window": 2})
    s.feed(step("r", 1, difficulty=0.0))
    assert s.feed(step("r", 2, difficulty=0.0)).decision["fsm_state"] == "FAST"


def test_unknown_transition_or_scorer_is_invalid_config():
    assert Store().feed(run_start("r", fsm_transition="nope")).rejection.reason == "invalid_config"
    assert Store().feed(run_start("r", scorer="nope")).rejection.reason == "invalid_config"


def test_custom_transition_returning_end_makes_the_run_terminal():
    s, _ = started(
        fsm_transition="end_on_skip",
        model_routing={"SLOW": "big", "SKIP": "big"},
        escalation={"enabled": False},
    )
    d = None
    for i in range(1, 40):
        d = s.feed(step("r", i, difficulty=0.99)).decision
    assert d["fsm_state"] == "END" and d["model"] is None and d["inject"] is False
    assert d["skipped_reason"] == "FSM=END, run terminal"
    d = s.feed(step("r", 40, difficulty=0.0)).decision
    assert d["fsm_state"] == "END" and d["previous_state"] == "END"


def test_step_log_keeps_the_last_entries_in_order():
    s = Store()
    res = sealed(b(run_start("r")), s.get, Limits(step_log_kept=3), 1.0, semantics())
    s["r"] = res.state
    for i in range(1, 6):
        s["r"] = sealed(
            b(step("r", i, difficulty=0.1)), s.get, Limits(step_log_kept=3), 2.0, semantics()
        ).state
    entries = s["r"].step_log_entries()
    assert [e["step"] for e in entries] == [3, 4, 5]
    assert entries[-1]["fsm_state"] == "NORMAL" and entries[-1]["difficulty"] == 0.1


def test_the_step_log_keeps_each_decisions_monitor_scores_and_skipped_reason():
    s, _ = started()
    d = s.feed(step("r", 1, difficulty=0.05)).decision
    entry = s["r"].step_log_entries()[-1]
    assert d["skipped_reason"] and entry["skipped_reason"] == d["skipped_reason"]
    assert set(entry["scores"]) == set(d["monitors"]["scores"]) and entry["scores"]
    assert entry["scores"] == {k: round(v, 4) for k, v in d["monitors"]["scores"].items()}


def test_a_step_log_entry_stored_before_scores_were_kept_reads_them_as_null():
    s, _ = started()
    old = [0, "INIT", None, None, [], [], None, 1700000100.0]  # the 8 fields an older worker kept
    st = s["r"].evolve(step_log=[old, *s["r"].step_log])
    first, second = st.step_log_entries()[:2]
    assert first["step"] == 0 and first["scores"] is None and first["skipped_reason"] is None
    assert second["scores"] is not None


def test_state_round_trips_through_the_table_encoding():
    s, _ = started(model_routing={"FAST": "a"}, fsm_thresholds={"slow_window": 3})
    for i in range(1, 10):
        s.feed(step("r", i))
    st = s["r"]
    assert TraceState.from_dict(orjson.loads(orjson.dumps(st.to_dict()))) == st
    assert TraceState.decode(st.encode()) == st


def test_run_state_size_and_window_stay_bounded_at_5000_steps():
    s, _ = started(task="t" * 50_000)
    sizes = {}
    for i in range(1, 5001):
        s.feed(step("r", i, thought="Thinking about it " * (i % 7), tokens=1))
        if i in (10, 100, 1000, 5000):
            sizes[i] = len(orjson.dumps(s["r"].to_dict()))
    assert len(s["r"].history) == 35
    # once the windows are full only the digits of counters and step numbers may grow
    assert sizes[5000] - sizes[100] < 100, sizes
    # FSM windows, step log (with the default ladder's stop texts: the step repeats) and the
    # monitors' windows
    assert sizes[5000] < 20_480, sizes
    assert len(s["r"].step_log) == 20 and s["r"].step_log[-1][0] == 5000


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["ok", "dup", "old", "gap", "junk"]), max_size=60))
def test_any_mix_of_inputs_yields_one_decision_per_accepted_step_and_only_identical_resends(ops):
    s, _ = started()
    nxt, answered, sent = 1, [], {}
    for op in ops:
        if op == "ok":
            res = s.feed(step("r", nxt, difficulty=0.3), now=float(nxt))
            answered.append(res.decision["step"])
            sent[nxt] = res.decision_bytes
            nxt += 1
        elif op == "dup" and nxt > 1:  # the last step again: its decision, byte for byte
            res = s.feed(step("r", nxt - 1), now=1e6)
            assert res.duplicate and res.decision_bytes == sent[nxt - 1]
        elif op == "old" and nxt > 2:  # an older one: answered already, nothing
            res = s.feed(step("r", nxt - 2), now=1e6)
            assert res.duplicate and res.decision_bytes is None
        elif op == "gap":
            assert s.feed(step("r", nxt + 2)).rejection.reason == "out_of_order"
        else:
            assert s.feed(b"\xff\xfe").rejection is not None
    assert answered == list(range(1, nxt))
