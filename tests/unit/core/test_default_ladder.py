"""The default ladder and the wait budget (issue 48, items 6 and 7), through the real Engine.

A run whose run_start, org and deployment name no escalation policy gets the built-in one
(`ladder.DEFAULT_ESCALATION`): only exact repeats, calls that never ran, unchanged waits past
their budget and tainted calls climb it. A wait with no change in its result has a budget in
calls, estimated dollars and seconds; a wait whose result changes is never warned.
See docs/escalation.md and docs/monitors.md#waiting-is-not-looping."""

from __future__ import annotations

from typing import Any

import pytest

from streams.core.budget import WAIT_BUDGET_CALLS, WaitBudget
from streams.core.decision import DecisionRecord
from streams.core.ladder import DEFAULT_ESCALATION, Defaults, InvalidRunSettings
from streams.core.policy import Policy
from streams.core.prices import ModelPrice, PriceTable
from streams.core.state import TraceState
from streams.kafka.client_settings import SettingsError
from streams.settings import Settings
from tests.driving import sealed
from tests.factories import b, run_start, step
from tests.models import semantics

SEM = semantics()
T0 = 1_767_225_600.0


class Run:
    """One run through the engine; `start` is the run_start's extra fields."""

    def __init__(self, policy: Policy | None = None, **start: Any) -> None:
        self.policy = policy
        self.table: dict[str, TraceState] = {}
        self.decisions: list[DecisionRecord] = []
        self.feed(run_start("r", model_routing={"SLOW": "big-model"}, ts=T0, **start))

    def feed(self, ev: dict[str, Any]) -> DecisionRecord:
        res = sealed(b(ev), self.table.get, None, 1.0, SEM, policy=self.policy)
        assert res.rejection is None and res.decision is not None and res.state is not None
        self.table["r"] = res.state
        self.decisions.append(res.decision)
        return res.decision

    def call(self, k: int, command: str, out: str, ts: float, error: bool = False, **kw: Any) -> None:
        self.feed(
            step(
                "r",
                k,
                thought="Check on it.",
                action="bash",
                action_input={"command": command},
                observation=out,
                observation_is_error=error,
                ts=ts,
                **kw,
            )
        )

    def actions(self) -> list[str]:
        return [d["action"] for d in self.decisions[1:]]

    def first(self, action: str) -> int | None:
        return next((d["step"] for d in self.decisions[1:] if d["action"] == action), None)

    def text(self, k: int) -> str:
        return self.decisions[k]["injection_text"] or ""


# -- item 6: the default ladder -------------------------------------------------------------


def test_a_run_that_names_no_policy_gets_the_default_ladder() -> None:
    assert Defaults().for_org("any") == DEFAULT_ESCALATION
    assert DEFAULT_ESCALATION.failure_types == (
        "loop.repeat",
        "loop.not_run",
        "loop.wait",
        "prompt_injection",
    )
    run = Run()
    cfg = run.table["r"].config
    assert cfg.escalation == DEFAULT_ESCALATION.to_wire()


def test_an_exact_repeat_loop_is_escalated_then_stopped_and_never_goes_silent() -> None:
    run = Run()
    for k in range(1, 41):  # the new user's loop: the same failing call, 40 times
        run.call(k, "python app.py", "Traceback ...\nKeyError: 'user'", T0 + k, error=True)
    acts = run.actions()
    esc, stop = run.first("escalate"), run.first("stop")
    assert esc is not None and stop is not None and esc < stop <= 8
    assert run.decisions[esc]["model"] == "big-model"
    # every decision from the stop on says stop, with its text: past the five-injection cap
    assert acts[stop - 1 :] == ["stop"] * (40 - stop + 1)
    assert all(run.text(k).startswith("[REASONBLOCKS]\nSTOP.") for k in range(stop, 41))
    why = run.decisions[stop]["action_reason"]
    assert why is not None and why["monitor"] == "semantic_loop" and "ignored" in why["text"]


def test_calls_that_never_ran_climb_the_default_ladder() -> None:
    run = Run()
    refused = "[Your command is NOT executed. The previous command is still running.]"
    for k in range(1, 10):
        run.call(k, f"ls /tmp/d{k}", refused, T0 + k, error=True)  # a new command each time
    assert run.first("escalate") is None  # a different call each time: nothing ignored
    run2 = Run()
    for k in range(1, 10):
        run2.call(k, "ls /tmp/d", refused, T0 + k, error=True)
    assert run2.first("stop") is not None


