"""Waiting is not looping, and the rung comes down on progress (issue 38, item 3), through the
real Engine with the ladder at `{"escalate_model_after": 1, "stop_after": 2}`. See
docs/monitors.md#waiting-is-not-looping and docs/escalation.md."""

from __future__ import annotations

from typing import Any

from streams.core.decision import DecisionRecord
from streams.core.ladder import PROGRESS_STEPS
from streams.core.policy import Policy
from streams.core.state import TraceState
from streams.replay import Replayer
from tests.driving import sealed
from tests.factories import b, run_start, step
from tests.models import semantics

SEM = semantics()
LADDER = {"escalate_model_after": 1, "stop_after": 2}
T0 = 1_767_225_600.0
CI = "gh run view 4242 --json status"
API = "curl -s https://api.example.test/v1/items"
UNAVAILABLE = "HTTP 503 Service Unavailable: please retry later"


class Run:
    def __init__(self, policy: Policy | None = None, now: float = 1.0) -> None:
        self.policy, self.now = policy, now
        self.table: dict[str, TraceState] = {}
        self.decisions: list[DecisionRecord] = []
        self.events: list[dict[str, Any]] = []
        self.feed(run_start("r", model_routing={"SLOW": "big-model"}, escalation=LADDER, ts=T0))

    def feed(self, ev: dict[str, Any]) -> DecisionRecord:
        self.events.append(ev)
        res = sealed(b(ev), self.table.get, None, self.now, SEM, policy=self.policy)
        assert res.rejection is None and res.decision is not None and res.state is not None
        self.table["r"] = res.state
        self.decisions.append(res.decision)
        return res.decision

    def bash(self, k: int, command: str, out: str, ts: float, error: bool = False, thought: str = "") -> None:
        self.feed(
            step(
                "r",
                k,
                thought=thought or "Check on it.",
                action="bash",
                action_input={"command": command},
                observation=out,
                observation_is_error=error,
                ts=ts,
            )
        )

    @property
    def state(self) -> TraceState:
        return self.table["r"]

    def actions(self) -> list[str]:
        return [d["action"] for d in self.decisions[1:]]

    def loop_fires(self) -> list[int]:
        return [d["step"] for d in self.decisions if "semantic_loop" in d["monitors"]["fired"]]


def reads(run: Run, first: int, n: int, t: float) -> None:
    for k in range(first, first + n):
        run.feed(
            step(
                "r",
                k,
                thought=f"Read module {k}.",
                action="read_file",
                action_input={"path": f"src/m{k}.py"},
                observation=f"def f{k}(): return {k}",
                ts=t + k,
            )
        )


def test_a_healthy_run_polling_ci_every_30_s_is_never_escalated_nor_stopped() -> None:
    run = Run()
    for k in range(1, 9):
        run.bash(k, CI, '{"status": "in_progress"}', T0 + 30 * k, thought="Wait for the CI run.")
    run.bash(9, CI, '{"status": "completed"}', T0 + 30 * 9)
    reads(run, 10, 5, T0 + 300)
    assert run.loop_fires() == []
    assert set(run.actions()) == {"continue"}
    assert run.state.rung == "continue" and run.state.ignored == 0


def test_retries_of_a_503_spaced_out_are_waiting_not_a_loop() -> None:
    run = Run()
    for k in range(1, 9):
        run.bash(k, API, UNAVAILABLE, T0 + 20 * k, error=True)
    run.bash(9, API, '{"items": [1, 2, 3]}', T0 + 200)
    assert run.loop_fires() == [] and "stop" not in run.actions() and "escalate" not in run.actions()


def test_polling_kubectl_while_a_pod_is_created_is_waiting() -> None:
    header = "NAME               READY   STATUS              RESTARTS   AGE\n"
    run = Run()
    for k in range(1, 8):
        run.bash(
            k,
            "kubectl get pods",
            f"{header}web-7d4b9c-x2k1z   0/1     ContainerCreating   0   {15 * k}s",
            T0 + 15 * k,
        )
    run.bash(8, "kubectl get pods", f"{header}web-7d4b9c-x2k1z   1/1     Running   0   120s", T0 + 120)
    assert run.loop_fires() == [] and set(run.actions()) == {"continue"}


