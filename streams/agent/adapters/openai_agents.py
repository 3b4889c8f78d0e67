"""OpenAI Agents SDK (`openai-agents`): rb-streams steering for `Runner.run` in one call.

    from streams.agent.adapters.openai_agents import AgentsSteering
    steering = AgentsSteering(client, model_routing={"FAST": "gpt-4.1-mini", "SLOW": "o3"})
    result = await steering.run(triage, "My invoice is wrong")   # Runner.run, steered
    result = steering.run_sync(triage, "My invoice is wrong")    # Runner.run_sync's loop rules

Runs. Each `run()` is one rb-streams run, with its own `SteeredRun`: the run hooks and the
`RunConfig` of that `Runner.run` call, so concurrent runs of one agent never share state. For
`Runner.run_streamed` (or any call you make yourself) take the pieces from a block that
finishes the run: `async with steering.arun() as run: Runner.run_streamed(agent, input,
hooks=run, run_config=run.run_config(cfg))`. The run is finished `success` when the block (or
`run()`) returns, `failure: <ExceptionType>` when it raises (`failure: MaxTurnsExceeded`, ...).
The task is the input's first user message; `org_id`/`project_id` come from the run's context
object when it has them (else the constructor's).

Steps. The SDK calls `RunConfig`'s `call_model_input_filter` right before every model call. There,
before every call but the first, the previous call is published as a step (`on_llm_end` keeps
its `ModelResponse` and agent, `on_tool_end` its tool results): the response's text as
`thought`, its tool calls as `action`/`action_input` (several: names joined with "+", the list
of {"name", "args"}), the tool results as `observation` (a tool that raised, answered with the
SDK's error text, sets `observation_is_error`; a hand-off's result comes from the next call's
input), `tokens` from the response's `Usage`, `model_id` the model that served it, and `agent`
the SDK agent's name when the run is multi-agent (its starting agent has hand-offs, or
`agent_names=True`: every step then names its agent, so the worker knows which one leads). Its
decision is awaited within the client's deadline and steers this call: the `[REASONBLOCKS]`
text goes in as a trailing user message after the input items (`placement="end"`, the default:
the instructions and the items the provider cached are sent unchanged; the SDK does not keep
the message in the run's items, though a server-managed conversation, `conversation_id` or
`previous_response_id`, stores it as sent), and the routed model serves it. With
`placement="system"` it is appended to the instructions (`compose.plain_system`), which
changes the prompt before the whole input: the history's cache is lost (see COST.md). The
input items are never changed. The last response (the final output) is not
published: no call follows it.

Routing. `run_config()` wraps the run's `ModelProvider`: every model the SDK asks it for is a
`Model` that picks, when the call is made, the decision's model (`model_factory(id)`, else the
wrapped provider's `get_model(id)`) or the agent's own. The choice is made at call time because
the streamed loop asks for the model before it runs the input filter. An agent given a `Model`
object (not a name) bypasses providers in the SDK, so it keeps its model (it is still steered).

Escalation. `escalate` routes like any decision (its `model` is the stronger model). `stop` ends
the run before the next model call by raising `RunStoppedBySteering` from the input filter: a
`streams.RunStopped` (run_id, step, reason, action_reason; the message says why) that is also
the SDK's `AgentsException`, so it leaves `Runner.run` the way the SDK's own run-ending errors do
(`MaxTurnsExceeded`, guardrail tripwires), with the SDK's `run_data` (items so far, last
agent, usage) attached. It is the cleanest of the SDK's ways to end a run from outside
the model: a guardrail tripwire is one too, but input guardrails run only on the first turn,
output guardrails only on the final output and tool guardrails only around a tool, never right
before the Nth model call. The run is finished `failure: stopped_by_steering`. A hand-off hands
the run over for good, so the first step of the agent it went to says `"lead": true`: to the
worker that agent now leads the run (its ignored warnings can stop it, its final answer ends
the run), not a sub-agent that will report back.

The gate. The SDK refuses a function tool's call through the tool's input guardrails, so
the adapter adds `call_gate_guardrail` to the function tools of every agent it steers (to their
`tool_input_guardrails`, once, before the agent's model call; outside a steered run the
guardrail allows every call). It asks the run's session (`SteeringSession.check_call`, from the
newest decision's `taint` list; a late decision keeps the earlier taint in force) and rejects
a call whose arguments carry a value that only a tool output introduced, in a call the
decision marks as suspicious, with
`ToolGuardrailFunctionOutput.reject_content`: the tool does not run, and the model reads
"rb-streams steering: The call to ... was refused: ..." as the call's result and goes on.
`call_gate=False` (or `RB_CLIENT_CALL_GATE=false`) leaves the tools alone; `gate="strict"` (or
`RB_CLIENT_GATE_MODE=strict`) also rejects any value a tool output introduced in an acting
call; `denied_calls` counts the denials. Hosted tools (web search, computer use) are not
gated (the SDK runs no tool guardrails for them); an MCP server's tools are made per run, not
from `Agent.tools`: give the server `tool_input_guardrails=[call_gate_guardrail]` to gate them.

Needs the `openai-agents` extra (`pip install './[openai-agents]'` from a checkout, or the wheel
with `[openai-agents]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

try:
    from agents import Agent, Model, ModelProvider, ModelResponse, RunConfig, RunHooks, Runner, RunResult
    from agents.exceptions import AgentsException
    from agents.models import get_default_model
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool import FunctionTool, default_tool_error_function
    from agents.tool_context import ToolContext
    from agents.tool_guardrails import ToolGuardrailFunctionOutput, ToolInputGuardrail, ToolInputGuardrailData
except ImportError as exc:  # one line that says what to install, not a bare module name
    raise ImportError(
        "streams.agent.adapters.openai_agents needs the OpenAI Agents SDK (openai-agents): "
        f"pip install './[openai-agents]' from a checkout, or the wheel with [openai-agents] ({exc})"
    ) from exc

from .. import compose
from ..client import StepLogEntry, SyncSteeringClient
from ..gate import GateMode, check_gate_mode, denial_text, enabled_for
from ..session import (
    LastRun,
    RunStopped,
    Steering,
    SteeringSession,
    extra_names,
    failure_outcome,
    stop_reason,
)
from ..usage import from_agents_sdk
from ..usage import of as usage_of
from ..usage import total as usage_total
from ..validation import check_run_field_names, validate_run_fields

__all__ = ["AgentsSteering", "RunStoppedBySteering", "SteeredRun", "call_gate_guardrail", "response_step"]

# What the SDK answers the model with when a function tool raises (its default error function).
TOOL_ERROR = default_tool_error_function(None, Exception())  # type: ignore[arg-type]


WIRING = (
    "a SteeredRun needs both hooks=run and run_config=run.run_config(...) in the Runner call "
    "(the hooks see the responses, the config's input filter applies the decisions)"
)


UNWIRED = (
    "steering.arun(): nothing was steered, no Runner call in the block was given "
    "hooks=run and run_config=run.run_config(...)"
)


class RunStoppedBySteering(RunStopped, AgentsException):
    """The decision said `stop`: raised from the input filter before the next model call, so
    `Runner.run` raises it with the SDK's `run_data` attached (an `AgentsException`); catch it
    as `streams.RunStopped` like a `SteeringSession`'s stop."""