def _reworded_searches(run: Run) -> Run:
    words = ["session timeout", "session expiry", "session token expiration", "session timeout"] * 4
    for k, q in enumerate(words, start=1):
        run.feed(
            step(
                "r",
                k,
                thought="Search.",
                action="search",
                action_input={"query": q},
                observation="No results found.",
                ts=T0 + k,
            )
        )
    return run


def test_a_reworded_search_loop_only_nudges_under_the_default_ladder() -> None:
    run = _reworded_searches(Run())
    assert "escalate" not in run.actions() and "stop" not in run.actions()
    # the same run with a policy counting every warning (issue 30's) is escalated
    every = _reworded_searches(Run(escalation={"escalate_model_after": 1, "stop_after": 2}))
    assert every.first("escalate") is not None


def loop(run: Run, n: int = 12) -> None:
    for k in range(1, n + 1):
        run.call(k, "python app.py", "Traceback ...\nKeyError: 'user'", T0 + k, error=True)


def test_a_run_starts_own_policy_wins_over_the_default() -> None:
    run = Run(escalation={"escalate_model_after": 3})
    loop(run)
    assert "stop" not in run.actions() and run.first("escalate") is not None


@pytest.mark.parametrize(
    "defaults",
    [
        Defaults.parse({"enabled": False}),
        Defaults.parse(None, {"acme": {"enabled": False}}),
    ],
)
def test_enabled_false_turns_the_default_ladder_off_for_the_deployment_or_an_org(defaults: Defaults) -> None:
    run = Run(Policy().with_escalation(defaults), org_id="acme")
    loop(run)
    assert set(run.actions()) <= {"continue", "nudge"}
    assert run.table["r"].rung in ("continue", "nudge")


def test_enabled_false_in_run_start_turns_it_off_for_one_run() -> None:
    run = Run(escalation={"enabled": False})
    loop(run)
    assert set(run.actions()) <= {"continue", "nudge"}


def test_failure_types_is_validated() -> None:
    with pytest.raises(InvalidRunSettings, match="failure_types"):
        Defaults.parse({"failure_types": "loop"})
    with pytest.raises(InvalidRunSettings, match="failure_types"):
        Defaults.parse({"failure_types": [""]})
    assert Defaults.parse({"stop_after": 2, "failure_types": ["loop"]}).default is not None


# -- item 7: a wait with no change in its result has a budget --------------------------------

HEADER = "NAME               READY   STATUS              RESTARTS   AGE\n"
UNCHANGED = {
    "pending": ('{"id": 42, "status": "pending"}', False),
    "http 503 retry": ("HTTP 503 Service Unavailable: please retry later", True),
    "rate limit try again": ('{"error": "rate limit exceeded, try again in a moment"}', True),
    "ContainerCreating": (f"{HEADER}web-7d4b9c-x2k1z   0/1     ContainerCreating   0   1m", False),
}


@pytest.mark.parametrize("kind", sorted(UNCHANGED))
def test_a_250_step_wait_with_an_unchanged_result_is_escalated_within_its_budget(kind: str) -> None:
    out, error = UNCHANGED[kind]
    run = Run()
    gaps = [10.0, 12.5, 15.0]  # 10-15 s apart
    t = T0
    for k in range(1, 251):
        t += gaps[k % 3]
        run.call(k, "check --job 42", out, t, error=error)
    # counted from the first call waited on (step 2): the budget's last call is warned, the
    # next one ignores the warning
    warned = WAIT_BUDGET_CALLS + 1
    assert run.first("nudge") == warned
    assert run.first("escalate") == warned + 1 and run.first("stop") == warned + 2
    assert run.actions().count("continue") == warned - 1
    text = run.text(warned)
    assert f"called `bash` (`check --job 42`) {WAIT_BUDGET_CALLS} times since step 2" in text
    assert f"past its budget of {WAIT_BUDGET_CALLS} calls with no change" in text
    assert "every result was the same" in text and "estimated $" in text
    stop = run.decisions[warned + 2]["action_reason"]
    assert stop is not None and stop["monitor"] == "semantic_loop" and stop["ignored"] == 2


def test_a_page_saying_not_ready_read_200_times_at_12_s_is_stopped() -> None:
    run = Run()
    for k in range(1, 201):
        run.feed(
            step(
                "r",
                k,
                thought="Read the page again.",
                action="visit_page",
                action_input={"url": "https://status.example.test/report/7"},
                observation="Report 7\n\nThe report is not ready. Please try again later.",
                ts=T0 + 12 * k,
            )
        )
    assert run.first("escalate") == WAIT_BUDGET_CALLS + 2
    assert run.actions()[-1] == "stop"


