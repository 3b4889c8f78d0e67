"""The escalation ladder end to end: agents steered through the real broker and worker climb
nudge -> escalate -> stop when they ignore warnings, and only then (issue 30)."""

from __future__ import annotations

from typing import Any

import pytest

from streams.agent.client import Decision, SyncSteeringClient
from streams.agent.session import STOPPED_OUTCOME, RunStopped, SteeringSession
from streams.local.worker_process import WorkerProcess
from tests.integration.helpers import run_summary

pytestmark = pytest.mark.integration

TASK = "Fix the failing test in tests/test_session.py (expired tokens raise KeyError)."
FAILING = "FAILED tests/test_session.py::test_expired - KeyError: 'expires_at'\n1 failed, 12 passed"
ROUTING = {"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5"}
LADDER = {"escalate_model_after": 1, "stop_after": 2}
# The same call with the same result, again and again: semantic_loop fires on the third and
# on every one after it.
RERUN: dict[str, Any] = {
    "thought": "The expiry test fails. Run it again.",
    "action": "run_tests",
    "action_input": {"path": "tests/test_session.py"},
    "observation": FAILING,
    "observation_is_error": True,
    "tokens": 400,
}
CHANGE_COURSE: list[dict[str, Any]] = [
    {
        "thought": "Rerunning tells me nothing new; read the code instead.",
        "action": "read_file",
        "action_input": {"path": "auth/session.py"},
        "observation": "def expiry(tok):\n    return tok['expires_at']\n",
        "tokens": 400,
    },
    {
        "thought": "Use .get so a token without expiry does not raise.",
        "action": "edit_file",
        "action_input": {
            "path": "auth/session.py",
            "old": "tok['expires_at']",
            "new": "tok.get('expires_at')",
        },
        "observation": "edited 1 line",
        "tokens": 400,
    },
    {
        "thought": "Run the test once to confirm the fix.",
        "action": "run_tests",
        "action_input": {"path": "tests/test_session.py"},
        "observation": "13 passed",
        "tokens": 400,
    },
]


@pytest.fixture(scope="module")
def ladder_worker(adapters_worker: WorkerProcess) -> WorkerProcess:
    """The session's shared worker (the same settings this module's own had); every test
    reads back only its runs."""
    return adapters_worker


def session(client: SyncSteeringClient, **kw: Any) -> SteeringSession:
    return SteeringSession(
        client, model="claude-sonnet-4-5", model_routing=ROUTING, task=TASK, e_traces_enabled=False, **kw
    )


def drive(s: SteeringSession, steps: list[dict[str, Any]]) -> list[tuple[str, str | None, Decision | None]]:
    """Run the steps; per model call: the action and model it was steered with, and the
    decision its step got back."""
    seen: list[tuple[str, str | None, Decision | None]] = []
    for fields in steps:
        steer = s.begin_step()
        seen.append((steer.action, steer.model, s.end_step(**fields)))
    return seen


def actions(decisions: list[Decision | None]) -> list[str]:
    return [d.action if d is not None else "late" for d in decisions]


def test_an_agent_that_ignores_two_warnings_is_escalated_then_stopped(ladder_worker: WorkerProcess) -> None:
    with SyncSteeringClient(ladder_worker.settings, deadline_ms=15000) as c:
        s = session(c, escalation=LADDER)
        s.start()
        seen: list[tuple[str, str | None, Decision | None]] = []
        with pytest.raises(RunStopped) as info:
            for _ in range(12):
                steer = s.begin_step()
                seen.append((steer.action, steer.model, s.end_step(**RERUN)))
        s.finish("success")
    got = actions([d for _, _, d in seen])
    assert "late" not in got, got
    nudge, escalate, stop = (got.index(a) for a in ("nudge", "escalate", "stop"))
    assert nudge < escalate < stop == len(got) - 1, got
    esc = seen[escalate][2]
    assert esc is not None and esc.model == "claude-opus-4-5"  # model_routing["SLOW"]
    assert esc.action_reason is not None and esc.action_reason["monitor"] == "semantic_loop"
    assert esc.action_reason["ignored"] == 1 and esc.injection_text
    assert seen[escalate + 1][:2] == ("escalate", "claude-opus-4-5")  # the next call was escalated
    last = seen[stop][2]
    assert last is not None and last.action_reason is not None
    assert last.action_reason["ignored"] == 2 and last.action_reason["monitor"] == "semantic_loop"
    assert last.step in last.action_reason["steps"]  # the evidence: the steps that repeated it
    err = info.value
    assert err.run_id == s.run_id and err.step == last.step
    assert err.reason == last.action_reason["text"].strip() and err.reason
    assert s.stopped_by_steering and s.outcome == STOPPED_OUTCOME
    assert run_summary(ladder_worker, s.run_id)["outcome"] == STOPPED_OUTCOME