# -- reading the SDK's items ----------------------------------------------------------------


def _dict(item: Any) -> dict[str, Any]:
    """An input or output item as a plain dict (the SDK mixes pydantic models and dicts)."""
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        out = dump(exclude_none=True)
        return out if isinstance(out, dict) else {}
    return {}


def _text(content: Any) -> str:
    """The text of a message's content (a string, or content parts with `text`/`refusal`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_dict(p) for p in content]
        return "\n".join(str(p.get("text") or p.get("refusal") or "") for p in parts).strip()
    return "" if content is None else str(content)


def _output_text(output: Any) -> str:
    """A tool result as the text the model reads."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return _text(output)
    try:
        return json.dumps(output, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(output)


def _args(raw: Any) -> Any:
    """A function call's arguments: its JSON parsed, else the raw string."""
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"arguments": raw}
    return raw if raw is not None else {}


def _calls(output: list[Any]) -> list[tuple[str, str, Any]]:
    """(call_id, name, args) of every tool call in a response, in order: function and custom
    tools by name, hosted and built-in tools (`web_search_call`, `computer_call`, ...) by type."""
    calls = []
    for raw in output:
        item = _dict(raw)
        kind = str(item.get("type", ""))
        call_id = str(item.get("call_id") or item.get("id") or "")
        if kind == "function_call":
            calls.append((call_id, str(item.get("name", "")), _args(item.get("arguments"))))
        elif kind == "custom_tool_call":
            calls.append((call_id, str(item.get("name", "")), {"input": item.get("input")}))
        elif kind.endswith("_call"):
            action = item.get("action")
            calls.append((call_id, kind[: -len("_call")], action if isinstance(action, dict) else {}))
    return calls