STATES = ("queued", "provisioning", "running", "building")


def polled(run: Run, n: int, out: Any) -> None:
    for k in range(1, n + 1):
        run.call(k, "kubectl get job build-42", out(k), T0 + 12.5 * k)


@pytest.mark.parametrize(
    "out",
    [
        lambda k: f'{{"status": "running", "progress": "{k * 100 // 250}%"}}',  # progress
        lambda k: f'{{"status": "in_progress", "completed_steps": {k // 5}, "total": 60}}',  # counts
        lambda k: f'{{"status": "{STATES[(k // 25) % 4]}"}}',  # a new state every 25 calls
    ],
    ids=["progress", "counts", "new-state"],
)
def test_a_polling_run_whose_result_changes_is_never_escalated(out: Any) -> None:
    run = Run()
    polled(run, 250, out)
    assert "escalate" not in run.actions() and "stop" not in run.actions()
    assert not any("past its budget" in run.text(k) for k in range(1, 251))


def test_a_long_status_page_whose_count_moves_is_a_new_result_each_time() -> None:
    run = Run()
    log = "build log line that does not change\n" * 30  # past the length where the loop masks digits
    polled(run, 120, lambda k: f"{log}status: running, {k // 3} of 200 tests done")
    assert "escalate" not in run.actions() and "stop" not in run.actions()


def test_the_wait_budget_counts_estimated_dollars_too() -> None:
    dear = PriceTable({"dear-model": ModelPrice(15.0, 18.75, 1.5, 75.0)})
    run = Run(Policy().with_prices(dear), model="dear-model")
    page = "still building... " + "log line of the build that does not change\n" * 400  # ~4.5k tokens a call
    for k in range(1, 40):
        run.call(k, "ci status", page, T0 + 12 * k)
    warned = run.first("nudge")
    assert warned is not None and warned < WAIT_BUDGET_CALLS
    assert "past its budget of an estimated $1.00 of model calls with no change" in run.text(warned)


def test_the_wait_budget_counts_time_too() -> None:
    policy = Policy().with_escalation(Defaults.parse(wait=WaitBudget(seconds=600.0, calls=1000, usd=100.0)))
    run = Run(policy)
    for k in range(1, 20):
        run.call(k, "gh run view 7 --json status", '{"status": "queued"}', T0 + 60 * k)
    # 600 s after step 2 (the first call waited on) is step 12; the advice at 10 minutes of
    # waiting (step 11) comes first, and the guardrails' cooldown holds a warning right after it
    warned = next(k for k in range(1, 20) if "past its budget" in run.text(k))
    assert 12 <= warned <= 14 and "past its budget of 10 minutes with no change" in run.text(warned)
    assert f"over {warned - 2} minutes" in run.text(warned)
    assert run.first("escalate") == warned + 1 and run.first("stop") == warned + 2


def test_an_orgs_wait_budget_wins_and_is_kept_in_the_run_config() -> None:
    defaults = Defaults.parse(None, None, None, None, WaitBudget(), {"acme": {"calls": 10}})
    run = Run(Policy().with_escalation(defaults), org_id="acme")
    for k in range(1, 15):
        run.call(k, "check --job 1", '{"status": "pending"}', T0 + 12 * k)
    assert run.first("nudge") == 11
    assert run.table["r"].config.wait_budget == {"seconds": 1200.0, "calls": 10, "usd": 1.0}
    other = Run(Policy().with_escalation(defaults), org_id="other")
    assert other.table["r"].config.wait_budget is None  # the built-in one


def test_wait_budget_settings_are_checked_with_one_clear_line() -> None:
    s = Settings.from_env({"RB_WAIT_BUDGET_CALLS": "12", "RB_ORG_WAIT_BUDGET": '{"acme": {"usd": 0.5}}'})
    d = s.escalation_defaults
    assert d.wait.calls == 12 and d.wait_for_org("acme") == WaitBudget(1200.0, 12, 0.5)
    with pytest.raises(SettingsError, match="RB_ORG_WAIT_BUDGET"):
        Settings.from_env({"RB_ORG_WAIT_BUDGET": '{"acme": {"calls": 0}}'})
    with pytest.raises(SettingsError, match="RB_ORG_WAIT_BUDGET"):
        Settings.from_env({"RB_ORG_WAIT_BUDGET": '{"acme": {"minutes": 3}}'})
