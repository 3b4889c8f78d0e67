"""Reading the previous step out of a LangChain history, and session misuse errors."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from streams.agent.adapters.langchain_middleware import previous_step
from streams.agent.session import SteeringSession, failure_outcome


def test_previous_step_reads_thought_action_observation_and_usage() -> None:
    history = [
        HumanMessage("fix it"),
        AIMessage("Old step.", tool_calls=[{"name": "x", "args": {}, "id": "0"}]),
        ToolMessage("old", tool_call_id="0"),
        AIMessage(
            [{"type": "text", "text": "Run the tests."}],
            tool_calls=[{"name": "run_tests", "args": {"path": "t.py"}, "id": "1"}],
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            response_metadata={"model_name": "claude-haiku-4-5"},
        ),
        ToolMessage("1 failed", tool_call_id="1", status="error"),
    ]
    before = [m.model_copy() for m in history]
    assert previous_step(history) == {
        "thought": "Run the tests.",
        "action": "run_tests",
        "action_input": {"path": "t.py"},
        "observation": "1 failed",
        "observation_is_error": True,
        "tokens": 15,
        "usage": {
            "input_tokens": 10,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "output_tokens": 5,
            "estimated": False,
        },
        "model_id": "claude-haiku-4-5",
        "served_model": "claude-haiku-4-5",
    }
    assert history == before  # read, never changed


def test_previous_step_of_a_final_answer_has_no_action() -> None:
    assert previous_step([HumanMessage("q"), AIMessage("The answer is 4.")]) == {
        "thought": "The answer is 4."
    }
    assert previous_step([HumanMessage("q")]) == {}


class _Client:
    """Only for the misuse checks below, which fail before any I/O."""

    def step_log(self, run_id: str) -> list[Any]:
        return []


def test_session_steps_must_alternate() -> None:
    s = SteeringSession(_Client(), "r1")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="start"):
        s.begin_step()
    s._started = True
    s.begin_step()
    with pytest.raises(RuntimeError, match="end_step"):
        s.begin_step()


def test_failure_outcome_names_the_exception_type() -> None:
    assert failure_outcome(TimeoutError) == "failure: TimeoutError"


def test_previous_step_names_the_agent_of_a_named_message() -> None:
    history = [HumanMessage("q"), AIMessage("Next, ask the researcher.", name="supervisor")]
    assert previous_step(history) == {"thought": "Next, ask the researcher.", "agent": "supervisor"}


def test_previous_step_reports_every_tool_call_of_the_message() -> None:
    history = [
        HumanMessage("look"),
        AIMessage(
            "Read both.",
            tool_calls=[
                {"name": "read_file", "args": {"path": "a.py"}, "id": "1"},
                {"name": "grep", "args": {"q": "x"}, "id": "2"},
            ],
        ),
        ToolMessage("A", tool_call_id="1"),
        ToolMessage("B", tool_call_id="2"),
    ]
    got = previous_step(history)
    assert got["action"] == "read_file+grep"
    assert got["action_input"] == [
        {"name": "read_file", "args": {"path": "a.py"}},
        {"name": "grep", "args": {"q": "x"}},
    ]
    assert got["observation"] == "A\nB"


def test_runs_must_be_thread_or_invocation() -> None:
    from streams.agent.adapters.langchain_middleware import SteeringMiddleware

    with pytest.raises(ValueError, match="runs must be"):
        SteeringMiddleware(object(), runs="session")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="thread_idle_s"):
        SteeringMiddleware(object(), thread_idle_s=-1)  # type: ignore[arg-type]


def test_org_and_project_come_from_the_runtime_context_when_given() -> None:
    from dataclasses import dataclass
    from types import SimpleNamespace

    from streams.agent.adapters.langchain_middleware import SteeringMiddleware

    @dataclass
    class Ctx:
        org_id: str
        project_id: str | None = None

    mw = SteeringMiddleware(object(), org_id="from-constructor")  # type: ignore[arg-type]
    assert mw._context_fields(SimpleNamespace(context={"org_id": "acme", "project_id": "web"})) == {
        "org_id": "acme",
        "project_id": "web",
    }
    assert mw._context_fields(SimpleNamespace(context=Ctx("globex"))) == {"org_id": "globex"}
    assert mw._context_fields(SimpleNamespace(context=None)) == {}  # the constructor's org_id stays