def _outputs(items: list[Any]) -> dict[str, str]:
    """call_id -> result text of the tool outputs among input items (`*_call_output`)."""
    out: dict[str, str] = {}
    for raw in items:
        item = _dict(raw)
        if str(item.get("type", "")).endswith("_call_output") and item.get("call_id"):
            out[str(item["call_id"])] = _output_text(item.get("output"))
    return out


def _task(items: str | list[Any]) -> str | None:
    if isinstance(items, str):
        return items[:2000] or None
    for raw in items:
        item = _dict(raw)
        if item.get("role") == "user":
            return _text(item.get("content"))[:2000] or None
    return None


def _model_name(model: Any) -> str | None:
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)  # OpenAIResponsesModel, OpenAIChatCompletionsModel, ...
    return name if isinstance(name, str) else None


def response_step(
    response: ModelResponse,
    *,
    agent: str | None = None,
    model_id: str | None = None,
    results: Mapping[str, tuple[str, bool]] | None = None,
    handed_off_to: str | None = None,
) -> dict[str, Any]:
    """The step event fields of one model call: its response, and the results of its tool
    calls by call id (text, raised?) from hooks or from the next call's input."""
    fields: dict[str, Any] = {}
    thought = "\n".join(
        _text(_dict(o).get("content")) for o in response.output if _dict(o).get("type") == "message"
    ).strip()
    if thought:
        fields["thought"] = thought
    if agent:
        fields["agent"] = agent[:256]
    calls = _calls(list(response.output))
    if len(calls) == 1:
        fields["action"], fields["action_input"] = calls[0][1][:1024], calls[0][2]
    elif calls:
        fields["action"] = "+".join(name for _, name, _ in calls)[:1024]
        fields["action_input"] = [{"name": name, "args": args} for _, name, args in calls]
    got = [results[cid] for cid, _, _ in calls if results and cid in results]
    if got:
        fields["observation"] = "\n".join(text for text, _ in got)
        fields["observation_is_error"] = any(err for _, err in got)
    elif calls and handed_off_to:
        fields["observation"] = f"handed off to {handed_off_to}"
    usage = response.usage
    tokens = usage.total_tokens or (usage.input_tokens + usage.output_tokens)
    if tokens > 0:
        fields["tokens"] = int(tokens)
    # the provider's own payload when the SDK kept it (an Anthropic model behind LiteLLM reports
    # its cache writes there), else the SDK's Usage (input_tokens_details.cached_tokens)
    wire = usage_of(getattr(response, "raw_usage", None)) or from_agents_sdk(usage)
    if wire is not None and usage_total(wire) > 0:  # the SDK's zeros are "not reported"
        fields["usage"] = wire
    if model_id:
        fields["model_id"] = model_id[:256]
    return fields


# -- one run ----------------------------------------------------------------------------------


