"""Each framework adapter on a real client whose broker is not there (a port nothing listens
on), or whose environment holds an invalid RB_* value: the agent runs to its end, unsteered,
and nothing raises into it (issues 40 and 48). The client's
own outages (stopped, restarted, silent broker): tests/integration/test_client_fail_open.py."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streams.agent.client import SyncSteeringClient
from streams.kafka.client_settings import ClientSettings


@pytest.fixture(scope="module", params=["no broker", "an invalid RB_ value"])
def client(request: pytest.FixtureRequest) -> Iterator[SyncSteeringClient]:
    if request.param == "no broker":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens: every connection is refused
        c = SyncSteeringClient(ClientSettings.from_env({"RB_BROKER": f"kafka://127.0.0.1:{port}"}))
    else:  # issue 48: a bad setting in the agent's environment raised into the agent
        with pytest.MonkeyPatch.context() as env:
            env.setenv("RB_CLIENT_DEADLINE_MS", "25O")
            c = SyncSteeringClient()
        assert c.config_error is not None
    c.start()
    assert not c.healthy
    yield c
    t0 = time.monotonic()
    c.stop()
    assert time.monotonic() - t0 < 6.0


def langchain(client: SyncSteeringClient) -> Any:
    from tests.unit.agent.adapters.test_langchain_ladder import agent_for, ask, looping

    agent, _ = agent_for(client, looping(3))  # type: ignore[arg-type]
    return lambda: ask(agent)["messages"][-1].content


def openai_agents(client: SyncSteeringClient) -> Any:
    from streams.agent.adapters.openai_agents import AgentsSteering
    from tests.unit.agent.adapters.test_openai_agents import ScriptedProvider, coder, looping, run

    steering, agent, provider = AgentsSteering(client, model="gpt-4.1"), coder(), ScriptedProvider(looping(3))
    return lambda: run(steering, agent, provider).final_output


def claude_agent(client: SyncSteeringClient) -> Any:
    from streams.agent.adapters.claude_agent import ClaudeAgentSteering
    from tests.unit.agent.adapters.test_claude_agent import call, hook_inputs

    st = ClaudeAgentSteering(client, model="claude-sonnet-4-5")

    async def go() -> list[Any]:
        out = [await call(st.on_user_prompt_submit, hook_inputs("UserPromptSubmit")[0])]
        out += [await call(st.on_post_tool_use, h) for h in hook_inputs("PostToolUse")[:3]]
        out.append(await call(st.on_stop, hook_inputs("Stop")[0]))
        return out

    return lambda: asyncio.run(go())


def otel(client: SyncSteeringClient) -> Any:
    from streams.agent.adapters.otel import SteeringSpanProcessor
    from tests.unit.agent.adapters.test_otel import agent_run, tracer_with

    proc = SteeringSpanProcessor(client)
    tracer = tracer_with(proc)

    def go() -> Any:
        took = agent_run(tracer, 5)
        assert proc.force_flush(5_000)
        assert proc.errors == 0
        return sum(took)

    return go


# each builds its agent (imports and construction are not timed) and returns the run
ADAPTERS: dict[str, Callable[[SyncSteeringClient], Callable[[], Any]]] = {
    "SteeringMiddleware": langchain,
    "AgentsSteering": openai_agents,
    "ClaudeAgentSteering": claude_agent,
    "SteeringSpanProcessor": otel,
}


@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_an_adapter_with_no_broker_runs_the_agent_to_its_end_unsteered(
    client: SyncSteeringClient, adapter: str
) -> None:
    go = ADAPTERS[adapter](client)
    t0 = time.monotonic()
    result = go()
    took = time.monotonic() - t0
    print(f"\n{adapter} with no broker: {took * 1000:.0f} ms, result {str(result)[:60]!r}")
    assert result is not None
    assert took < 5.0  # no call waited for a broker
    assert not client.healthy
