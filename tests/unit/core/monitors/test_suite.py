"""The monitor suite: one protocol for every monitor, a suite that is a tuple of them, states
keyed by monitor and stored as they always were."""

from __future__ import annotations

from dataclasses import dataclass, replace

import orjson
import pytest

from streams.core.monitors import (
    DEFAULT_MONITORS,
    FAILURE_TYPES,
    MONITORS,
    Context,
    Finding,
    Monitor,
    MonitorState,
    Semantics,
    evaluate,
)
from streams.core.monitors.suite import STORED_ORDER
from streams.core.policy import Policy
from streams.core.reading.features import StepFeatures, extract
from streams.core.state import RunConfig, TraceState
from streams.replay import Replayer


# --- a toy monitor: what a new module would hold ----------------------------------------------
@dataclass
class ShoutState:
    shouts: int = 0


def shouting(st: ShoutState, f: StepFeatures, ctx: Context, sem: Semantics) -> tuple[ShoutState, Finding]:
    """Fires from the second thought in capitals on."""
    loud = bool(f.thought) and f.thought.isupper()
    new = ShoutState(st.shouts + 1 if loud else st.shouts)
    return new, Finding(0.9, "Stop shouting.") if loud and new.shouts >= 2 else Finding(0.0)


SHOUT = Monitor("shouting", "tone", "shout", ShoutState, shouting)
# ------------------------------------------------------------------------------------------------


def steps(*thoughts: str) -> list[StepFeatures]:
    return [extract({"step": k, "thought": t}, 20_000) for k, t in enumerate(thoughts, start=1)]


def test_a_toy_monitor_added_to_the_suite_is_scored_fired_and_weighted(sem: Semantics) -> None:
    suite = (*DEFAULT_MONITORS, SHOUT)  # the one line
    weights = {**Policy().weights("coding", None), "shouting": 0.5}
    ms = MonitorState.initial(suite)
    results = []
    for f in steps("LET ME LOOK.", "I WILL CHECK IT.", "I WILL CHECK IT AGAIN."):
        ms, res = evaluate(ms, f, weights, None, sem, suite)
        results.append(res)
    assert [r.scores["shouting"] for r in results] == [0.0, 0.9, 0.9]
    last = results[-1]
    assert list(last.scores) == [*MONITORS, "shouting"]
    assert last.fired[0] == "shouting" and last.failure_type == "tone"
    assert last.text is not None and "Stop shouting." in last.text
    assert last.composite >= 0.5 * 0.9  # its weight counts in the composite
    assert ms["shout"] == ShoutState(3)
    unweighted = evaluate(MonitorState.initial(suite), steps("A.")[0], {}, None, sem, suite)[1]
    assert unweighted.composite == 0.0


def test_a_policy_carrying_the_toy_monitor_steers_a_replayed_run_with_it(sem: Semantics) -> None:
    policy = Policy(monitors=(*DEFAULT_MONITORS, SHOUT))
    rp = Replayer(sem=sem, policy=policy, clock=lambda: 1_767_225_600.0)
    start = {"type": "run_start", "schema_version": 1, "run_id": "r", "monitor_weights": {"shouting": 0.5}}
    lines = [orjson.dumps(start)] + [
        orjson.dumps({"type": "step", "schema_version": 1, "run_id": "r", "step": k, "thought": t})
        for k, t in enumerate(("LET ME LOOK.", "I WILL CHECK IT."), start=1)
    ]
    decisions = [d for d, _dead in rp.run(lines) if d is not None]
    mon = decisions[-1]["monitors"]
    assert mon["scores"]["shouting"] == 0.9 and mon["fired"][0] == "shouting"
    assert mon["failure_type"] == "tone" and mon["composite"] >= 0.45
    assert rp.states["r"].config.weights["shouting"] == 0.5
    assert decisions[-1]["injection_text"] is not None and "Stop shouting." in decisions[-1]["injection_text"]


def test_the_default_suite_names_each_monitor_once_and_derives_names_and_failure_types() -> None:
    assert tuple(m.name for m in DEFAULT_MONITORS) == MONITORS
    assert {m.name: m.failure_type for m in DEFAULT_MONITORS} == FAILURE_TYPES
    # the six of SPEC section 6, then issue 42's data_instruction (its state stored after theirs)
    assert len(set(MONITORS)) == 7 and {m.key for m in DEFAULT_MONITORS} == {*STORED_ORDER, "provenance"}


def test_a_suite_with_a_name_twice_is_refused(sem: Semantics) -> None:
    twice = (*DEFAULT_MONITORS, replace(SHOUT, name=MONITORS[0]))
    with pytest.raises(ValueError, match="unique"):
        evaluate(MonitorState.initial(twice), steps("x")[0], {}, None, sem, twice)


