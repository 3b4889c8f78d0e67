"""`AgentsSteering` on real OpenAI Agents SDK runs (real `Runner`, `Agent`s, hand-offs and
function tools; a scripted model provider), with decisions scripted (no broker, no worker):
what each step carries and what each decision does to the next model call."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, MaxTurnsExceeded, ModelResponse, RunConfig, RunHooks, Runner, Usage, function_tool
from agents.exceptions import AgentsException
from agents.run_config import CallModelData, ModelInputData
from agents.testing import assistant_message, function_call
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from examples.openai_scripted import ScriptedProvider, reply, say
from streams.agent.adapters.openai_agents import WIRING, AgentsSteering, RunStoppedBySteering, response_step
from streams.agent.compose import REASONBLOCKS_MARKER
from streams.agent.session import STOPPED_OUTCOME, RunStopped
from tests.unit.agent.fake_client import FakeClient, decision, sent, stop

FAILING = "FAILED tests/test_a.py::test_expiry - KeyError"
INJECTION = f"{REASONBLOCKS_MARKER}\nYou have run `run_tests` with the same input 3 times."


@function_tool
def run_tests(path: str) -> str:
    """Run the tests in `path`."""
    return FAILING


@function_tool
def lookup_invoice(invoice_id: str) -> str:
    """Look up an invoice."""
    return f"invoice {invoice_id}: paid twice"


@function_tool
def broken(path: str) -> str:
    """Always raises."""
    raise OSError("disk full")


def coder(**kw: Any) -> Agent[Any]:
    return Agent(name="Coder", instructions="Fix the bug.", tools=[run_tests, broken], model="gpt-4.1", **kw)


def two_agents() -> tuple[Agent[Any], Agent[Any]]:
    billing = Agent(name="Billing", instructions="Resolve billing.", tools=[lookup_invoice], model="gpt-4.1")
    return Agent(name="Triage", instructions="Route.", handoffs=[billing], model="gpt-4.1"), billing


def looping(n: int) -> list[dict[str, Any]]:
    return [reply(f"Run it again ({i}).", ("run_tests", {"path": "t"}), n=i) for i in range(n)] + [
        say("Done.", n=n)
    ]


def run(
    steering: AgentsSteering, agent: Agent[Any], provider: ScriptedProvider, task: str = "Fix it.", **kw: Any
) -> Any:
    return steering.run_sync(
        agent, task, run_config=RunConfig(model_provider=provider, tracing_disabled=True), **kw
    )


def steps(client: FakeClient) -> list[dict[str, Any]]:
    return [f for k, _, f in client.events if k == "step"]


# -- what a step carries ----------------------------------------------------------------------


def response(*output: Any, total: int = 0, inp: int = 0, out: int = 0) -> ModelResponse:
    usage = Usage(requests=1, input_tokens=inp, output_tokens=out, total_tokens=total)
    return ModelResponse(output=list(output), usage=usage, response_id="r")


def test_cached_input_of_the_sdks_usage_is_the_steps_cache_read() -> None:
    usage = Usage(
        requests=1,
        input_tokens=12_000,
        input_tokens_details=InputTokensDetails(cached_tokens=11_000, cache_write_tokens=500),
        output_tokens=150,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=12_150,
    )
    r = ModelResponse(output=[function_call("run", "{}", call_id="c1")], usage=usage, response_id="r")
    got = response_step(r)
    assert got["tokens"] == 12_150
    assert got["usage"] == {
        "input_tokens": 500,
        "cache_read_tokens": 11_000,
        "cache_write_tokens": 500,
        "output_tokens": 150,
        "estimated": False,
    }


def test_the_providers_raw_usage_wins_when_the_sdk_kept_it() -> None:
    """An Anthropic model behind LiteLLM: the raw payload has the cache writes."""
    raw = {
        "input_tokens": 40,
        "cache_creation_input_tokens": 9_000,
        "cache_read_input_tokens": 0,
        "output_tokens": 80,
    }
    usage = Usage(requests=1, input_tokens=9_040, output_tokens=80, total_tokens=9_120)
    r = ModelResponse(
        output=[function_call("run", "{}", call_id="c1")], usage=usage, response_id="r", raw_usage=raw
    )
    assert response_step(r)["usage"] == {
        "input_tokens": 40,
        "cache_read_tokens": 0,
        "cache_write_tokens": 9_000,
        "output_tokens": 80,
        "estimated": False,
    }


def test_a_response_is_its_text_its_tool_call_with_parsed_arguments_its_tokens_and_model() -> None:
    r = response(
        assistant_message("Read the module."),
        function_call("read_file", {"path": "a.py"}, call_id="c1"),
        total=512,
    )
    got = response_step(r, agent="Coder", model_id="gpt-4.1", results={"c1": ("def f(): ...", False)})
    assert got == {
        "thought": "Read the module.",
        "agent": "Coder",
        "action": "read_file",
        "action_input": {"path": "a.py"},
        "observation": "def f(): ...",
        "observation_is_error": False,
        "tokens": 512,
        "model_id": "gpt-4.1",
    }


def test_several_tool_calls_are_all_reported_in_order_and_any_error_marks_the_observation() -> None:
    r = response(
        function_call("read_file", {"path": "a.py"}, call_id="c1"),
        function_call("grep", '{"pattern": "TODO"}', call_id="c2"),
        inp=300,
        out=20,
    )
    got = response_step(r, results={"c2": ("boom", True), "c1": ("text", False), "other": ("x", False)})
    assert got["action"] == "read_file+grep"
    assert got["action_input"] == [
        {"name": "read_file", "args": {"path": "a.py"}},
        {"name": "grep", "args": {"pattern": "TODO"}},
    ]
    assert got["observation"] == "text\nboom" and got["observation_is_error"] is True
    assert got["tokens"] == 320  # input + output when the provider leaves total_tokens at 0
    assert got["usage"] == {
        "input_tokens": 300,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "output_tokens": 20,
        "estimated": False,
    }
    assert "agent" not in got and "model_id" not in got and "thought" not in got


def test_a_response_without_usage_sends_no_tokens_and_bad_json_arguments_are_kept_raw() -> None:
    got = response_step(response(function_call("run", "not json", call_id="c1")))
    assert got["action_input"] == {"arguments": "not json"} and "tokens" not in got and "usage" not in got
    assert "observation" not in got  # no result seen for the call


# -- steps of real runs -----------------------------------------------------------------------


def test_a_hand_off_run_names_each_agent_and_publishes_every_call_but_the_last() -> None:
    triage, billing = two_agents()
    provider = ScriptedProvider(
        [
            reply("Billing question.", ("transfer_to_billing", {}), n=0),
            reply("Look it up.", ("lookup_invoice", {"invoice_id": "42"}), n=1),
            say("Invoice 42 was paid twice; refund requested.", n=2),
        ]
    )
    client = FakeClient()
    result = run(
        AgentsSteering(client, model_routing={"FAST": "gpt-4.1-mini"}), triage, provider, "Invoice 42?"
    )  # type: ignore[arg-type]
    assert result.final_output.startswith("Invoice 42 was paid twice") and result.last_agent is billing
    assert client.kinds() == ["run_start", "step 1", "step 2", "run_finish"]
    start = client.events[0][2]
    assert start == {
        "model": "gpt-4.1",
        "model_routing": {"FAST": "gpt-4.1-mini"},
        "framework": "openai-agents",
        "task": "Invoice 42?",
    }
    first, second = steps(client)
    assert (first["agent"], first["action"], first["action_input"]) == ("Triage", "transfer_to_billing", {})
    assert first["observation"] == '{"assistant": "Billing"}'  # the hand-off's result, from the input
    assert (second["agent"], second["action"]) == ("Billing", "lookup_invoice")
    assert second["observation"] == "invoice 42: paid twice" and second["observation_is_error"] is False
    assert first["tokens"] == second["tokens"] == 340 and first["model_id"] == "gpt-4.1"
    assert client.outcome() == "success"


def test_a_single_agent_run_names_no_agent_unless_asked() -> None:
    client = FakeClient()
    run(AgentsSteering(client), coder(), ScriptedProvider(looping(1)))  # type: ignore[arg-type]
    assert "agent" not in steps(client)[0]
    named = FakeClient()
    run(AgentsSteering(named, agent_names=True), coder(), ScriptedProvider(looping(1)))  # type: ignore[arg-type]
    assert steps(named)[0]["agent"] == "Coder"


def test_a_tool_that_raised_is_an_error_observation() -> None:
    provider = ScriptedProvider([reply("Try it.", ("broken", {"path": "x"}), n=0), say("Gave up.", n=1)])
    client = FakeClient()
    run(AgentsSteering(client), coder(), provider)  # type: ignore[arg-type]
    (step,) = steps(client)
    assert step["observation_is_error"] is True and step["observation"].startswith("An error occurred")


def test_an_agent_given_a_model_object_reports_that_models_name() -> None:
    provider = ScriptedProvider(looping(1))
    agent = Agent(name="Coder", instructions="Fix.", tools=[run_tests], model=provider.get_model("my-model"))
    client = FakeClient(lambda k: decision(k, model="o3"))  # a Model object is not routed
    run(AgentsSteering(client), agent, provider)  # type: ignore[arg-type]
    assert client.events[0][2]["model"] == "my-model" and steps(client)[0]["model_id"] == "my-model"
    assert [c.model for c in provider.calls] == ["my-model", "my-model"]


# -- what a decision does to the next call ----------------------------------------------------


def test_a_decision_ends_the_next_calls_input_and_routes_the_next_call() -> None:
    provider = ScriptedProvider(looping(3))
    client = FakeClient(
        lambda k: decision(k, inject=True, injection_text=INJECTION, model="o3") if k == 2 else decision(k)
    )
    run(AgentsSteering(client, model_routing={"SLOW": "o3"}), coder(), provider)  # type: ignore[arg-type]
    calls = provider.calls
    assert [c.model for c in calls] == ["gpt-4.1", "gpt-4.1", "o3", "gpt-4.1"]
    # the instructions never change: the steering text is a trailing user message of call 3 only
    assert {c.call.system_instructions for c in calls} == {"Fix the bug."}
    steered = list(calls[2].call.input)
    assert steered[-1] == {"role": "user", "content": sent(INJECTION)}
    # the input before it is the SDK's own, in order, and it never enters the conversation:
    # call 4's input starts with call 3's input minus the steering message (the cached prefix)
    assert not any(REASONBLOCKS_MARKER in str(c.call.input) for i, c in enumerate(calls) if i != 2)
    assert [_dump(i) for i in calls[3].call.input][: len(steered) - 1] == [_dump(i) for i in steered[:-1]]
    assert steps(client)[2]["model_id"] == "o3"  # the step reports the model that served it


def test_system_placement_appends_to_the_instructions_and_leaves_the_input() -> None:
    provider = ScriptedProvider(looping(3))
    client = FakeClient(
        lambda k: decision(k, inject=True, injection_text=INJECTION) if k == 2 else decision(k)
    )
    run(AgentsSteering(client, placement="system"), coder(), provider)  # type: ignore[arg-type]
    calls = provider.calls
    assert calls[2].call.system_instructions == f"Fix the bug.\n\n{sent(INJECTION)}"
    assert {c.call.system_instructions for i, c in enumerate(calls) if i != 2} == {"Fix the bug."}
    assert not any(REASONBLOCKS_MARKER in str(c.call.input) for c in calls)


def test_an_unknown_placement_is_refused_when_the_steering_is_built() -> None:
    with pytest.raises(ValueError, match="placement"):
        AgentsSteering(FakeClient(), placement="middle")  # type: ignore[arg-type]


def _dump(item: Any) -> str:
    return json.dumps(item if isinstance(item, dict) else item.model_dump(exclude_none=True), sort_keys=True)


def test_a_late_decision_leaves_the_call_unsteered() -> None:
    provider = ScriptedProvider(looping(2))
    client = FakeClient(lambda k: None)
    run(AgentsSteering(client, model_routing={"SLOW": "o3"}), coder(), provider)  # type: ignore[arg-type]
    assert {(c.model, c.call.system_instructions) for c in provider.calls} == {("gpt-4.1", "Fix the bug.")}
    assert client.kinds() == ["run_start", "step 1", "step 2", "run_finish"]


def test_routed_models_come_from_the_model_factory_when_given_one() -> None:
    provider = ScriptedProvider(looping(1))
    other = ScriptedProvider([say("Done on the factory's model.", n=9)])
    made: list[str] = []

    def factory(model_id: str) -> Any:
        made.append(model_id)
        return other.get_model(model_id)

    client = FakeClient(lambda k: decision(k, model="claude-opus-4-5") if k == 1 else decision(k))
    result = run(AgentsSteering(client, model_factory=factory), coder(), provider)  # type: ignore[arg-type]
    assert result.final_output == "Done on the factory's model." and made == ["claude-opus-4-5"]
    assert [c.model for c in provider.calls] == ["gpt-4.1"] and [c.model for c in other.calls] == [
        "claude-opus-4-5"
    ]


def test_a_streamed_run_is_routed_when_the_call_is_made() -> None:
    """The streamed loop asks for the model before it filters the input: routing still follows
    the decision taken for that call."""
    provider = ScriptedProvider(looping(2))
    client = FakeClient(lambda k: decision(k, model="o3") if k == 1 else decision(k))
    steering = AgentsSteering(client)  # type: ignore[arg-type]

    async def scenario() -> Any:
        async with steering.arun() as steered:
            cfg = steered.run_config(RunConfig(model_provider=provider, tracing_disabled=True))
            result = Runner.run_streamed(coder(), "Fix it.", hooks=steered, run_config=cfg)
            async for _ in result.stream_events():
                pass
            return result

    assert asyncio.run(scenario()).final_output == "Done."
    assert [c.model for c in provider.calls] == ["gpt-4.1", "o3", "gpt-4.1"]
    assert all(c.call.streamed for c in provider.calls)
    assert client.kinds() == ["run_start", "step 1", "step 2", "run_finish"] and client.outcome() == "success"


# -- the end of a run -------------------------------------------------------------------------


def test_a_stop_raises_before_the_next_model_call_the_sdk_way() -> None:
    provider = ScriptedProvider(looping(6))
    client = FakeClient(lambda k: stop(k) if k >= 3 else decision(k))
    steering = AgentsSteering(client)  # type: ignore[arg-type]
    agent = coder()
    with pytest.raises(RunStoppedBySteering) as info:
        run(steering, agent, provider)
    err = info.value
    assert isinstance(err, RunStopped) and isinstance(err, AgentsException)
    assert (
        err.step == 3 and err.reason == "You were warned at step 2 and ran the same call again at steps 3, 4."
    )
    assert str(err) == f"run {steering.run_id} stopped by steering after step 3: {err.reason}"
    assert err.action_reason is not None and err.action_reason["monitor"] == "semantic_loop"
    assert err.run_data is not None and err.run_data.last_agent is agent  # the SDK's run data
    assert len(provider.calls) == 3  # decision 3 said stop: no fourth model call
    assert client.kinds() == ["run_start", "step 1", "step 2", "step 3", "run_finish"]
    assert client.outcome() == STOPPED_OUTCOME and steering.last_run is not None
    assert steering.last_run.stopped_by_steering


def test_a_failing_run_is_finished_with_the_exception_type() -> None:
    client = FakeClient()
    with pytest.raises(MaxTurnsExceeded):
        run(AgentsSteering(client), coder(), ScriptedProvider(looping(5)), max_turns=2)  # type: ignore[arg-type]
    assert client.outcome() == "failure: MaxTurnsExceeded"


def test_the_callers_hooks_and_input_filter_still_run() -> None:
    seen: list[str] = []

    class Hooks(RunHooks[Any]):
        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            seen.append(f"llm_end {agent.name}")

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: object) -> None:
            seen.append(f"tool_end {tool.name}")

    def trim(data: CallModelData[Any]) -> ModelInputData:
        """A context trimmer: only the user's messages go to the model."""
        kept = [i for i in data.model_data.input if isinstance(i, dict) and i.get("role") == "user"]
        return ModelInputData(input=kept, instructions="Trimmed.")

    provider = ScriptedProvider(looping(1))
    client = FakeClient(
        lambda k: decision(k, inject=True, injection_text=INJECTION) if k == 1 else decision(k)
    )
    cfg = RunConfig(model_provider=provider, tracing_disabled=True, call_model_input_filter=trim)
    AgentsSteering(client).run_sync(coder(), "Fix it.", hooks=Hooks(), run_config=cfg)  # type: ignore[arg-type]
    assert seen == ["llm_end Coder", "tool_end run_tests", "llm_end Coder"]
    # the caller's filter first, the steering message after what it returned
    assert [c.call.system_instructions for c in provider.calls] == ["Trimmed.", "Trimmed."]
    assert list(provider.calls[1].call.input)[-1] == {"role": "user", "content": sent(INJECTION)}
    # the tool's result left the model's input, yet the step has it (from on_tool_end)
    assert all(i.get("type") != "function_call_output" for i in provider.calls[1].call.input)
    assert steps(client)[0]["observation"] == FAILING