class SteeredRun(RunHooks[Any]):
    """One steered `Runner.run` call: its run hooks (pass as `hooks=`) and its `RunConfig`
    (`run_config(base)`); made by `AgentsSteering.arun()`/`run()`. See the module docstring."""

    def __init__(self, owner: AgentsSteering, hooks: RunHooks[Any] | None = None) -> None:
        self._owner = owner
        self._hooks = hooks  # the caller's own run hooks, called after ours
        self.run_id = f"{owner.run_id_prefix}-{uuid.uuid4().hex[:12]}"
        self.session: SteeringSession | None = None  # made at the first model call
        self._names: bool = False  # steps name their agent
        self._steer: Steering | None = None  # the steering of the call in progress
        self._response: tuple[str, ModelResponse, str | None] | None = None  # agent, response, model
        self._results: dict[str, tuple[str, bool]] = {}  # tool results since that response
        self._handoff: str | None = None
        self._took_over: str | None = None  # handed the run to, until its first step says `lead`
        self._serving: str | None = None  # the model name of the call being made
        self._provider: ModelProvider | None = None
        self._owned: ModelProvider | None = None  # a provider this run made, closed at its end
        self._models: dict[str, Model] = {}
        self._user_filter: Callable[[CallModelData[Any]], Any] | None = None
        self._llm_started = False  # the hooks saw a model call (they are wired in)

    # -- wiring ---------------------------------------------------------------------------------
    def run_config(self, base: RunConfig | Mapping[str, Any] | None = None) -> RunConfig:
        """`base` (default `RunConfig()`) with this run's input filter (after base's own) and
        its routing around base's model provider."""
        if self._provider is not None:
            raise RuntimeError("run_config() of a SteeredRun is made once: one run, one Runner call")
        if isinstance(base, Mapping):
            cfg, owned = RunConfig(**base), "model_provider" not in base
        else:
            cfg, owned = (base or RunConfig()), base is None
        self._provider = cfg.model_provider
        self._owned = cfg.model_provider if owned else None
        self._user_filter = cfg.call_model_input_filter
        return dataclasses.replace(
            cfg, call_model_input_filter=self._filter, model_provider=_RoutingProvider(self)
        )

    @property
    def step_log(self) -> list[StepLogEntry]:
        return self.session.step_log if self.session else []

    @property
    def stopped_by_steering(self) -> bool:
        return self.session is not None and self.session.stopped_by_steering

    async def afinish(self, outcome: str = "success") -> None:
        """run_finish (once; a stopped run's outcome is `failure: stopped_by_steering`)."""
        if self.session is not None:
            await self.session.afinish(outcome)
        owned, self._owned = self._owned, None
        if owned is not None:
            await owned.aclose()

    # -- the model call ---------------------------------------------------------------------------
    async def _filter(self, data: CallModelData[Any]) -> ModelInputData:
        if self._owner.gate_on():
            guard(data.agent)
        if self._user_filter is not None:
            got = self._user_filter(data)
            data = dataclasses.replace(data, model_data=await got if inspect.isawaitable(got) else got)
        steer = await self._steering(data)
        if steer.action == "stop":
            d = steer.decision
            raise RunStoppedBySteering(
                self.run_id, d.step if d is not None else steer.step, stop_reason(d), steer.action_reason
            )
        base = data.model_data.instructions
        injection = compose.injection_of(steer.decision)
        # a tool output's copy of our channel is made inert, the same way on every call (an
        # item that holds none is the very same object)
        given = _defused(data.model_data.input)
        if injection is None:
            return ModelInputData(input=given, instructions=base)
        if self._owner.placement == "end":
            # a trailing user message: the instructions and the input items the provider cached
            # are sent as they are (the same item objects, which the SDK tracks)
            items = [*given, {"role": compose.END_ROLE, "content": injection}]
            return ModelInputData(input=items, instructions=base)
        return ModelInputData(input=given, instructions=compose.plain_system(base or "", steer.decision))

    async def _steering(self, data: CallModelData[Any]) -> Steering:
        """This call's steering: decision 0 for the first call; else the decision to the step
        just published (the previous call); or, when the previous call never answered (the run
        loop is calling again), the steering it had, without publishing anything."""
        if self.session is None:
            self.session = self._open(data)
            await self.session.astart()
        elif not self._llm_started:
            raise RuntimeError(WIRING)
        elif self._response is not None:
            agent, response, model = self._response
            step = response_step(
                response,
                agent=agent if self._names else None,
                model_id=model,
                results={**self._from_input(data, response), **self._results},
                handed_off_to=self._handoff,
            )
            if self._handoff:
                self._took_over = self._handoff
            self._response, self._results, self._handoff = None, {}, None
            if self._names and self._took_over is not None and step.get("agent") == self._took_over[:256]:
                # a hand-off hands the run over for good: the worker's lead is now this agent
                step["lead"] = True
                self._took_over = None
            await self.session.aend_step(**step)
        elif self._steer is not None:
            return self._steer
        self._steer = self.session.begin_step()
        return self._steer

    def _open(self, data: CallModelData[Any]) -> SteeringSession:
        o = self._owner
        agent = data.agent
        self._names = o.agent_names if o.agent_names is not None else bool(agent.handoffs)
        fields: dict[str, Any] = {"model_routing": o.model_routing, "framework": "openai-agents"}
        fields.update(o.run_fields)
        ctx = data.context
        for name in ("org_id", "project_id"):
            v = ctx.get(name) if isinstance(ctx, Mapping) else getattr(ctx, name, None)
            if v:
                fields[name] = str(v)
        fields.setdefault("task", _task(data.model_data.input))
        model = o.model or _model_name(agent.model) or get_default_model()
        return SteeringSession(
            o.client,
            self.run_id,
            model=model,
            on_stop="return",
            call_gate=o.call_gate,
            gate=o.gate,
            **fields,
        )

    @staticmethod
    def _from_input(data: CallModelData[Any], response: ModelResponse) -> dict[str, tuple[str, bool]]:
        """Results the hooks did not see (hand-offs, hosted tools), from this call's input."""
        ids = {cid for cid, _, _ in _calls(list(response.output))}
        return {
            cid: (text, text.startswith(TOOL_ERROR))
            for cid, text in _outputs(list(data.model_data.input)).items()
            if cid in ids
        }

    def _model(self, name: str | None) -> tuple[str, Model]:
        """The model a call asking for `name` goes to: the decision's, else `name`'s."""
        routed = compose.model_of(self._steer.decision) if self._steer is not None else None
        want = routed or name
        key = want or ""
        model = self._models.get(key)
        if model is None:
            o = self._owner
            if routed and o.model_factory is not None:
                model = o.model_factory(routed)
            else:
                assert self._provider is not None
                model = self._provider.get_model(want)
            self._models[key] = model
        return want or get_default_model(), model

    # -- hooks --------------------------------------------------------------------------------
    async def on_llm_start(
        self, context: Any, agent: Agent[Any], system_prompt: Any, input_items: Any
    ) -> None:
        if self._provider is None:
            raise RuntimeError(WIRING)
        self._llm_started = True
        if self._hooks is not None:
            await self._hooks.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Agent[Any], response: ModelResponse) -> None:
        model, self._serving = self._serving, None
        self._response = (agent.name, response, model or _model_name(agent.model))
        self._results, self._handoff = {}, None
        if self._hooks is not None:
            await self._hooks.on_llm_end(context, agent, response)

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        if self._hooks is not None:
            await self._hooks.on_tool_start(context, agent, tool)

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: object) -> None:
        if isinstance(context, ToolContext):
            text = _output_text(result)
            self._results[context.tool_call_id] = (text, text.startswith(TOOL_ERROR))
        if self._hooks is not None:
            await self._hooks.on_tool_end(context, agent, tool, result)

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        self._handoff = str(getattr(to_agent, "name", "") or "") or None
        if self._hooks is not None:
            await self._hooks.on_handoff(context, from_agent, to_agent)

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        if self._hooks is not None:
            await self._hooks.on_agent_start(context, agent)

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        if self._hooks is not None:
            await self._hooks.on_agent_end(context, agent, output)


