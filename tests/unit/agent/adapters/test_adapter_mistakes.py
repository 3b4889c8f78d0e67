"""A new user's mistakes with the framework adapters, each met by one line that says what to do:
a missing extra, a misspelt option, a client never started (or already stopped), a Runner call
or a Claude session not wired to the steering. Real frameworks, scripted models, no broker."""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from streams.agent.client import NOT_STARTED, SyncSteeringClient
from streams.agent.validation import RUN_FIELDS
from streams.kafka.client_settings import ClientSettings
from tests.unit.agent.fake_client import FakeClient

SCHEMA = Path(__file__).parents[4] / "streams" / "schemas" / "run_start.schema.json"

# (adapter module, the framework module it needs, the extra that installs it)
ADAPTERS = [
    ("streams.agent.adapters.openai_agents", "agents", "openai-agents"),
    ("streams.agent.adapters.claude_agent", "claude_agent_sdk", "claude-agent-sdk"),
    ("streams.agent.adapters.otel", "opentelemetry", "otel"),
    ("streams.agent.adapters.otel", "openinference", "otel"),
    ("streams.agent.adapters.langchain_middleware", "langchain", "langchain"),
]


@pytest.mark.parametrize(("adapter", "framework", "extra"), ADAPTERS)
def test_an_adapter_without_its_framework_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, adapter: str, framework: str, extra: str
) -> None:
    for name in {framework, *(m for m in sys.modules if m.startswith(framework + "."))}:
        monkeypatch.setitem(sys.modules, name, None)  # None: "not installed" to the import system
    monkeypatch.delitem(sys.modules, adapter, raising=False)
    with pytest.raises(ImportError) as err:
        importlib.import_module(adapter)
    assert f"pip install './[{extra}]' from a checkout, or the wheel with [{extra}]" in str(err.value)
    assert "\n" not in str(err.value)


def test_run_fields_are_the_run_start_schema_properties_but_the_envelope() -> None:
    props = set(json.loads(SCHEMA.read_text())["properties"])
    assert set(RUN_FIELDS) == props - {"type", "schema_version", "run_id", "ts"}


def adapters(client: Any) -> dict[str, Any]:
    from streams.agent.adapters.claude_agent import ClaudeAgentSteering
    from streams.agent.adapters.langchain_middleware import SteeringMiddleware
    from streams.agent.adapters.openai_agents import AgentsSteering
    from streams.agent.adapters.otel import SteeringSpanProcessor

    return {
        "AgentsSteering": lambda **kw: AgentsSteering(client, **kw),
        "ClaudeAgentSteering": lambda **kw: ClaudeAgentSteering(client, **kw),
        "SteeringSpanProcessor": lambda **kw: SteeringSpanProcessor(client, **kw),
        "SteeringMiddleware": lambda **kw: SteeringMiddleware(client, **kw),
    }


@pytest.mark.parametrize(
    ("adapter", "typo", "meant"),
    [
        ("AgentsSteering", "modle_routing", "model_routing"),
        ("AgentsSteering", "agent_name", None),  # a run field: accepted
        ("ClaudeAgentSteering", "hook_timeout", "hook_timeout_s"),
        ("SteeringSpanProcessor", "on_descision", "on_decision"),
        ("SteeringSpanProcessor", "escalations", "escalation"),
        ("SteeringMiddleware", "thread_idle", "thread_idle_s"),
    ],
)
def test_a_misspelt_option_is_a_type_error_not_a_silently_ignored_run_field(
    adapter: str, typo: str, meant: str | None
) -> None:
    make = adapters(FakeClient())[adapter]
    if meant is None:
        make(**{typo: "lead"})
        return
    with pytest.raises(
        TypeError,
        match=rf"{adapter}\(\) got an unexpected keyword argument '{typo}'; did you mean '{meant}'\?",
    ):
        make(**{typo: None})


@pytest.mark.parametrize(
    "adapter", ["AgentsSteering", "ClaudeAgentSteering", "SteeringSpanProcessor", "SteeringMiddleware"]
)
def test_the_adapters_accept_the_scorer_names_the_client_was_told_the_workers_have(adapter: str) -> None:
    client = FakeClient()
    with pytest.raises(ValueError, match="unknown scorer 'my_scorer'"):
        adapters(client)[adapter](scorer="my_scorer")
    client.extra_names = ("my_scorer",)  # type: ignore[attr-defined]  # RB_CLIENT_EXTRA_NAMES
    adapters(client)[adapter](scorer="my_scorer")


