"""The escalation ladder (issue 30): nudge -> escalate -> stop, counted in ignored warnings,
per run, deterministic, bounded. See docs/escalation.md."""

from __future__ import annotations

from typing import Any

import pytest

from streams.core.decision import DecisionRecord
from streams.core.ladder import STEPS_KEPT, WATCH_STEPS, Defaults, Ignored, judge, next_rung, parse_escalation
from streams.core.monitors import MAX_MONITOR_INJECTIONS
from streams.core.policy import Policy
from streams.core.state import TraceState
from streams.replay import Replayer
from tests.driving import sealed
from tests.factories import b, run_start, step
from tests.models import semantics

SEM = semantics()
LADDER = {"escalate_model_after": 1, "stop_after": 2}
ROUTING = {"SLOW": "big-model"}


def failing(run_id: str, k: int) -> dict[str, Any]:
    """The same failing command with the same error, again: what semantic_loop warns about."""
    return step(
        run_id,
        k,
        thought="Let me run the tests again.",
        action="bash",
        action_input={"command": "pytest tests/test_x.py"},
        observation="FAILED tests/test_x.py::test_x - AssertionError: 1 != 2",
        observation_is_error=True,
    )


def other(run_id: str, k: int) -> dict[str, Any]:
    """Something new each step: reading another file, which works."""
    return step(
        run_id,
        k,
        thought=f"Read module number {k} to understand the failure.",
        action="read_file",
        action_input={"path": f"src/module_{k}.py"},
        observation=f"def f{k}(): return {k}",
    )


class Run:
    def __init__(self, policy: Policy | None = None, **start: Any) -> None:
        self.policy = policy
        self.table: dict[str, TraceState] = {}
        self.decisions: list[DecisionRecord] = []
        self.feed(run_start("r", model_routing=ROUTING, **start))

    def feed(self, ev: dict[str, Any]) -> DecisionRecord | None:
        res = sealed(b(ev), self.table.get, None, 1.0, SEM, policy=self.policy)
        assert res.rejection is None, res.rejection
        if res.state is not None:
            self.table[res.run_id] = res.state
        if res.decision is not None:
            self.decisions.append(res.decision)
        return res.decision

    @property
    def state(self) -> TraceState:
        return self.table["r"]

    def actions(self) -> list[str]:
        return [d["action"] for d in self.decisions[1:]]


def looping(run: Run, steps: int) -> Run:
    for k in range(1, steps + 1):
        run.feed(failing("r", k))
    return run


def test_an_agent_ignoring_two_warnings_is_escalated_then_stopped() -> None:
    run = looping(Run(escalation=LADDER), 6)
    acts = run.actions()
    first = acts.index("nudge")
    assert acts[first + 1 :] == ["escalate", "stop", *["stop"] * (len(acts) - first - 3)]
    esc, stop = run.decisions[first + 2], run.decisions[first + 3]
    assert esc["model"] == "big-model" and esc["injection_text"] is not None
    assert "ESCALATED" in esc["injection_text"] and f"warned at step {first + 1}" in esc["injection_text"]
    why = stop["action_reason"]
    assert why is not None and why["monitor"] == "semantic_loop" and why["failure_type"] == "loop"
    assert why["ignored"] == 2 and why["steps"] == [first + 2, first + 3]
    assert "STOP" in (stop["injection_text"] or "") and "End the run now" in (stop["injection_text"] or "")


def test_an_agent_that_changes_course_after_the_nudge_is_not_escalated() -> None:
    run = looping(Run(escalation=LADDER), 3)
    assert run.actions()[-1] == "nudge"
    for k in range(4, 20):
        run.feed(other("r", k))
    assert "escalate" not in run.actions() and "stop" not in run.actions()
    assert run.state.ignored == 0 and run.state.warnings == []  # judged, then forgotten


def test_a_warning_is_judged_on_the_first_call_after_it_and_only_a_repeat_ignores_it() -> None:
    warned = [["semantic_loop", "loop", 3, "the same call", ["A", "B"]]]
    said = [("semantic_loop", "again")]
    ignored = Ignored("semantic_loop", "loop", 3, "the same call")
    assert judge(warned, said, 3, "A") == (None, warned)  # the step that carried it: not yet read
    assert judge(warned, said, 4, "A") == (ignored, [])  # a call it was about, found again
    assert judge(warned, said, 4, "C") == (None, [])  # a new call: the agent changed course
    assert judge(warned, [], 4, "A") == (None, [])  # the same call, the failure not found again
    assert judge(warned, [("late_sprawl", "x")], 4, "A") == (None, [])  # another monitor's finding
    assert judge(warned, said, 4, None) == (None, warned)  # no call (a plan): the next call is judged
    assert judge(warned, said, 3 + WATCH_STEPS, "A") == (ignored, [])
    assert judge(warned, said, 4 + WATCH_STEPS, "A") == (None, [])  # too late: forgotten


