"""Claude Agent SDK hooks: rb-streams steering for a `query()` / `ClaudeSDKClient` agent.

    from claude_agent_sdk import ClaudeAgentOptions, query
    from streams.agent.adapters.claude_agent import ClaudeAgentSteering
    steering = ClaudeAgentSteering(client, model="claude-sonnet-4-5")
    options = ClaudeAgentOptions(hooks=steering.hooks(), ...)
    async with steering.arun():
        async for message in steering.watch(query(prompt=task, options=options)):
            ...

The agent loop runs in the Claude Code CLI; the SDK calls these hooks in this process, so the
hooks are where a run's events go out and its decisions come back.

Runs. One SDK session (`session_id` of the hook inputs) is one run, started by the
`UserPromptSubmit` hook (its prompt is the task; decision 0's injection, if any, goes back as
that hook's `additionalContext`) or, if that hook never ran, by the session's first tool hook.
The `Stop` hook (Claude finished answering) finishes it as `success`, or what
`mark_failure` set; with `end_on_stop=False` a session's run goes on across the turns of a
`ClaudeSDKClient` conversation until `aend_session(session_id)` or the `arun()` block ends.
A `ResultMessage` seen by `watch()` that says the query failed (`error_max_turns`,
`error_during_execution`, ...) finishes the run as `failure: <subtype>` if nothing else had.

Steps. Every tool call is one step, published by its `PostToolUse` (or `PostToolUseFailure`)
hook: `action` the tool name, `action_input` its input, `observation` its response (for a
failure: the error, with `observation_is_error`), `agent` the sub-agent it ran in (hook
inputs carry `agent_id`/`agent_type` inside a Task sub-agent). The hook waits for the step's
decision (within the client's deadline) and returns its `[REASONBLOCKS]` injection as
`hookSpecificOutput.additionalContext`, which Claude Code hands to the model with the tool
result: the next model call is the one it steers. Parallel tool calls of one model turn are
published one after another (the hooks of a run take turns). What hooks do not carry, the
assistant's text (`thought`), the model that answered (`model_id`, `served_model`) and its
token usage (`tokens`, and `usage` with the message's cache reads and writes, once per model
call), comes from the SDK's message stream when it goes through `watch()` (or `observe()`),
matched to the step by `tool_use_id`.

Escalation. A decision that says `stop` ends the session the SDK's way: the hook returns
`{"continue_": False, "stopReason": "Run stopped by rb-streams steering: <why>"}` (Claude
stops; the reason is shown), and the run is finished at once as `failure: stopped_by_steering`.
Any later tool hook of the session (parallel calls, sub-agents) answers the same, and
`PreToolUse` denies further tool calls with that reason. A routed or escalation `model` cannot
be applied by a hook: Claude Code picks the model of a call before any hook runs. With
`set_model=` (e.g. `ClaudeSDKClient.set_model`, streaming mode only) the adapter asks Claude
Code to switch when a decision routes to another model, without holding the hook up; the
switch applies from the next model request Claude Code starts after it handled the request
(the call the hook's tool result goes to, or the one after: Claude Code decides).

Copies of our channel. A tool's output that holds the `[REASONBLOCKS]` marker or our `<rule>`
/ `<guidance>` tags gets them made inert (`compose.defused_value`) and handed back as the
`PostToolUse` hook's `updatedToolOutput`, in the tool's own shape. Claude Code keeps the
original output when it rejects that shape, and a failed call's error cannot be replaced:
there the real block's run tag (`compose.run_tag`) is what tells it apart from a copy.

The gate. `PreToolUse` also asks the run's session whether the call may run
(`SteeringSession.check_call`, from the newest decision's `taint` list; a late decision
keeps the earlier taint in force): a call whose
arguments carry a value that only a tool output introduced, in a call the decision marks as
suspicious, is denied (`permissionDecision: "deny"`) with a reason Claude reads
(`permissionDecisionReason`: "rb-streams steering: The call to ... was refused: ..."), so it
can go on with the user's task; the tool does not run, so the call is no step. `call_gate=False`
(or `RB_CLIENT_CALL_GATE=false`) turns it off; `gate="strict"` (or `RB_CLIENT_GATE_MODE=strict`)
also denies any value a tool output introduced in an acting call; `denied_calls` counts the
denials.

Needs the `claude-agent-sdk` extra (`pip install './[claude-agent-sdk]'` from a checkout, or the
wheel with `[claude-agent-sdk]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid
import warnings
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeGuard, cast

try:
    from claude_agent_sdk import (
        AssistantMessage,
        HookCallback,
        HookContext,
        HookInput,
        HookJSONOutput,
        HookMatcher,
        ResultMessage,
        TextBlock,
        ToolUseBlock,
    )
    from claude_agent_sdk.types import HookEvent, SyncHookJSONOutput
except ImportError as exc:  # one line that says what to install, not a bare module name
    raise ImportError(
        "streams.agent.adapters.claude_agent needs the Claude Agent SDK: "
        f"pip install './[claude-agent-sdk]' from a checkout, or the wheel with [claude-agent-sdk] ({exc})"
    ) from exc

from .. import compose
from ..client import SyncSteeringClient
from ..gate import GateMode, check_gate_mode, denial_text
from ..session import LastRun, Steering, SteeringSession, extra_names, failure_outcome
from ..usage import from_anthropic as usage_of
from ..validation import check_run_field_names, validate_run_fields

log = logging.getLogger(__name__)

STOP_PREFIX = "Run stopped by rb-streams steering:"
FRAMEWORK = "claude-agent-sdk"
# What a step carries of a tool's input and output: a Read of a large file or a Write of one
# must not make an event the worker refuses (RB_MAX_EVENT_BYTES, 256 KiB by default).
OBSERVATION_MAX = 16_000
INPUT_VALUE_MAX = 4_000
# How long a tool hook waits for `watch()` to hand over the assistant message of its call
# (the SDK queues messages and runs hooks as separate tasks, so they can overtake it).
MESSAGE_WAIT_S = 0.05

SetModel = Callable[[str], Awaitable[Any]]
UNHOOKED = (
    "ClaudeAgentSteering.watch(): a session ended that no hook of this steering saw, so it was "
    "not steered: pass ClaudeAgentOptions(hooks=steering.hooks(), ...)"
)


def _cut(text: str, limit: int) -> str:
    """Head and tail of a long text: test summaries and errors are at the end of an output."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} chars cut ...]\n{text[-tail:]}"