@pytest.mark.parametrize(
    "adapter", ["AgentsSteering", "ClaudeAgentSteering", "SteeringSpanProcessor", "SteeringMiddleware"]
)
@pytest.mark.parametrize(
    ("field", "value"), [("token_budget", "x"), ("org_id", 5), ("e_traces_enabled", "yes")]
)
def test_the_adapters_refuse_a_run_field_of_the_wrong_type_at_construction(
    adapter: str, field: str, value: object
) -> None:
    with pytest.raises(ValueError, match=rf"invalid run_start: data\.{field} must be"):
        adapters(FakeClient())[adapter](**{field: value})


def test_start_run_refuses_a_misspelt_run_field_with_a_suggestion() -> None:
    from streams.agent.client import SteeringClient

    c = SteeringClient(ClientSettings.from_env({}))
    with pytest.raises(TypeError, match="'escalaton'; did you mean 'escalation'"):
        asyncio.run(c.start_run("r", escalaton={"stop_after": 2}))
    assert "r" not in c._runs


def test_start_run_takes_the_envelope_time_but_refuses_one_that_is_not_a_number() -> None:
    """`ts` backfills a run's start time (replays compare on it): not a run field, not a typo."""
    from streams.agent.client import NOT_STARTED, SteeringClient

    c = SteeringClient(ClientSettings.from_env({}))
    with pytest.raises(RuntimeError, match=re.escape(NOT_STARTED)):  # past the field checks
        asyncio.run(c.start_run("r", ts=1767225600.0))
    with pytest.raises(ValueError, match="ts must be a number"):
        asyncio.run(c.start_run("r", ts="yesterday"))


@pytest.mark.timeout(30)  # the bug this guards against: a stopped client's call waited for ever
def test_a_client_not_started_or_already_stopped_says_so_instead_of_failing_or_hanging() -> None:
    from streams.agent.session import SteeringSession

    client = SyncSteeringClient(ClientSettings.from_env({}))
    with pytest.raises(RuntimeError) as err:
        SteeringSession(client, model="m").start()
    assert str(err.value) == NOT_STARTED
    client.stop()
    client.stop()  # twice: nothing to do
    with pytest.raises(RuntimeError, match="is stopped"):
        SteeringSession(client, model="m").start()


def test_an_arun_block_whose_runner_call_is_not_wired_warns_that_nothing_was_steered() -> None:
    from agents import Agent, RunConfig, Runner

    from examples.openai_scripted import ScriptedProvider, say
    from streams.agent.adapters.openai_agents import AgentsSteering

    client = FakeClient()
    steering = AgentsSteering(client)
    agent = Agent(name="A", instructions="Answer.", model="gpt-4.1")
    cfg = RunConfig(model_provider=ScriptedProvider([say("Done.")]), tracing_disabled=True)

    async def unwired() -> Any:
        async with steering.arun():
            return await Runner.run(agent, "Hi.", run_config=cfg)  # no hooks=run, no run.run_config

    with pytest.warns(RuntimeWarning, match="nothing was steered"):
        assert asyncio.run(unwired()).final_output == "Done."
    assert client.events == []


def test_watching_a_claude_session_without_the_hooks_warns_that_it_was_not_steered() -> None:
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage

    from examples.scripted_cli import ScriptedCLI, load
    from streams.agent.adapters.claude_agent import ClaudeAgentSteering

    client = FakeClient()
    steering = ClaudeAgentSteering(client)  # type: ignore[arg-type]

    async def unhooked() -> list[Any]:
        cli = ScriptedCLI(load("fix_session")["frames"])
        async with steering.arun(), ClaudeSDKClient(ClaudeAgentOptions(), transport=cli) as sdk:
            await sdk.query("fix it")
            return [m async for m in steering.watch(sdk.receive_response())]

    with pytest.warns(RuntimeWarning, match=r"hooks=steering\.hooks\(\)"):
        messages = asyncio.run(unhooked())
    assert isinstance(messages[-1], ResultMessage) and client.events == []