def test_a_rate_limit_retried_with_backoff_is_waiting() -> None:
    run = Run()
    t = T0
    for k, wait in enumerate([0, 1, 2, 4, 8, 16, 32], start=1):
        t += wait
        run.feed(
            step(
                "r",
                k,
                thought="Search again.",
                action="http_get",
                action_input={"url": "https://api.example.test/search?q=kafka"},
                observation='{"error": "429 Too Many Requests: rate limit exceeded"}',
                observation_is_error=True,
                ts=t,
            )
        )
    assert run.loop_fires() == [] and set(run.actions()) == {"continue"}


def test_a_run_hammering_a_503_with_no_wait_is_still_a_loop_and_is_stopped() -> None:
    run = Run()
    for k in range(1, 9):
        run.bash(k, API, UNAVAILABLE, T0 + 0.5 * k, error=True)
    assert run.loop_fires()[0] == 3
    assert run.actions()[2:5] == ["nudge", "escalate", "stop"] and run.actions()[-1] == "stop"


def hammered_then_stopped() -> Run:
    run = Run()
    for k in range(1, 7):
        run.bash(
            k,
            "pytest tests/test_x.py",
            "FAILED tests/test_x.py::test_x - AssertionError: 1 != 2",
            T0 + k,
            True,
        )
    assert run.state.rung == "stop"
    return run


def test_a_stopped_run_that_gets_a_new_result_for_the_warned_call_comes_down_a_rung() -> None:
    run = hammered_then_stopped()
    run.feed(
        step(
            "r",
            7,
            thought="Fix the off-by-one.",
            action="str_replace_editor",
            action_input={"command": "str_replace", "path": "src/x.py", "old_str": "n", "new_str": "n + 1"},
            observation="The file src/x.py has been edited.",
            ts=T0 + 7,
        )
    )
    assert run.decisions[-1]["action"] == "stop"  # one quiet call is not yet progress
    run.bash(8, "pytest tests/test_x.py", "1 passed in 0.01s", T0 + 8)
    lifted = run.decisions[-1]
    assert lifted["action"] == "escalate" and run.state.rung == "escalate" and run.state.ignored == 1
    assert "no longer holds" in (lifted["injection_text"] or "")
    assert "STOP." not in (lifted["injection_text"] or "")
    why = lifted["action_reason"]
    assert why is not None and "made progress at step 8" in why["text"] and why["ignored"] == 1
    reads(run, 9, PROGRESS_STEPS, T0)
    assert run.state.rung == "nudge" and run.state.ignored == 0
    assert run.actions()[-1] == "continue" and run.decisions[-1]["action_reason"] is None


def test_a_stopped_run_that_goes_on_quietly_comes_down_and_climbs_again_if_it_loops_again() -> None:
    run = hammered_then_stopped()
    reads(run, 7, PROGRESS_STEPS, T0)
    assert run.actions()[-PROGRESS_STEPS:] == ["stop"] * (PROGRESS_STEPS - 1) + ["escalate"]
    assert "no longer holds" in (run.decisions[-1]["injection_text"] or "")
    assert run.state.rung == "escalate"
    k = 7 + PROGRESS_STEPS
    for j in range(k, k + 4):
        run.bash(
            j,
            "pytest tests/test_x.py",
            "FAILED tests/test_x.py::test_x - AssertionError: 1 != 2",
            T0 + j,
            True,
        )
    assert run.state.rung == "stop" and run.actions()[-1] == "stop"


def test_a_long_wait_gets_advice_that_never_climbs_the_ladder() -> None:
    run = Run()
    for k in range(1, 16):  # a call every 10 minutes for 2.5 hours, the queue moving
        run.bash(k, f"sleep 600 && {CI}", f'{{"status": "queued", "position": {40 - k}}}', T0 + 600 * k)
    advised = [d for d in run.decisions if d["action"] == "nudge"]
    assert advised[0]["step"] == 3 and "waited 20 minutes on" in (advised[0]["injection_text"] or "")
    # later advice only at whole budgets (the guardrails' cooldown may hold one back)
    assert len(advised) >= 2
    assert all(f"waited {20 * (d['step'] - 1) // 2} minutes" in (d["injection_text"] or "") for d in advised)
    assert all((d["step"] - 1) % 2 == 0 for d in advised)
    assert "escalate" not in run.actions() and "stop" not in run.actions() and run.state.ignored == 0


