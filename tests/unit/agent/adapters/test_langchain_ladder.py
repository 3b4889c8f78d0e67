"""A `create_agent` agent obeys the ladder: `stop` ends the run with a message saying why,
`escalate` routes the next call to the stronger model (decisions scripted, no worker)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from examples.scripted_model import Script, ScriptedModel
from streams.agent.adapters.langchain_middleware import STOP_NAME, STOP_PREFIX, SteeringMiddleware
from streams.agent.session import STOPPED_OUTCOME
from tests.unit.agent.fake_client import FakeClient, decision, sent, stop


@tool
def run_tests(path: str) -> str:
    """Run the tests in `path`."""
    return "1 failed"


def looping(n: int) -> Script:
    return Script(
        [
            AIMessage(
                content=f"Run it again ({i}).",
                tool_calls=[{"name": "run_tests", "args": {"path": "t"}, "id": f"c{i}"}],
            )
            for i in range(n)
        ]
        + [AIMessage(content="Done.")]
    )


def agent_for(
    client: FakeClient, script: Script, middleware: list[Any] | None = None, **kw: Any
) -> tuple[Any, SteeringMiddleware]:
    mw = SteeringMiddleware(
        client,  # type: ignore[arg-type]
        model="claude-sonnet-4-5",
        model_routing={"SLOW": "claude-opus-4-5"},
        model_factory=ScriptedModel.factory(script),
        **kw,
    )
    model = ScriptedModel(script=script, model_id="claude-sonnet-4-5")
    return create_agent(
        model, [run_tests], system_prompt="Be careful.", middleware=[*(middleware or []), mw]
    ), mw


def ask(agent: Any, **config: Any) -> dict[str, Any]:
    return agent.invoke({"messages": [{"role": "user", "content": "Fix the test."}]}, config or None)  # type: ignore[no-any-return]


def test_a_stop_ends_the_run_with_a_final_message_that_says_why() -> None:
    client = FakeClient(lambda k: stop(k) if k >= 3 else decision(k))
    script = looping(6)
    agent, mw = agent_for(client, script)
    out = ask(agent)
    last = out["messages"][-1]
    assert isinstance(last, AIMessage) and last.name == STOP_NAME and not last.tool_calls
    assert (
        last.content == f"{STOP_PREFIX} You were warned at step 2 and ran the same call again at steps 3, 4."
    )
    assert len(script.calls) == 3  # decision 3 said stop: no fourth model call
    assert client.kinds() == ["run_start", "step 1", "step 2", "step 3", "run_finish"]
    assert client.outcome() == STOPPED_OUTCOME
    assert mw.session is not None and mw.session.stopped_by_steering and mw.active_runs() == []


def test_a_stop_in_an_async_agent_ends_it_the_same_way() -> None:
    client = FakeClient(lambda k: stop(k) if k >= 2 else decision(k))
    script = looping(6)
    agent, _ = agent_for(client, script)
    out = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "Fix the test."}]}))
    assert out["messages"][-1].name == STOP_NAME and len(script.calls) == 2
    assert client.outcome() == STOPPED_OUTCOME


def test_an_escalation_routes_the_next_call_to_the_decisions_model() -> None:
    client = FakeClient(
        lambda k: decision(k, action="escalate", model="claude-opus-4-5") if k == 2 else decision(k)
    )
    script = looping(3)
    agent, mw = agent_for(client, script)
    out = ask(agent)
    assert [m for m, _ in script.calls] == [
        "claude-sonnet-4-5",
        "claude-sonnet-4-5",
        "claude-opus-4-5",  # decision 2 steers call 3
        "claude-sonnet-4-5",
    ]
    assert out["messages"][-1].content == "Done." and client.outcome() == "success"
    assert mw.session is not None and not mw.session.stopped_by_steering


def test_decisions_of_an_older_worker_steer_as_before() -> None:
    client = FakeClient(lambda k: {"run_id": "r", "step": k, "fsm_state": "NORMAL", "model": None})
    script = looping(2)
    out = ask(agent_for(client, script)[0])
    assert out["messages"][-1].content == "Done." and len(script.calls) == 3
    assert client.kinds() == ["run_start", "step 1", "step 2", "run_finish"]
    assert client.outcome() == "success"


def test_a_retried_call_publishes_its_step_once() -> None:
    from langchain.agents.middleware import ModelRetryMiddleware

    class Flaky(ScriptedModel):
        def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            if len(self.script.calls) == 1 and not getattr(self.script, "failed", False):
                self.script.failed = True
                raise ConnectionError("reset")
            return super()._generate(messages, stop, run_manager, **kw)

    client = FakeClient()
    script = looping(2)
    mw = SteeringMiddleware(client, model="m", model_factory=lambda _id: Flaky(script=script))  # type: ignore[arg-type]
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.01, jitter=False)
    agent = create_agent(Flaky(script=script), [run_tests], middleware=[retry, mw])
    assert ask(agent)["messages"][-1].content == "Done."
    assert client.kinds() == ["run_start", "step 1", "step 2", "run_finish"]


def test_a_stopped_thread_is_finished_and_its_next_turn_is_a_new_run() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    stopped = {"on": True}
    client = FakeClient(lambda k: stop(k) if stopped["on"] and k >= 1 else decision(k))
    script = looping(1)
    mw = SteeringMiddleware(client, model="m", model_factory=ScriptedModel.factory(script))  # type: ignore[arg-type]
    agent = create_agent(
        ScriptedModel(script=script), [run_tests], middleware=[mw], checkpointer=InMemorySaver()
    )
    cfg = {"configurable": {"thread_id": "t1"}}
    out = ask(agent, **cfg)
    assert out["messages"][-1].name == STOP_NAME
    assert mw.thread_run("t1") is None and client.outcome() == STOPPED_OUTCOME
    stopped["on"] = False
    ask(agent, **cfg)
    runs = [rid for kind, rid, _ in client.events if kind == "run_start"]
    assert len(runs) == 2 and runs[0] != runs[1] and mw.thread_run("t1") == runs[1]


def test_the_middleware_refuses_bad_run_options_at_construction() -> None:
    with pytest.raises(ValueError, match="monitors_off: unknown monitor"):
        SteeringMiddleware(FakeClient(), monitors_off=["nope"])  # type: ignore[arg-type]


# -- where the steering text goes -------------------------------------------------------------


INJECTION = "[REASONBLOCKS]\nYou ran `run_tests` 3 times with the same result: read the failure first."


def test_the_steering_text_follows_the_last_message_and_the_prompt_before_it_is_unchanged() -> None:
    client = FakeClient(
        lambda k: decision(k, inject=True, injection_text=INJECTION) if k == 2 else decision(k)
    )
    script = looping(3)
    agent, _ = agent_for(client, script)
    out = ask(agent)
    calls = [msgs for _, msgs in script.calls]
    steered = calls[2]  # decision 2 steers call 3
    assert isinstance(steered[-1], HumanMessage) and steered[-1].content == sent(INJECTION)
    assert isinstance(steered[-2], ToolMessage)  # after the tool result: the last user turn
    # the system prompt is the agent's own on every call, and no other call has the text
    assert all(isinstance(m[0], SystemMessage) and m[0].content == "Be careful." for m in calls)
    assert not any("[REASONBLOCKS]" in str(x.content) for i, m in enumerate(calls) if i != 2 for x in m)
    # call 3 up to its steering message is the start of call 4 (the provider's cached prefix)
    cached = [m.model_dump_json() for m in steered[:-1]]
    assert [m.model_dump_json() for m in calls[3][: len(cached)]] == cached
    assert not any("[REASONBLOCKS]" in str(m.content) for m in out["messages"])  # history untouched


def test_system_placement_puts_the_text_after_the_base_system_prompt() -> None:
    client = FakeClient(
        lambda k: decision(k, inject=True, injection_text=INJECTION) if k == 2 else decision(k)
    )
    script = looping(3)
    agent, _ = agent_for(client, script, placement="system")
    ask(agent)
    system = script.calls[2][1][0]
    assert isinstance(system, SystemMessage)
    assert system.content == [
        {"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": sent(INJECTION)},
    ]
    assert not isinstance(script.calls[2][1][-1], HumanMessage)


def test_an_unknown_placement_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="placement"):
        agent_for(FakeClient(), looping(1), placement="middle")