def test_a_stopped_run_keeps_answering_stop(ladder_worker: WorkerProcess) -> None:
    with SyncSteeringClient(ladder_worker.settings, deadline_ms=15000) as c:
        s = session(c, escalation=LADDER, on_stop="return")
        s.start()
        got = actions([d for _, _, d in drive(s, [RERUN] * 10)])
        s.finish()
    first = got.index("stop")
    assert got[first:] == ["stop"] * (len(got) - first), got  # the same call again is no progress
    assert s.outcome == STOPPED_OUTCOME


def test_an_agent_that_changes_course_after_the_nudge_is_not_escalated(ladder_worker: WorkerProcess) -> None:
    with SyncSteeringClient(ladder_worker.settings, deadline_ms=15000) as c:
        s = session(c, escalation=LADDER)
        s.start()
        seen = drive(s, [RERUN] * 3 + CHANGE_COURSE)
        s.finish("success")
    got = actions([d for _, _, d in seen])
    assert got[2] == "nudge", got  # the loop was warned about, after the third rerun
    assert set(got) <= {"continue", "nudge"}, got
    assert {m for _, m, _ in seen} == {"claude-sonnet-4-5"}
    assert not s.stopped_by_steering
    assert run_summary(ladder_worker, s.run_id)["outcome"] == "success"


def test_a_run_whose_policy_disables_stop_is_never_stopped(ladder_worker: WorkerProcess) -> None:
    with SyncSteeringClient(ladder_worker.settings, deadline_ms=15000) as c:
        no_stop = session(c, escalation={"escalate_model_after": 1, "stop_after": None})
        no_stop.start()
        escalated = actions([d for _, _, d in drive(no_stop, [RERUN] * 8)])
        no_stop.finish("failure")
        off = session(c, escalation={**LADDER, "enabled": False})
        off.start()
        nudged = actions([d for _, _, d in drive(off, [RERUN] * 8)])
        off.finish("failure")
    assert "escalate" in escalated and "stop" not in escalated, escalated
    assert "nudge" in nudged and set(nudged) <= {"continue", "nudge"}, nudged  # today's behaviour
    assert not no_stop.stopped_by_steering and not off.stopped_by_steering


def test_a_langchain_agent_is_stopped_with_a_message_that_says_why(ladder_worker: WorkerProcess) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from examples.scripted_model import Script, ScriptedModel
    from streams.agent.adapters.langchain_middleware import STOP_NAME, STOP_PREFIX, SteeringMiddleware

    @tool
    def run_tests(path: str) -> str:
        """Run the tests in `path`."""
        return FAILING

    script = Script(
        [
            AIMessage(
                content=RERUN["thought"],
                tool_calls=[{"name": "run_tests", "args": RERUN["action_input"], "id": f"c{i}"}],
            )
            for i in range(12)
        ]
    )
    with SyncSteeringClient(ladder_worker.settings, deadline_ms=15000) as c:
        mw = SteeringMiddleware(
            c,
            model="claude-sonnet-4-5",
            model_routing=ROUTING,
            model_factory=ScriptedModel.factory(script),
            escalation=LADDER,
            e_traces_enabled=False,
        )
        agent = create_agent(
            ScriptedModel(script=script, model_id="claude-sonnet-4-5"), [run_tests], middleware=[mw]
        )
        with mw.run():
            out = agent.invoke({"messages": [{"role": "user", "content": TASK}]})
        session_ = mw.session
    assert session_ is not None and session_.stopped_by_steering
    last = out["messages"][-1]
    assert isinstance(last, AIMessage) and last.name == STOP_NAME and not last.tool_calls
    assert isinstance(last.content, str) and last.content.startswith(STOP_PREFIX)
    assert len(last.content) > len(STOP_PREFIX) + 20, last.content  # and the reason after it
    used = [m for m, _ in script.calls]
    assert "claude-opus-4-5" in used and used[-1] == "claude-opus-4-5", used  # escalated, then stopped
    assert len(used) < 12  # stopped before the script ran out
    assert run_summary(ladder_worker, session_.run_id)["outcome"] == STOPPED_OUTCOME