def test_the_wait_budget_is_a_deployment_setting() -> None:
    run = Run(Policy().with_wait_budget(300.0))
    for k in range(1, 8):
        run.bash(k, CI, f'{{"status": "in_progress", "done": {k}}}', T0 + 60 * k)
    assert [d["step"] for d in run.decisions if d["action"] == "nudge"] == [6]  # 5 minutes after step 1
    assert "waited 5 minutes" in (run.decisions[6]["injection_text"] or "")


def test_an_unchanged_wait_past_the_deployment_budget_climbs_the_ladder() -> None:
    run = Run(Policy().with_wait_budget(300.0))
    for k in range(1, 12):
        run.bash(k, CI, '{"status": "in_progress"}', T0 + 60 * k)
    # advice at 5 minutes (step 6); 5 minutes of the same result after the first call waited
    # on (step 2) is step 7, held by the guardrails' cooldown after the advice until step 9
    assert run.actions()[5:11] == ["nudge", "continue", "continue", "nudge", "escalate", "stop"]
    assert "past its budget of 5 minutes with no change" in (run.decisions[9]["injection_text"] or "")
    assert "8 times since step 2, over 7 minutes" in (run.decisions[9]["injection_text"] or "")


def test_waiting_is_read_from_the_events_times_so_replay_decides_the_same() -> None:
    run = Run(now=5.0)
    for k in range(1, 7):
        run.bash(k, CI, '{"status": "in_progress"}', T0 + 30 * k)
    for k in range(7, 13):
        run.bash(k, API, UNAVAILABLE, T0 + 200 + 0.5 * k, error=True)
    replayed = [d for d, _ in Replayer(sem=SEM, clock=lambda: 9e9).run([b(e) for e in run.events]) if d]
    assert [d["action"] for d in replayed] == [d["action"] for d in run.decisions]
    assert [d["monitors"] for d in replayed] == [d["monitors"] for d in run.decisions]
    assert "stop" in run.actions()  # the hammered 503 at the end


def test_without_timestamps_nothing_is_known_to_have_passed_and_a_repeat_is_a_loop() -> None:
    run = Run()
    for k in range(1, 7):
        ev = step(
            "r", k, action="bash", action_input={"command": CI}, observation='{"status": "in_progress"}'
        )
        ev["ts"] = None
        run.feed(ev)
    assert run.loop_fires() != []


def test_the_worked_example_of_docs_escalation_md() -> None:
    run = Run()
    test = "pytest tests/test_parser.py"
    failed = "FAILED tests/test_parser.py::test_parse - AssertionError: 1 != 2"
    for k in (1, 2, 3):
        run.bash(k, test, failed, T0 + k, True)
    run.feed(
        step(
            "r",
            4,
            thought="Plan: look at the parser.",
            action=None,
            action_input=None,
            observation=None,
            ts=T0 + 4,
        )
    )
    for k in (5, 6, 7):
        run.bash(k, test, failed, T0 + k, True)
    run.feed(
        step(
            "r",
            8,
            thought="Fix the parser.",
            action="str_replace_editor",
            action_input={"command": "str_replace", "path": "src/parser.py", "old_str": "a", "new_str": "b"},
            observation="The file src/parser.py has been edited.",
            ts=T0 + 8,
        )
    )
    run.bash(9, test, "1 passed in 0.02s", T0 + 9)
    reads(run, 10, 3, T0)
    climbed = ["continue", "continue", "nudge", "continue", "escalate", "stop", "stop", "stop"]
    assert run.actions() == [*climbed, "escalate", "escalate", "escalate", "continue"]
    assert "made progress at step 9" in (run.decisions[9]["injection_text"] or "")