def test_org_and_project_come_from_the_run_context() -> None:
    client = FakeClient()
    steering = AgentsSteering(client, org_id="default-org")  # type: ignore[arg-type]
    run(steering, coder(), ScriptedProvider(looping(0)), context={"org_id": "acme", "project_id": "web"})
    assert client.events[0][2]["org_id"] == "acme" and client.events[0][2]["project_id"] == "web"


def test_bad_run_options_are_refused_when_the_steering_is_built() -> None:
    with pytest.raises(ValueError, match=r"escalation\.stop_after must be an integer >= 1 or null"):
        AgentsSteering(FakeClient(), escalation={"stop_after": 0})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="monitors_off: unknown monitor 'loop'"):
        AgentsSteering(FakeClient(), monitors_off=["loop"])  # type: ignore[arg-type]


def test_a_run_wired_with_only_its_hooks_or_only_its_config_says_what_is_missing() -> None:
    async def scenario(hooks: bool) -> None:
        client = FakeClient()
        provider = ScriptedProvider(looping(2))
        async with AgentsSteering(client).arun() as steered:  # type: ignore[arg-type]
            base = RunConfig(model_provider=provider, tracing_disabled=True)
            if hooks:
                await Runner.run(coder(), "Fix it.", hooks=steered, run_config=base)
            else:
                await Runner.run(coder(), "Fix it.", run_config=steered.run_config(base))

    for hooks in (True, False):
        with pytest.raises(RuntimeError) as info:
            asyncio.run(scenario(hooks))
        assert str(info.value) == WIRING