def test_a_sub_agents_ignored_warnings_escalate_but_never_stop_the_run() -> None:
    pol = parse_escalation(LADDER)
    assert next_rung(pol, 2, "escalate", may_stop=False) == "escalate"
    assert next_rung(pol, 2, "escalate", may_stop=True) == "stop"


def test_a_program_that_cannot_run_again_and_again_is_escalated_but_never_stopped() -> None:
    """`javac: command not found` nine times is the environment's limit, not a failing approach:
    the task may still be done without compiling, so the stronger model is told, the run goes on."""
    run = Run(escalation=LADDER)
    for k in range(1, 12):
        run.feed(
            step(
                "r",
                k,
                thought="Compile the test to check the fix.",
                action="bash",
                action_input={"command": "javac -cp lib/* Test.java"},
                observation="/bin/sh: 1: javac: command not found",
                observation_is_error=True,
            )
        )
    assert "escalate" in run.actions() and "stop" not in run.actions()
    assert run.state.ignored >= 2


def test_an_agent_trying_a_new_edit_each_time_is_not_ignoring() -> None:
    run = Run(escalation=LADDER)
    for k in range(1, 16):
        if k % 2:
            run.feed(failing("r", k))
        else:
            run.feed(step("r", k, action="edit", action_input={"path": "a.py", "text": f"attempt {k}"}))
    assert "stop" not in run.actions()


def test_with_stop_disabled_the_run_is_escalated_and_never_stopped() -> None:
    run = looping(Run(escalation={"escalate_model_after": 1}), 15)
    assert "stop" not in run.actions() and run.actions()[-1] == "escalate"
    assert all(d["model"] == "big-model" for d in run.decisions if d["action"] == "escalate")
    assert run.state.rung == "escalate" and run.state.ignored >= 3


def test_stop_comes_only_when_a_policy_sets_stop_after() -> None:
    assert next_rung(parse_escalation({"escalate_model_after": 1}), 100, "nudge") == "escalate"
    assert next_rung(parse_escalation({}), 100, "nudge") == "nudge"
    assert next_rung(parse_escalation({"stop_after": 3}), 2, "nudge") == "nudge"
    assert next_rung(parse_escalation({"stop_after": 3}), 3, "nudge") == "stop"


def test_a_stopped_run_stays_stopped_while_it_makes_no_progress() -> None:
    """Until it makes progress (tests/unit/core/test_waiting_ladder.py): the same call with the
    same result again, or fewer than PROGRESS_STEPS quiet calls, keep the stop."""
    run = looping(Run(escalation=LADDER), 12)
    run.feed(other("r", 13))
    run.feed(other("r", 14))
    tail = run.decisions[-9:]
    assert all(d["action"] == "stop" and d["action_reason"] is not None for d in tail)
    assert all("STOP" in (d["injection_text"] or "") for d in tail)
    assert run.state.rung == "stop"


def test_a_disabled_ladder_nudges_as_before() -> None:
    off = Policy().with_escalation(Defaults.parse({"enabled": False}))
    for run in (looping(Run(off), 12), looping(Run(escalation={**LADDER, "enabled": False}), 12)):
        assert set(run.actions()) <= {"continue", "nudge"} and "nudge" in run.actions()
        assert all(d["action_reason"] is None for d in run.decisions)
        assert run.state.ignored == 0 and run.state.warnings == []
        nudged = [d for d in run.decisions if d["action"] == "nudge"]
        assert all(any(i["source"] == "monitor" for i in d["injections"]) for d in nudged)


def test_the_ladder_state_stays_bounded_however_long_the_run() -> None:
    run = looping(Run(escalation={"escalate_model_after": 1}), 120)
    st = run.state
    # one ignored warning per warning sent (past the guardrails' cap: the loop is still told),
    # and the steps kept of them are capped
    assert st.ignored >= MAX_MONITOR_INJECTIONS and len(st.ignored_steps) <= STEPS_KEPT
    assert len(st.warnings) <= len(Policy().monitors)
    assert st.rung_reason is not None and len(st.rung_reason["steps"]) <= STEPS_KEPT
    # the decision log keeps the last texts, each cut: flat in the run's length
    assert len(st.encode()) < 20 * 1024
    assert (
        len(st.encode()) - len(looping(Run(escalation={"escalate_model_after": 1}), 60).state.encode()) < 512
    )


