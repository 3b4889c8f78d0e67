"""Compliance (issue 50 item 3): each monitor's test of whether the flagged behaviour stopped
within WATCH_STEPS steps of the intervention, its bounds, and its counts per served model."""

from __future__ import annotations

from typing import Any

from streams.core import compliance
from streams.core.compliance import DRIFT, LOOP, MODELS_KEPT, OTHER, VERIFICATION, WATCH_STEPS
from streams.core.monitors import data_instruction
from streams.core.reading.features import StepFeatures, extract
from streams.core.state import RunConfig, TraceState
from tests.factories import step

TASK = "Fix the session timeout in auth/session.py so that expired tokens are refused"


def _st(model: str | None = "m-own", arm: str | None = None) -> TraceState:
    return TraceState(run_id="r", config=RunConfig(task=TASK, model=model, arm=arm))


def _f(n: int, **kw: Any) -> StepFeatures:
    return extract(step("r", n, **kw), 20_000)


class _D(dict[str, Any]):
    """A decision as `observe` reads it, and whether it carried a new monitor text."""

    told: bool = True


def _d(fired: tuple[str, ...] | list[str] = (), told: bool = True, model: str | None = None) -> Any:
    d = _D(monitors={"fired": list(fired)}, injections=[], model=model)
    d.told = told
    return d


def _observe(st: TraceState, f: StepFeatures, d: Any) -> TraceState:
    return compliance.observe(st, f, d, d.told)


QUIET = _d([], told=False)
GREP = {"action": "bash", "action_input": "grep -rn timeout src/", "thought": "Search again."}


def _told(st: TraceState, monitor: str, n: int = 1, **kw: Any) -> TraceState:
    return _observe(st, _f(n, **kw), _d([monitor]))


def test_a_loop_warning_is_ignored_when_the_same_call_comes_again() -> None:
    st = _told(_st(), LOOP, 1, **GREP)
    st = _observe(st, _f(2, **GREP), QUIET)
    assert compliance.summary(st)[LOOP] == {"complied": 0, "ignored": 1, "pending": 0}


def test_a_loop_warning_is_ignored_when_the_loop_monitor_finds_the_loop_again_reworded() -> None:
    st = _told(_st(), LOOP, 1, **GREP)
    again = {**GREP, "action_input": "grep -rn expiry src/"}
    st = _observe(st, _f(2, **again), _d([LOOP], told=False))  # fired, held back
    assert compliance.summary(st)[LOOP]["ignored"] == 1


def test_a_loop_warning_is_heeded_after_the_window_without_the_call() -> None:
    st = _told(_st(), LOOP, 1, **GREP)
    for n in range(2, 2 + WATCH_STEPS - 1):
        st = _observe(st, _f(n, action="read_file", action_input={"path": f"f{n}.py"}), QUIET)
        assert compliance.summary(st)[LOOP]["pending"] == 1
    st = _observe(st, _f(9, action="read_file", action_input={"path": "g.py"}), QUIET)
    assert compliance.summary(st)[LOOP] == {"complied": 1, "ignored": 0, "pending": 0}


def test_a_verification_warning_is_heeded_by_running_the_tests_before_the_submit() -> None:
    st = _told(_st(), VERIFICATION, 1, action="submit", action_input="")
    st = _observe(st, _f(2, action="bash", action_input="pytest tests/test_session.py"), QUIET)
    assert compliance.summary(st)[VERIFICATION] == {"complied": 1, "ignored": 0, "pending": 0}


def test_a_verification_warning_is_ignored_by_submitting_again_unchecked() -> None:
    st = _told(_st(), VERIFICATION, 1, action="submit", action_input="")
    st = _observe(st, _f(2, action="submit", action_input=""), QUIET)
    assert compliance.summary(st)[VERIFICATION]["ignored"] == 1


def test_a_test_that_could_not_run_is_no_verification() -> None:
    st = _told(_st(), VERIFICATION, 1, action="submit", action_input="")
    missing = {
        "action": "bash",
        "action_input": "pytest",
        "observation": "bash: pytest: command not found",
        "observation_is_error": True,
    }
    for n in range(2, 2 + WATCH_STEPS):
        st = _observe(st, _f(n, **missing), QUIET)
    assert compliance.summary(st)[VERIFICATION] == {"complied": 0, "ignored": 1, "pending": 0}


def test_a_data_instruction_warning_is_ignored_when_a_hijacked_call_follows() -> None:
    st = _told(_st(), data_instruction.NAME, 1)
    hijacked = st.evolve(monitors={data_instruction.KEY: {"hit": [2, 1, "read_inbox", True]}})
    st = _observe(hijacked, _f(2, action="send_money", action_input={"iban": "X"}), QUIET)
    assert compliance.summary(st)[data_instruction.NAME]["ignored"] == 1