# -- the pre-call gate ------------------------------------------------------------------------


def _steered_run(context: Any) -> SteeredRun | None:
    """The steered run a tool call belongs to: its ToolContext's run config holds that run's
    routing provider (None outside a steered run)."""
    provider = getattr(getattr(context, "run_config", None), "model_provider", None)
    return provider._run if isinstance(provider, _RoutingProvider) else None


async def _gate_tool_call(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    """Allow the call, or reject it with the gate's reason (the tool does not run; the model
    reads the reason as its result). Fails open: not a steered run, no session yet, no
    decision, a late one."""
    run = _steered_run(data.context)
    session = run.session if run is not None else None
    if run is None or session is None or session.finished:
        return ToolGuardrailFunctionOutput.allow()
    ctx = data.context
    tool = str(getattr(ctx, "tool_name", "") or "")
    verdict = session.check_call(tool, _args(getattr(ctx, "tool_arguments", None)))
    if verdict.allow:
        return ToolGuardrailFunctionOutput.allow()
    run._owner.denied_calls += 1
    info = {"rb_streams": "call_gate", "source_step": verdict.source_step, "hashes": list(verdict.hashes)}
    return ToolGuardrailFunctionOutput.reject_content(denial_text(verdict, tool), output_info=info)


call_gate_guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(
    guardrail_function=_gate_tool_call, name="rb_streams_call_gate"
)


def guard(agent: Any) -> None:
    """Add `call_gate_guardrail` to the agent's function tools that lack it (in place, once:
    the SDK reads a tool's guardrails from the tool object)."""
    for tool in getattr(agent, "tools", None) or []:
        if not isinstance(tool, FunctionTool):
            continue
        have = tool.tool_input_guardrails
        if have is None:
            tool.tool_input_guardrails = [call_gate_guardrail]
        elif call_gate_guardrail not in have:
            have.append(call_gate_guardrail)


class _RoutingProvider(ModelProvider):
    """The run's model provider: every model it gives is routed when it is called."""

    def __init__(self, run: SteeredRun) -> None:
        self._run = run

    def get_model(self, model_name: str | None) -> Model:
        return _RoutedModel(self._run, model_name)


class _RoutedModel(Model):
    """`name`'s model, or the one the current decision routes to, chosen at call time."""

    def __init__(self, run: SteeredRun, name: str | None) -> None:
        self._run = run
        self._name = name

    def _serve(self) -> Model:
        used, model = self._run._model(self._name)
        self._run._serving = used
        return model

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return await self._serve().get_response(*args, **kwargs)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return self._serve().stream_response(*args, **kwargs)

    def get_retry_advice(self, request: Any) -> Any:
        return self._run._model(self._name)[1].get_retry_advice(request)

    async def _cleanup_on_run_end(self, owner: object) -> None:
        for model in list(self._run._models.values()):
            await model._cleanup_on_run_end(owner)

    async def close(self) -> None:
        for model in list(self._run._models.values()):
            await model.close()

    def __getattr__(self, name: str) -> Any:
        """Anything else the SDK asks a model (e.g. whether it takes a prompt cache key) is
        answered by the model the call goes to."""
        if name.startswith("__") or name in ("_run", "_name"):
            raise AttributeError(name)
        return getattr(self._run._model(self._name)[1], name)


# -- the entry point ----------------------------------------------------------------------------


OPTIONS = (
    "model",
    "model_routing",
    "model_factory",
    "agent_names",
    "run_id_prefix",
    "placement",
    "call_gate",
    "gate",
)


class AgentsSteering(LastRun):
    """rb-streams steering for OpenAI Agents SDK runs; see the module docstring.

    `model`: the run's default model id (default: the starting agent's, else the SDK's);
    `model_routing`: FSM state -> model id; `model_factory`: model id -> `Model` for routed
    calls (default: the run's model provider); `agent_names`: name the agent on every step
    (default: when the starting agent has hand-offs); `placement`: where the steering text
    goes, "end" (a trailing user message, keeps the prompt cache) or "system"; `call_gate`: the
    pre-call gate on or off (default the client's, `RB_CLIENT_CALL_GATE`, on); `gate`: its mode,
    "lenient" or "strict" (default the client's, `RB_CLIENT_GATE_MODE`); other keywords are
    run fields (`org_id`, `escalation`, `monitors_off`, ...), checked here."""

    def __init__(
        self,
        client: SyncSteeringClient,
        *,
        model: str | None = None,
        model_routing: dict[str, str] | None = None,
        model_factory: Callable[[str], Model] | None = None,
        agent_names: bool | None = None,
        run_id_prefix: str = "oai",
        placement: compose.Placement = "end",
        call_gate: bool | None = None,
        gate: GateMode | None = None,
        **run_fields: Any,
    ) -> None:
        check_run_field_names("AgentsSteering", run_fields, OPTIONS)
        validate_run_fields(run_fields, extra_names(client))
        self.client = client
        self.model = model
        self.model_routing = model_routing
        self.model_factory = model_factory
        self.agent_names = agent_names
        self.run_id_prefix = run_id_prefix
        self.placement = compose.check_placement(placement)
        self.call_gate = call_gate  # None: the client's setting (RB_CLIENT_CALL_GATE)
        self.gate = check_gate_mode(gate)  # None: the client's mode (RB_CLIENT_GATE_MODE)
        self.denied_calls = 0  # tool calls the gate rejected, over every run
        self.run_fields = run_fields
        self._last: SteeredRun | None = None

    def gate_on(self) -> bool:
        """The pre-call gate is on for this adapter's runs."""
        return enabled_for(self.client, self.call_gate)

    @property
    def last_run(self) -> SteeredRun | None:
        """The run started last (sequential use, tests)."""
        return self._last

    def _last_session(self) -> SteeringSession | None:
        return self._last.session if self._last else None

    @contextlib.asynccontextmanager
    async def arun(self, hooks: RunHooks[Any] | None = None) -> AsyncIterator[SteeredRun]:
        """A run for a `Runner` call made in the block (`hooks=run, run_config=run.run_config()`),
        finished when the block ends: `failure: <Type>` if it raises."""
        run = self._last = SteeredRun(self, hooks)
        try:
            yield run
        except BaseException as exc:
            await run.afinish(failure_outcome(type(exc)))
            raise
        await run.afinish("success")
        if run._provider is None:  # the block's Runner call was not given the run: not steered
            warnings.warn(UNWIRED, RuntimeWarning, stacklevel=3)

    async def run(
        self,
        starting_agent: Agent[Any],
        input: Any,
        *,
        hooks: RunHooks[Any] | None = None,
        run_config: RunConfig | Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> RunResult:
        """`Runner.run(starting_agent, input, ...)` as one steered run (`hooks`: yours, called
        after the run's; `run_config`: yours, steering added)."""
        async with self.arun(hooks) as run:
            return await Runner.run(
                starting_agent, input, hooks=run, run_config=run.run_config(run_config), **kwargs
            )

    def run_sync(self, starting_agent: Agent[Any], input: Any, **kwargs: Any) -> RunResult:
        """`run()` on this thread's default event loop, as `Runner.run_sync` does (so loop-bound
        helpers made earlier, e.g. SDK sessions, still work); not inside a running loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "run_sync() cannot be called when an event loop is already running; await run()"
            )
        policy = asyncio.get_event_loop_policy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                loop = policy.get_event_loop()
            except RuntimeError:
                loop = policy.new_event_loop()
                policy.set_event_loop(loop)
        if loop.is_closed():
            loop = policy.new_event_loop()
            policy.set_event_loop(loop)
        return loop.run_until_complete(self.run(starting_agent, input, **kwargs))


def _defused(items: Any) -> Any:
    """The input items with every `function_call_output`'s copy of our channel made inert
    (`compose.defused_content`): the same list when none holds one."""
    out = list(items)
    changed = False
    for i, item in enumerate(out):
        if isinstance(item, Mapping) and item.get("type") == "function_call_output" and "output" in item:
            new = compose.defused_content(item["output"])
            if new is not item["output"]:
                out[i] = {**item, "output": new}
                changed = True
    return out if changed else items