def test_without_an_escalation_model_the_escalate_rung_routes_nothing_and_says_so() -> None:
    run = Run(escalation=LADDER)
    run.table["r"] = run.state.evolve(
        config=run.state.config.__class__(**{**run.state.config.__dict__, "model_routing": {}})
    )
    looping(run, 5)
    esc = next(d for d in run.decisions if d["action"] == "escalate")
    assert esc["model"] is None
    assert esc["action_reason"] is not None and "No escalation model" in esc["action_reason"]["text"]


def test_a_switched_off_monitor_never_fires_and_a_raised_threshold_holds_it() -> None:
    for settings in ({"monitors_off": ["semantic_loop"]}, {"monitor_thresholds": {"semantic_loop": 1.0}}):
        run = looping(Run(escalation=LADDER, **settings), 8)
        assert all("semantic_loop" not in d["monitors"]["fired"] for d in run.decisions)
        assert "stop" not in run.actions()
    off = looping(Run(monitors_off=["semantic_loop"]), 3)
    assert off.decisions[-1]["monitors"]["scores"]["semantic_loop"] == 0.0


def test_an_orgs_default_policy_gives_the_same_ladder_in_replay() -> None:
    policy = Policy().with_escalation(Defaults.parse(LADDER))
    engine_run = looping(Run(policy), 6)
    rp = Replayer(sem=SEM, policy=policy, clock=lambda: 1.0)
    lines = [b(run_start("r", model_routing=ROUTING)), *(b(failing("r", k)) for k in range(1, 7))]
    replayed = [d for d, _ in rp.run(lines) if d is not None]
    assert [d["action"] for d in replayed] == [d["action"] for d in engine_run.decisions]
    assert replayed[-1]["action"] == "stop"
    assert [d["action_reason"] for d in replayed] == [d["action_reason"] for d in engine_run.decisions]


def test_an_orgs_default_monitor_settings_apply_unless_the_run_sets_its_own() -> None:
    defaults = Defaults.parse(
        None,
        None,
        {"monitor_thresholds": {"semantic_loop": 1.0}},  # the deployment: loops hold
        {"acme": {"monitors_off": ["late_sprawl"]}},  # acme: its own, thresholds unset
    )
    policy = Policy().with_escalation(defaults)
    held = looping(Run(policy), 4)
    assert held.state.config.monitor_thresholds == {"semantic_loop": 1.0}
    assert all("semantic_loop" not in d["monitors"]["fired"] for d in held.decisions)
    acme = looping(Run(policy, org_id="acme"), 4)
    assert acme.state.config.monitors_off == ["late_sprawl"] and acme.state.config.monitor_thresholds == {}
    assert "semantic_loop" in acme.decisions[-1]["monitors"]["fired"]
    own = looping(Run(policy, monitor_thresholds={}), 4)  # the run's own setting wins, even empty
    assert "semantic_loop" in own.decisions[-1]["monitors"]["fired"]
    rp = Replayer(sem=SEM, policy=policy, clock=lambda: 1.0)
    lines = [b(run_start("r", model_routing=ROUTING)), *(b(failing("r", k)) for k in range(1, 5))]
    replayed = [d for d, _ in rp.run(lines) if d is not None]
    assert [d["monitors"] for d in replayed] == [d["monitors"] for d in held.decisions]


def test_default_monitor_settings_naming_no_monitor_are_refused_at_start() -> None:
    with pytest.raises(
        ValueError, match=r"RB_ORG_MONITOR_DEFAULTS\['acme'\]: monitors_off: unknown monitor 'loop'"
    ):
        Defaults.parse(None, None, None, {"acme": {"monitors_off": ["loop"]}}).check(Policy().monitor_names)
    with pytest.raises(ValueError, match="RB_MONITOR_DEFAULTS: unknown field"):
        Defaults.parse(None, None, {"monitors_of": []})


@pytest.mark.parametrize("bad", [{"stop_after": 0}, {"nope": 1}, "x"])
def test_a_bad_org_default_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError):
        Defaults.parse(bad)


def _handed_off(lead: bool) -> Run:
    """Triage speaks first, then hands the run to Coder, which loops and ignores the warnings."""
    run = Run(escalation=LADDER)
    run.feed(step("r", 1, agent="Triage", action="transfer_to_coder", action_input={}, observation="{}"))
    for k in range(2, 12):
        ev = failing("r", k)
        ev["agent"] = "Coder"
        if lead and k == 2:
            ev["lead"] = True
        run.feed(ev)
    return run


def test_an_agent_that_took_over_by_hand_off_is_stopped_like_the_lead() -> None:
    """A hand-off transfers control for good: the step that says `lead` makes Coder the agent
    whose ignored warnings end the run. Without it Coder is a sub-agent that will report back,
    and is escalated but never stopped."""
    assert "stop" in _handed_off(lead=True).actions()
    not_marked = _handed_off(lead=False).actions()
    assert "escalate" in not_marked and "stop" not in not_marked