def test_a_monitor_runs_after_the_monitors_whose_findings_it_reads(sem: Semantics) -> None:
    seen: list[str] = []

    def echo(st: ShoutState, f: StepFeatures, ctx: Context, sem: Semantics) -> tuple[ShoutState, Finding]:
        seen.append(",".join(sorted(ctx.found)))
        return st, Finding(0.0)

    first = replace(SHOUT, evaluate=echo, name="first", key="first", after=("shouting",))
    suite = (first, SHOUT)
    evaluate(MonitorState.initial(suite), steps("x")[0], {}, None, sem, suite)
    assert seen == ["shouting"]


def test_states_encode_as_before_in_the_stored_order_with_a_new_monitor_last() -> None:
    st = TraceState(run_id="r", config=RunConfig())
    assert list(orjson.loads(orjson.dumps(st))["monitors"]) == [*STORED_ORDER, "provenance"]  # whole
    assert "monitors" not in orjson.loads(st.encode())  # compact: every memory a new run's
    assert list(MonitorState.initial((*DEFAULT_MONITORS, SHOUT))) == [*STORED_ORDER, "provenance", "shout"]


def test_a_plugin_monitors_state_survives_decoding_by_the_default_suite(sem: Semantics) -> None:
    suite = (*DEFAULT_MONITORS, SHOUT)
    ms = MonitorState.initial(suite)
    for f in steps("LOUD.", "QUIET NOW?"):
        ms, _ = evaluate(ms, f, {}, None, sem, suite)
    st = TraceState(run_id="r", config=RunConfig(), monitors=ms)
    back = TraceState.decode(st.encode())  # what the worker's table does, knowing only the defaults
    assert back.monitors["shout"] == {"shouts": 2}  # kept as stored
    ms2, res = evaluate(back.monitors, steps("AGAIN.")[0], {}, None, sem, suite)
    assert ms2["shout"] == ShoutState(3) and res.scores["shouting"] == 0.9


def test_a_state_without_a_monitors_key_starts_that_monitor_afresh(sem: Semantics) -> None:
    stored = orjson.loads(orjson.dumps(TraceState(run_id="r", config=RunConfig())))["monitors"]
    del stored["drift"]
    ms = MonitorState.from_dict(stored)
    new, _ = evaluate(ms, steps("Let me look at the code.")[0], {}, None, sem)
    assert new["drift"].steps == 1


def test_only_the_top_level_agents_final_answer_ends_the_run(sem: Semantics) -> None:
    """The first agent to speak leads: a sub-agent's `final_answer` reports to it, and the run
    (with a model call that can read an injection) goes on."""
    ms: MonitorState | None = None
    finals = []
    for k, ev in enumerate(
        [
            {"agent": "lead", "thought": "Plan: ask the researcher for the report's year."},
            {
                "agent": "researcher",
                "action": "web_search",
                "action_input": {"query": "report"},
                "observation": "r",
            },
            {
                "agent": "researcher",
                "action": "final_answer",
                "action_input": {"answer": "2021"},
                "observation": "",
            },
            {"agent": "lead", "thought": "FINAL ANSWER: 2021"},
        ],
        start=1,
    ):
        ms, res = evaluate(ms or MonitorState.initial(), extract({"step": k, **ev}, 8000), {}, None, sem)
        finals.append(res.final)
    assert finals == [False, False, False, True]
    assert ms is not None and ms["lead"] == "lead"


def test_a_single_agents_finish_still_ends_the_run(sem: Semantics) -> None:
    f = extract({"step": 1, "action": "finish", "action_input": {"message": "done"}}, 8000)
    assert evaluate(MonitorState.initial(), f, {}, None, sem)[1].final


def test_a_decoded_run_state_keeps_monitor_states_as_stored_until_their_monitor_runs(sem: Semantics) -> None:
    """A run with monitors off, or a state only looked at, pays for no monitor-state decoding;
    as stored and decoded it is one state, and it encodes to the same bytes."""
    ms, _ = evaluate(MonitorState.initial(), steps("Let me look at the code.")[0], {}, None, sem)
    st = TraceState(run_id="r", config=RunConfig(), monitors=ms)
    back = TraceState.decode(st.encode())
    assert all(type(v) is dict for k, v in back.monitors.items())
    assert back == st and back.encode() == st.encode()
    new, _ = evaluate(back.monitors, steps("Now the tests.")[0], {}, None, sem)
    again, _ = evaluate(ms, steps("Now the tests.")[0], {}, None, sem)
    assert new == again and new["drift"].steps == 2