def observation_of(response: Any) -> str:
    """A tool response as text: Bash's stdout and stderr, Read's file content, an Edit's diff,
    a sub-agent's or MCP tool's text blocks, else the response as JSON."""
    if response is None:
        return ""
    if isinstance(response, str):
        return _cut(response, OBSERVATION_MAX)
    if isinstance(response, Mapping):
        if "stdout" in response or "stderr" in response:
            parts = [str(response.get(k) or "") for k in ("stdout", "stderr")]
            return _cut("\n".join(p for p in parts if p), OBSERVATION_MAX)
        patch = response.get("structuredPatch")
        if isinstance(patch, list) and patch:  # Edit / Write: the diff, not the whole file again
            lines = [str(x) for h in patch if isinstance(h, Mapping) for x in h.get("lines") or []]
            return _cut(f"{response.get('filePath', '')}\n" + "\n".join(lines), OBSERVATION_MAX)
        file = response.get("file")
        if isinstance(file, Mapping) and isinstance(file.get("content"), str):
            return _cut(file["content"], OBSERVATION_MAX)
        content = response.get("content")
        if isinstance(content, str):
            return _cut(content, OBSERVATION_MAX)
        if _text_blocks(content):  # a Task sub-agent's answer, an MCP tool's result
            return _cut("\n".join(str(b["text"]) for b in content), OBSERVATION_MAX)
    if _text_blocks(response):
        return _cut("\n".join(str(b["text"]) for b in response), OBSERVATION_MAX)
    return _cut(json.dumps(response, default=str, ensure_ascii=False), OBSERVATION_MAX)


def _text_blocks(value: Any) -> TypeGuard[list[Mapping[str, Any]]]:
    return (
        isinstance(value, list) and bool(value) and all(isinstance(b, Mapping) and "text" in b for b in value)
    )