def test_a_data_instruction_warning_is_heeded_when_no_tainted_call_comes() -> None:
    st = _told(_st(), data_instruction.NAME, 1)
    plain = st.evolve(monitors={data_instruction.KEY: {"hit": [2, 1, "read_inbox", False]}})  # no instr
    st = plain
    for n in range(2, 2 + WATCH_STEPS):
        st = _observe(st, _f(n), QUIET)
    assert compliance.summary(st)[data_instruction.NAME] == {"complied": 1, "ignored": 0, "pending": 0}


def test_a_drift_warning_is_heeded_by_acknowledging_or_returning_to_the_task() -> None:
    off = {"thought": "Let me look at the marketing copy in the landing page.", "action": "read_file"}
    for back in (
        {"thought": "Switching to the billing exporter first, the user now wants it.", "action": "read_file"},
        {"thought": "Back to the timeout in session.py.", "action": "read_file"},
    ):
        st = _told(_st(), DRIFT, 1, **off)
        st = _observe(st, _f(2, **back), QUIET)
        assert compliance.summary(st)[DRIFT]["complied"] == 1, back


def test_a_drift_warning_is_ignored_when_the_run_stays_away() -> None:
    off = {"thought": "Let me look at the marketing copy in the landing page.", "action": "read_file"}
    st = _told(_st(), DRIFT, 1, **off)
    for n in range(2, 2 + WATCH_STEPS):
        st = _observe(st, _f(n, thought="Now the pricing table colours.", action="read_file"), QUIET)
    assert compliance.summary(st)[DRIFT] == {"complied": 0, "ignored": 1, "pending": 0}


def test_monitors_without_a_natural_test_count_nothing() -> None:
    st = _st()
    for name in compliance.UNTESTED:
        st = _told(st, name, 1)
    assert compliance.summary(st) == {} and st.compliance_pending == []


def test_a_fire_that_was_held_back_opens_no_check() -> None:
    st = _observe(_st(), _f(1, **GREP), _d([LOOP], told=False))
    assert compliance.summary(st) == {}


def test_a_check_open_when_the_run_ends_stays_pending() -> None:
    st = _told(_st(), VERIFICATION, 1, action="submit", action_input="")
    assert compliance.summary(st)[VERIFICATION] == {"complied": 0, "ignored": 0, "pending": 1}


def test_a_new_warning_of_the_same_monitor_closes_the_open_check_and_keeps_one_per_monitor() -> None:
    st = _st()
    for n in range(1, 40):
        st = _told(st, DRIFT, n, thought="Now the pricing table colours.", action="read_file")
        assert len(st.compliance_pending) == 1
    assert compliance.summary(st)[DRIFT] == {"complied": 0, "ignored": 38, "pending": 1}


def test_counts_are_kept_per_served_model_and_capped() -> None:
    st = _st(model="own")
    for n in range(1, 3 * MODELS_KEPT):
        d = _d([LOOP], model=f"model-{n}")
        st = _observe(st, _f(n, **{**GREP, "action_input": f"grep -rn x{n} ."}), d)
    models = compliance.by_model(st)[LOOP]
    assert len(models) <= MODELS_KEPT + 1 and OTHER in models
    total = compliance.summary(st)[LOOP]
    assert sum(m["complied"] + m["ignored"] for m in models.values()) == total["complied"] + total["ignored"]
    assert total["ignored"] == 3 * MODELS_KEPT - 2  # each new fire: the loop found again


def test_a_control_runs_checks_are_counted_under_its_own_model() -> None:
    st = _st(model="own", arm="control")
    st = _observe(st, _f(1, **GREP), _d([LOOP], model="escalated"))
    st = _observe(st, _f(2, **GREP), QUIET)
    assert compliance.by_model(st) == {LOOP: {"own": {"complied": 0, "ignored": 1}}}


def test_merge_adds_runs_up() -> None:
    a = {LOOP: {"complied": 1, "ignored": 2, "pending": 0}}
    b = {
        LOOP: {"complied": 1, "ignored": 0, "pending": 1},
        DRIFT: {"complied": 0, "ignored": 1, "pending": 0},
    }
    assert compliance.merge(a, b) == {
        LOOP: {"complied": 2, "ignored": 2, "pending": 1},
        DRIFT: {"complied": 0, "ignored": 1, "pending": 0},
    }


def test_run_finish_decides_the_checks_the_agent_answered_and_keeps_the_last_steps_pending() -> None:
    st = _told(_st(), LOOP, 1, **GREP)
    st = _observe(st, _f(2, action="read_file", action_input={"path": "b.py"}), QUIET)
    st = _told(st, VERIFICATION, 3, action="submit", action_input="")  # the last step
    st = compliance.finish(st)
    assert compliance.summary(st) == {
        LOOP: {"complied": 1, "ignored": 0, "pending": 0},
        VERIFICATION: {"complied": 0, "ignored": 0, "pending": 1},
    }


def test_a_verification_warning_answered_by_finishing_unchecked_is_ignored_at_run_finish() -> None:
    st = _told(_st(), VERIFICATION, 1, action="submit", action_input="")
    st = _observe(st, _f(2, thought="Done.", action="read_file"), QUIET)
    assert compliance.summary(compliance.finish(st))[VERIFICATION]["ignored"] == 1