def _short_input(value: Any) -> Any:
    """The tool input with long strings (a Write's content) cut."""
    if isinstance(value, str):
        return _cut(value, INPUT_VALUE_MAX)
    if isinstance(value, Mapping):
        return {str(k): _short_input(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short_input(v) for v in value]
    return value


def agent_of(data: Mapping[str, Any], main: str | None = None) -> str | None:
    """Who made the tool call: a Task sub-agent as `<agent_type>:<agent_id>` (parallel sub-agents
    of one type are different agents), the main thread as its `agent_type` (a session started
    with an agent) or `main`."""
    agent_id, agent_type = data.get("agent_id"), data.get("agent_type")
    if agent_id:
        return f"{agent_type or 'agent'}:{agent_id}"
    if agent_type:
        return str(agent_type)
    return main


def tokens_of(usage: Mapping[str, Any] | None) -> int | None:
    """All tokens of one model call: input (cache reads and writes included) plus output."""
    if not usage:
        return None
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    total = sum(int(v) for k in keys if isinstance(v := usage.get(k), int | float))
    return total or None


def step_fields(data: Mapping[str, Any], main_agent: str | None = None) -> dict[str, Any]:
    """The step event fields a PostToolUse / PostToolUseFailure hook input carries."""
    fields: dict[str, Any] = {
        "action": str(data.get("tool_name") or "tool")[:1024],
        "action_input": _short_input(data.get("tool_input") or {}),
    }
    if data.get("hook_event_name") == "PostToolUseFailure":
        fields["observation"] = _cut(str(data.get("error") or "the tool failed"), OBSERVATION_MAX)
        fields["observation_is_error"] = True
    else:
        fields["observation"] = observation_of(data.get("tool_response"))
    agent = agent_of(data, main_agent)
    if agent:
        fields["agent"] = agent
        if not data.get("agent_id"):
            # the main thread leads the run, even when a sub-agent's steps were published first
            fields["lead"] = True
    return fields


@dataclass
class _Call:
    """What the message stream said of the model call that made a tool call."""

    thought: str | None
    model_id: str | None
    tokens: int | None
    usage: dict[str, Any] | None = None  # the wire `usage` (cache reads and writes)
    served_model: str | None = None


@dataclass
class _Message:
    """One model call's assistant message, gathered over the stream (the CLI sends a message
    with text and tool calls as several AssistantMessages with one message id)."""

    texts: list[str] = field(default_factory=list)
    model: str | None = None
    tokens: int | None = None
    usage: dict[str, Any] | None = None
    tokens_taken: bool = False


@dataclass
class _Live:
    """A session's run in progress and its hooks' shared state."""

    session: SteeringSession
    lock: asyncio.Lock
    model: str | None  # the model the adapter last asked for (set_model), or the run's
    failure: str | None = None


_BLOCK: ContextVar[list[str] | None] = ContextVar("rb_claude_agent_block", default=None)


OPTIONS = (
    "model",
    "model_routing",
    "set_model",
    "agent_name",
    "end_on_stop",
    "run_id_prefix",
    "hook_timeout_s",
    "call_gate",
    "gate",
)


class ClaudeAgentSteering(LastRun):
    """rb-streams steering for the Claude Agent SDK; see the module docstring."""

    def __init__(
        self,
        client: SyncSteeringClient,
        *,
        model: str | None = None,
        model_routing: dict[str, str] | None = None,
        set_model: SetModel | None = None,
        agent_name: str | None = None,
        end_on_stop: bool = True,
        run_id_prefix: str = "cc",
        hook_timeout_s: float | None = None,
        call_gate: bool | None = None,
        gate: GateMode | None = None,
        **run_fields: Any,
    ) -> None:
        check_run_field_names("ClaudeAgentSteering", run_fields, OPTIONS)
        validate_run_fields(run_fields, extra_names(client))
        self.client = client
        self.model = model
        self.model_routing = model_routing
        self.set_model = set_model
        self.agent_name = agent_name
        self.end_on_stop = end_on_stop
        self.run_id_prefix = run_id_prefix
        self.hook_timeout_s = hook_timeout_s
        self.call_gate = call_gate  # None: the client's setting (RB_CLIENT_CALL_GATE)
        self.gate = check_gate_mode(gate)  # None: the client's mode (RB_CLIENT_GATE_MODE)
        self.denied_calls = 0  # tool calls the gate denied, over every run
        self.run_fields = run_fields
        self._lock = threading.Lock()
        self._live: dict[str, _Live] = {}  # SDK session id -> its run in progress
        self._stopped: dict[str, str] = {}  # SDK session id -> why steering stopped it
        self._calls: dict[str, _Call] = {}  # tool_use_id -> its model call (from the stream)
        self._messages: dict[str, _Message] = {}  # message id -> what was seen of it
        self._watching = 0
        self._hooked: dict[str, None] = {}  # SDK session ids a hook started a run for (the latest)
        self._warned = False
        self._last: SteeringSession | None = None
        self._switches: set[asyncio.Task[Any]] = set()

    # -- wiring ---------------------------------------------------------------
    def hooks(self) -> dict[HookEvent, list[HookMatcher]]:
        """`ClaudeAgentOptions(hooks=...)`: every hook this adapter needs. To keep hooks of your
        own, merge the lists per event (`{**mine, "PostToolUse": [*mine["PostToolUse"], ...]}`)."""

        def m(*hooks: HookCallback) -> list[HookMatcher]:
            return [HookMatcher(matcher=None, hooks=list(hooks), timeout=self.hook_timeout_s)]

        return {
            "UserPromptSubmit": m(self.on_user_prompt_submit),
            "PreToolUse": m(self.on_pre_tool_use),
            "PostToolUse": m(self.on_post_tool_use),
            "PostToolUseFailure": m(self.on_post_tool_use_failure),
            "Stop": m(self.on_stop),
        }

    # -- public -----------------------------------------------------------------
    def _last_session(self) -> SteeringSession | None:
        return self._last

    def session_of(self, session_id: str) -> SteeringSession | None:
        """The run in progress of an SDK session."""
        with self._lock:
            live = self._live.get(session_id)
        return live.session if live else None

    def stop_reason(self, session_id: str) -> str | None:
        """Why steering stopped this SDK session, or None if it did not."""
        with self._lock:
            return self._stopped.get(session_id)

    def mark_failure(self, reason: str = "failure", session_id: str | None = None) -> None:
        """The outcome of a session's run (default: the run started last) when it ends."""
        with self._lock:
            if session_id is not None:
                live = self._live.get(session_id)
            else:
                live = next((v for v in self._live.values() if v.session is self._last), None)
        if live is not None:
            live.failure = reason if reason.startswith("failure") else f"failure: {reason}"

    async def aend_session(self, session_id: str, outcome: str | None = None) -> None:
        """Finish a session's run (the conversation is over; with `end_on_stop=False`)."""
        with self._lock:
            live = self._live.pop(session_id, None)
        if live is not None:
            await live.session.afinish(outcome or live.failure or "success")

    @contextlib.asynccontextmanager
    async def arun(self) -> AsyncIterator[ClaudeAgentSteering]:
        """Ends every run started in the block: with `failure: <Type>` if the block raises (the
        CLI died, the query was cancelled: no Stop hook will come), else `success`."""
        started: list[str] = []
        token = _BLOCK.set(started)
        try:
            yield self
        except BaseException as exc:
            for sid in started:
                await self.aend_session(sid, failure_outcome(type(exc)))
            raise
        else:
            for sid in started:
                await self.aend_session(sid)
        finally:
            _BLOCK.reset(token)

    # -- the message stream -------------------------------------------------------
    def observe(self, message: Any) -> None:
        """Note what an SDK message says of its model call (text, model, usage) for the steps
        of its tool calls. `watch()` calls it for every message."""
        if not isinstance(message, AssistantMessage):
            return
        key = message.message_id or f"anon-{id(message)}"
        with self._lock:
            seen = self._messages.setdefault(key, _Message())
            seen.model = message.model or seen.model
            seen.tokens = tokens_of(message.usage) or seen.tokens
            seen.usage = usage_of(message.usage) or seen.usage
            seen.texts += [b.text for b in message.content if isinstance(b, TextBlock) and b.text.strip()]
            for block in message.content:
                if isinstance(block, ToolUseBlock):
                    tokens = None if seen.tokens_taken else seen.tokens
                    usage = None if seen.tokens_taken else seen.usage  # once per model call
                    seen.tokens_taken = seen.tokens_taken or tokens is not None
                    thought = "\n".join(seen.texts).strip() or None
                    served = seen.model[:256] if seen.model else None
                    self._calls[block.id] = _Call(thought, seen.model, tokens, usage, served)
            # Only the latest calls are ever asked for (a call no hook asks about, a server tool
            # or a denied one, is not kept for ever).
            for seen_map in (self._messages, self._calls):
                if len(seen_map) > 1024:
                    for old in list(seen_map)[:512]:
                        del seen_map[old]

    async def watch(self, messages: AsyncIterable[Any]) -> AsyncIterator[Any]:
        """The SDK's message stream, passed through: fills thought, model and tokens of the
        steps, and finishes a session's run when its ResultMessage says it failed."""
        self._watching += 1
        try:
            async for message in messages:
                self.observe(message)
                if isinstance(message, ResultMessage):
                    self._check_hooked(message.session_id)
                    if message.is_error:
                        await self.aend_session(message.session_id, f"failure: {message.subtype}")
                yield message
        finally:
            self._watching -= 1

    def _check_hooked(self, session_id: str) -> None:
        """A query that ends without any hook of ours having run was not wired (once)."""
        with self._lock:
            unhooked = session_id not in self._hooked and not self._warned
            self._warned = self._warned or unhooked
        if unhooked:
            warnings.warn(UNHOOKED, RuntimeWarning, stacklevel=3)

    async def _call_of(self, tool_use_id: str | None) -> _Call | None:
        if not tool_use_id:
            return None
        deadline = time.monotonic() + MESSAGE_WAIT_S
        while True:
            with self._lock:
                call = self._calls.pop(tool_use_id, None)
            left = deadline - time.monotonic()
            if call is not None or not self._watching or left <= 0:
                return call
            await asyncio.sleep(min(left, 0.005))

    # -- runs -------------------------------------------------------------------------
    async def _open(self, data: Mapping[str, Any], task: str | None = None) -> tuple[_Live, Steering | None]:
        """The session's run in progress, or a new one started now with the steering of its
        first model call (decision 0's)."""
        sid = str(data.get("session_id") or "")
        with self._lock:
            live = self._live.get(sid)
            if live is not None and not live.session.finished:
                return live, None
            fields = {"model_routing": self.model_routing, "framework": FRAMEWORK, **self.run_fields}
            if task:
                fields.setdefault("task", task[:2000])
            session = SteeringSession(
                self.client,
                f"{self.run_id_prefix}-{uuid.uuid4().hex[:12]}",
                model=self.model,
                on_stop="return",  # a stop becomes the hook's continue=False
                call_gate=self.call_gate,
                gate=self.gate,
                **fields,
            )
            live = _Live(session, asyncio.Lock(), self.model)
            self._live[sid] = live
            self._hooked[sid] = None
            if len(self._hooked) > 1024:
                del self._hooked[next(iter(self._hooked))]
            self._stopped.pop(sid, None)
            self._last = session
        block = _BLOCK.get()
        if block is not None:
            block.append(sid)
        async with live.lock:
            await session.astart()
            steer = session.begin_step()  # the first model call: decision 0 steers it
        await self._route(live, steer)
        return live, steer

    async def _route(self, live: _Live, steer: Steering) -> None:
        """Ask Claude Code for the decision's model (set_model), without waiting for it: the
        hook returns at once, the CLI switches when it handles the request."""
        routed = steer.model
        if self.set_model is None or not routed or routed == live.model:
            return
        live.model = routed
        task = asyncio.get_running_loop().create_task(self._switch(routed))
        self._switches.add(task)
        task.add_done_callback(self._switches.discard)

    async def _switch(self, model: str) -> None:
        assert self.set_model is not None
        try:
            await self.set_model(model)
        except Exception as exc:  # a closed client or an old CLI: the call stays on its model
            log.warning("set_model(%r) failed: %s", model, exc)

    async def _stop(self, sid: str, live: _Live, steer: Steering) -> str:
        """Finish a stopped run now (Claude stops; no Stop hook may follow) and say why."""
        reason = steer.stop_reason or "the steering decision asked to end the run"
        with self._lock:
            self._stopped[sid] = reason
            if self._live.get(sid) is live:
                del self._live[sid]
        await live.session.afinish()
        return reason

    # -- hooks -------------------------------------------------------------------------
    async def on_user_prompt_submit(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """Start the session's run (the prompt is its task); decision 0's injection, if any,
        goes to the model with the prompt."""
        data = cast(Mapping[str, Any], input_data)
        _, first = await self._open(data, task=str(data.get("prompt") or "") or None)
        text = first.injection_text if first is not None else None
        return _context("UserPromptSubmit", text)

    async def on_pre_tool_use(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """No tool call after a stop: denied, with the reason (parallel calls, sub-agents). A
        call the gate refuses (a value only a tool output introduced, in a suspicious call) is
        denied with the gate's reason, which Claude reads; the session goes on."""
        data = cast(Mapping[str, Any], input_data)
        sid = str(data.get("session_id") or "")
        reason = self.stop_reason(sid)
        if reason is None:
            return self._gate(sid, data)
        out = _stopped(reason)
        out["hookSpecificOutput"] = {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": f"{STOP_PREFIX} {reason}",
        }
        return out

    def _gate(self, sid: str, data: Mapping[str, Any]) -> HookJSONOutput:
        """The pre-call gate on this tool call: {} (allowed) or a deny with the reason. Fails
        open: no run in progress, no decision yet, a late one."""
        with self._lock:
            live = self._live.get(sid)
        if live is None or live.session.finished:
            return {}
        tool = str(data.get("tool_name") or "")
        verdict = live.session.check_call(tool, data.get("tool_input") or {})
        if verdict.allow:
            return {}
        with self._lock:
            self.denied_calls += 1
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": denial_text(verdict, tool),
            }
        }

    async def on_post_tool_use(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """Publish the tool call as a step; its decision's injection goes to the next model call."""
        return await self._tool_step(cast(Mapping[str, Any], input_data), tool_use_id)

    async def on_post_tool_use_failure(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """A failed tool call is a step too: the error is its observation."""
        return await self._tool_step(cast(Mapping[str, Any], input_data), tool_use_id)

    async def on_stop(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """Claude finished answering: the run ends (unless `end_on_stop=False`)."""
        data = cast(Mapping[str, Any], input_data)
        if self.end_on_stop:
            await self.aend_session(str(data.get("session_id") or ""))
        return {}

    async def _tool_step(self, data: Mapping[str, Any], tool_use_id: str | None) -> HookJSONOutput:
        sid = str(data.get("session_id") or "")
        event = str(data.get("hook_event_name") or "PostToolUse")
        reason = self.stop_reason(sid)
        if reason is not None:
            return _stopped(reason)
        fields = step_fields(data, self.agent_name)
        call = await self._call_of(tool_use_id or data.get("tool_use_id"))
        if call is not None:
            fields.update({k: v for k, v in vars(call).items() if v is not None})
        live, _ = await self._open(data)
        async with live.lock:
            s = live.session
            if s.finished:  # stopped while this hook waited for its turn
                reason = self.stop_reason(sid)
                return _stopped(reason) if reason is not None else {}
            await s.aend_step(**fields)
            steer = s.begin_step()
        if steer.action == "stop":
            return _stopped(await self._stop(sid, live, steer))
        await self._route(live, steer)
        updated = None
        if event == "PostToolUse" and "tool_response" in data:
            # the tool's output with its copies of our channel made inert, in the tool's own
            # shape (Claude Code keeps the original when it rejects the shape: the block's
            # run tag still tells the real one apart)
            new = compose.defused_value(data["tool_response"])
            updated = new if new is not data["tool_response"] else None
        return _context(event, steer.injection_text, updated)


def _context(event: str, text: str | None, updated: Any = None) -> SyncHookJSONOutput:
    """A hook output that hands `text` to the model (nothing when there is nothing to say),
    and `updated` (not None) as the tool's output in place of the one it returned."""
    out: dict[str, Any] = {"hookEventName": event}
    if text:
        out["additionalContext"] = text
    if updated is not None:
        out["updatedToolOutput"] = updated
    if len(out) == 1:
        return {}
    return cast(SyncHookJSONOutput, {"hookSpecificOutput": out})


def _stopped(reason: str) -> SyncHookJSONOutput:
    """The SDK's way to end a session: continue=False with a reason shown to the user."""
    return {"continue_": False, "stopReason": f"{STOP_PREFIX} {reason}"}
