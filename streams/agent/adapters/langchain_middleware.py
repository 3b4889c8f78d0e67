"""LangChain 1.x `AgentMiddleware`: rb-streams steering for a `create_agent` agent in one line.

    from streams.agent.adapters.langchain_middleware import SteeringMiddleware
    steering = SteeringMiddleware(client, model_routing={"FAST": "anthropic:claude-haiku-4-5"})
    agent = create_agent("anthropic:claude-sonnet-4-5", tools, system_prompt=BASE,
                         middleware=[steering])

Runs. The run lives in the agent's state (a private `rb_run_id`), never on the middleware, so one
agent serves any number of concurrent invocations. With a `thread_id` (a checkpointer and
`config={"configurable": {"thread_id": ...}}`) a thread is one run across its turns by default
(`runs="thread"`): turn 2 continues turn 1's run, its task and its monitor history; the run ends
with `end_thread(...)`, when a `run()`/`arun()` block it started in exits, or when the thread
has been idle `thread_idle_s` (finished at its next turn or at any other run's start, which
starts afresh). Without a thread, or with `runs="invocation"`, every invocation is one run,
finished when the agent ends.
`org_id`/`project_id` come from LangChain's `Runtime.context` when it has them (else the constructor's).

Steps. Before every model call but the first (in `before_model`), the previous step (the last
AI message as thought, its tool calls as action, the tool messages after it as observation,
token usage) is published and its decision awaited within the client's deadline; the call then goes to the
routed model (`init_chat_model` ids, cached per id) with, only when injecting, the
`[REASONBLOCKS]` text as a `HumanMessage` after the request's last message (`placement="end"`,
the default: the system prompt and the history the provider cached are sent unchanged; with
`placement="system"` it is a block after the base system prompt, which costs the history's
cache, see COST.md). A step with several tool calls reports them all: `action` is their names joined
with "+", `action_input` the list of {"name", "args"}. The message history is never modified.
A failed model call does not end the run: retry and fallback middleware call again, and the
repeated call reuses its steering instead of publishing a step twice. run_finish goes out when
the agent ends (`success`, or what `mark_failure` set) or, through `run()`/`arun()`, with
`failure: <ExceptionType>` when the block raises.

Escalation (the run's `escalation` policy, issue 30). A decision that says `escalate` carries
the stronger model as its `model`: the next call is routed to it like any routed call. One that
says `stop` ends the run before the next model call the LangChain 1.x way (`before_model`
returns `jump_to="end"`, as `ModelCallLimitMiddleware(exit_behavior="end")` does), with a final
AIMessage named `rb-streams` that says why; the run is finished as
`failure: stopped_by_steering` (a thread's too: its next turn starts a new run).

The gate (`wrap_tool_call`). Before a tool runs, the run's session is asked whether it may
(`SteeringSession.check_call`, from the newest decision's `taint` list; a late decision
keeps the earlier taint in force): a call whose
arguments carry a value that only a tool output introduced, in a call the decision marks as
suspicious, is not run; its `ToolMessage` (status `error`) says "rb-streams steering: The
call to `send_money` was refused: ..." and why, so the model goes on with the user's task.
`call_gate=False` (or `RB_CLIENT_CALL_GATE=false`) turns it off; `gate="strict"` (or
`RB_CLIENT_GATE_MODE=strict`) also refuses any value a tool output introduced in an acting call;
`denied_calls` counts them.
Needs the `langchain` extra (`pip install './[langchain]'` from a checkout, or the wheel
with `[langchain]`).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
    from langchain.agents.middleware.types import PrivateStateAttr, ToolCallRequest, hook_config
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
except ImportError as exc:  # one line that says what to install, not a bare module name
    raise ImportError(
        "streams.agent.adapters.langchain_middleware needs LangChain 1.x: pip install './[langchain]' from a "
        f"checkout, or the wheel with [langchain] ({exc})"
    ) from exc

from .. import compose
from ..client import SyncSteeringClient
from ..gate import GateMode, check_gate_mode, denial_text
from ..session import LastRun, Steering, SteeringSession, extra_names, failure_outcome
from ..usage import from_langchain as usage_of
from ..validation import check_run_field_names, validate_run_fields

# The final message of a run that steering stopped (`name` tells it from the model's own).
STOP_PREFIX = "Run stopped by rb-streams steering:"
STOP_NAME = "rb-streams"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content if b
        ).strip()
    return str(content or "")


def previous_step(messages: list[BaseMessage]) -> dict[str, Any]:
    """The step event fields of the last model call, read from the history (not changed)."""
    last_ai = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=None)
    if last_ai is None:
        return {}
    ai = messages[last_ai]
    assert isinstance(ai, AIMessage)
    fields: dict[str, Any] = {"thought": _text(ai.content) or None}
    if ai.name:  # multi-agent graphs name each agent's messages
        fields["agent"] = str(ai.name)
    if ai.tool_calls:
        if len(ai.tool_calls) == 1:
            call = ai.tool_calls[0]
            fields["action"] = call["name"]
            fields["action_input"] = call.get("args") or {}
        else:  # every call of the step, in order
            fields["action"] = "+".join(c["name"] for c in ai.tool_calls)[:1024]
            fields["action_input"] = [{"name": c["name"], "args": c.get("args") or {}} for c in ai.tool_calls]
        results = [m for m in messages[last_ai + 1 :] if isinstance(m, ToolMessage)]
        if results:
            fields["observation"] = "\n".join(_text(m.content) for m in results)
            fields["observation_is_error"] = any(getattr(m, "status", "success") == "error" for m in results)
    usage = ai.usage_metadata
    if usage:
        fields["tokens"] = int(usage.get("total_tokens") or 0)
        wire = usage_of(usage)  # cache reads and writes from `input_token_details`
        if wire is not None:
            fields["usage"] = wire
    model_id = (ai.response_metadata or {}).get("model_name") or (ai.response_metadata or {}).get("model")
    if model_id:
        fields["model_id"] = str(model_id)
        fields["served_model"] = str(model_id)[:256]  # the provider's response names it
    return fields


def _task(messages: list[BaseMessage]) -> str | None:
    first = next((m for m in messages if isinstance(m, HumanMessage)), None)
    return _text(first.content)[:2000] if first is not None else None


class SteeringState(AgentState[Any]):
    """The middleware's part of the agent state: which run this invocation (or thread) is."""

    rb_run_id: NotRequired[Annotated[str, PrivateStateAttr]]


@dataclass
class _Live:
    """A run in progress in this process: its session and what has been published of it."""

    session: SteeringSession
    thread: str | None
    ai_seen: int = -1  # AI messages in the request of the last model call (-1: none yet)
    steering: Steering | None = None  # the last call's steering (a retried call reuses it)
    fresh: bool = False  # before_model took `steering` for a call its model has not served yet
    failure: str | None = None
    used: float = 0.0  # time.monotonic() of its last hook (a thread's idle clock)


# The runs started inside the innermost `run()`/`arun()` block of this context.
_BLOCK: ContextVar[list[str] | None] = ContextVar("rb_langchain_block", default=None)


OPTIONS = (
    "model",
    "model_routing",
    "model_factory",
    "run_id_prefix",
    "runs",
    "thread_idle_s",
    "placement",
    "call_gate",
    "gate",
)


class SteeringMiddleware(LastRun, AgentMiddleware[SteeringState, Any, Any]):
    """rb-streams steering for a LangChain agent; see the module docstring."""

    state_schema = SteeringState

    def __init__(
        self,
        client: SyncSteeringClient,
        *,
        model: str | None = None,
        model_routing: dict[str, str] | None = None,
        model_factory: Callable[[str], BaseChatModel] | None = None,
        run_id_prefix: str = "lc",
        runs: Literal["thread", "invocation"] = "thread",
        thread_idle_s: float = 3600.0,
        placement: compose.Placement = "end",
        call_gate: bool | None = None,
        gate: GateMode | None = None,
        **run_fields: Any,
    ) -> None:
        super().__init__()
        if runs not in ("thread", "invocation"):
            raise ValueError(f"runs must be 'thread' or 'invocation', got {runs!r}")
        if thread_idle_s < 0:
            raise ValueError(f"thread_idle_s must be >= 0 (0: never), got {thread_idle_s!r}")
        check_run_field_names("SteeringMiddleware", run_fields, OPTIONS)
        validate_run_fields(run_fields, extra_names(client))
        self.client = client
        self.model = model
        self.model_routing = model_routing
        self.run_fields = run_fields
        self.run_id_prefix = run_id_prefix
        self.runs = runs
        self.thread_idle_s = thread_idle_s
        self.placement = compose.check_placement(placement)
        self.call_gate = call_gate  # None: the client's setting (RB_CLIENT_CALL_GATE)
        self.gate = check_gate_mode(gate)  # None: the client's mode (RB_CLIENT_GATE_MODE)
        self.denied_calls = 0  # tool calls the gate refused, over every run
        self._factory = model_factory
        self._models: dict[str, BaseChatModel] = {}
        self._lock = threading.Lock()
        self._live: dict[str, _Live] = {}  # run id -> run in progress
        self._threads: dict[str, str] = {}  # thread id -> its run in progress
        self._last: SteeringSession | None = None

    # -- public -------------------------------------------------------------
    def _last_session(self) -> SteeringSession | None:
        return self._last

    def session_of(self, run_id: str) -> SteeringSession | None:
        with self._lock:
            live = self._live.get(run_id)
        return live.session if live else None

    def thread_run(self, thread_id: str) -> str | None:
        """The run a thread is steered as (thread mode), while it is in progress."""
        with self._lock:
            return self._threads.get(thread_id)

    def active_runs(self) -> list[str]:
        with self._lock:
            return list(self._live)

    def mark_failure(self, reason: str = "failure", run_id: str | None = None) -> None:
        """The outcome of `run_id` (default: the run started last) when it ends."""
        target = run_id or self.run_id
        with self._lock:
            live = self._live.get(target or "")
        if live is not None:
            live.failure = reason if reason.startswith("failure") else f"failure: {reason}"

    def end_thread(self, thread_id: str, outcome: str = "success") -> None:
        """Finish the run of a thread (thread mode): the conversation is over."""
        run_id = self.thread_run(thread_id)
        if run_id is not None:
            self._end(run_id, outcome)

    async def aend_thread(self, thread_id: str, outcome: str = "success") -> None:
        run_id = self.thread_run(thread_id)
        if run_id is not None:
            await self._aend(run_id, outcome)

    @contextlib.contextmanager
    def run(self) -> Iterator[SteeringMiddleware]:
        """Ends every run started in the block: with `failure: <Type>` if the block raises
        (the agent never reached its end), else as the agent's end would."""
        started: list[str] = []
        token = _BLOCK.set(started)
        try:
            yield self
        except BaseException as exc:
            for rid in started:
                self._end(rid, failure_outcome(type(exc)))
            raise
        else:
            for rid in started:
                self._end(rid, None)
        finally:
            _BLOCK.reset(token)

    @contextlib.asynccontextmanager
    async def arun(self) -> AsyncIterator[SteeringMiddleware]:
        started: list[str] = []
        token = _BLOCK.set(started)
        try:
            yield self
        except BaseException as exc:
            for rid in started:
                await self._aend(rid, failure_outcome(type(exc)))
            raise
        else:
            for rid in started:
                await self._aend(rid, None)
        finally:
            _BLOCK.reset(token)

    # -- runs -----------------------------------------------------------------
    def _thread_of(self, runtime: Any) -> str | None:
        info = getattr(runtime, "execution_info", None)
        thread = getattr(info, "thread_id", None)
        return str(thread) if thread and self.runs == "thread" else None

    def _context_fields(self, runtime: Any) -> dict[str, Any]:
        ctx = getattr(runtime, "context", None)
        out: dict[str, Any] = {}
        for name in ("org_id", "project_id"):
            v = ctx.get(name) if isinstance(ctx, Mapping) else getattr(ctx, name, None)
            if v:
                out[name] = str(v)
        return out

    def _open(self, state: Any, runtime: Any) -> tuple[_Live, bool, list[_Live]]:
        """The run this invocation continues (its thread's) or a new one (True: start it), and
        the idle threads' runs to finish first (dropped here, so they are finished once)."""
        thread = self._thread_of(runtime)
        now = time.monotonic()
        with self._lock:
            idle = self._expire(now)
            if thread is not None:
                rid = self._threads.get(thread)
                live = self._live.get(rid or "")
                if live is not None and not live.session.finished:
                    live.used = now
                    return live, False, idle
            fields = {
                "model_routing": self.model_routing,
                "framework": "langchain",
                **self.run_fields,
                **self._context_fields(runtime),
            }
            fields.setdefault("task", _task(list(state.get("messages", []))))
            session = SteeringSession(
                self.client,
                f"{self.run_id_prefix}-{uuid.uuid4().hex[:12]}",
                model=self.model,
                on_stop="return",  # before_model ends the run itself (jump_to="end")
                call_gate=self.call_gate,
                gate=self.gate,
                **fields,
            )
            live = _Live(session, thread, used=now)
            self._live[session.run_id] = live
            if thread is not None:
                self._threads[thread] = session.run_id
            self._last = session
        block = _BLOCK.get()
        if block is not None:
            block.append(session.run_id)
        return live, True, idle

    def _expire(self, now: float) -> list[_Live]:
        """Drop the threads idle `thread_idle_s` or more (caller holds the lock): their
        conversations are over, and the worker would evict a run idle long enough anyway."""
        if self.thread_idle_s <= 0:
            return []
        idle = [v for v in self._live.values() if v.thread is not None and now - v.used >= self.thread_idle_s]
        for v in idle:
            del self._live[v.session.run_id]
            if v.thread is not None and self._threads.get(v.thread) == v.session.run_id:
                del self._threads[v.thread]
        return idle

    def _close(self, run_id: str) -> _Live | None:
        with self._lock:
            live = self._live.pop(run_id, None)
            if live is not None and live.thread is not None and self._threads.get(live.thread) == run_id:
                del self._threads[live.thread]
        return live

    def _end(self, run_id: str, outcome: str | None) -> None:
        live = self._close(run_id)
        if live is not None:
            live.session.finish(outcome or live.failure or "success")

    async def _aend(self, run_id: str, outcome: str | None) -> None:
        live = self._close(run_id)
        if live is not None:
            await live.session.afinish(outcome or live.failure or "success")

    def _live_of(self, state: Any) -> _Live:
        rid = state.get("rb_run_id") if isinstance(state, Mapping) else None
        with self._lock:
            live = self._live.get(rid or "")
        if live is None or live.session.finished:
            raise RuntimeError(
                "SteeringMiddleware: no run in progress for this invocation (before_agent did not run)"
            )
        live.used = time.monotonic()
        return live

    # -- hooks --------------------------------------------------------------
    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        live, new, idle = self._open(state, runtime)
        for old in idle:
            old.session.finish(old.failure or "success")
        if new:
            live.session.start()
        return {"rb_run_id": live.session.run_id}

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        live, new, idle = self._open(state, runtime)
        for old in idle:
            await old.session.afinish(old.failure or "success")
        if new:
            await live.session.astart()
        return {"rb_run_id": live.session.run_id}

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        live = self._after(state)
        if live is not None:
            self._end(live.session.run_id, None)
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        live = self._after(state)
        if live is not None:
            await self._aend(live.session.run_id, None)
        return None

    def _after(self, state: Any) -> _Live | None:
        """The run to finish at the agent's end: an invocation's; a thread's goes on."""
        rid = state.get("rb_run_id") if isinstance(state, Mapping) else None
        with self._lock:
            live = self._live.get(rid or "")
        if live is not None and live.thread is not None and not live.session.stopped_by_steering:
            live.used = time.monotonic()  # the thread's idle clock starts at its turn's end
            return None
        return live

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Publish the previous step and take this call's steering; a `stop` ends the run here
        (no model call), the way ModelCallLimitMiddleware's `exit_behavior="end"` does."""
        live = self._live_of(state)
        if not live.fresh:  # else this call's steering is taken already (its model never ran)
            s = live.session
            if s.calls > 0:
                s.end_step(**previous_step(list(state.get("messages", []))))
            live.steering, live.fresh = s.begin_step(), True
        return self._stop(live)

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        live = self._live_of(state)
        if not live.fresh:
            s = live.session
            if s.calls > 0:
                await s.aend_step(**previous_step(list(state.get("messages", []))))
            live.steering, live.fresh = s.begin_step(), True
        return self._stop(live)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        live = self._live_of(request.state)
        steer = self._call_steering(live, request)
        if steer is None:  # no before_model for this call: publish here
            s = live.session
            if s.calls > 0:
                s.end_step(**previous_step(list(request.messages)))
            steer = self._took(live, request, s.begin_step())
        if steer.action == "stop":
            return self._stop_message(steer)
        return handler(self._steer(request, steer))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[Any]],
    ) -> Any:
        live = self._live_of(request.state)
        steer = self._call_steering(live, request)
        if steer is None:
            s = live.session
            if s.calls > 0:
                await s.aend_step(**previous_step(list(request.messages)))
            steer = self._took(live, request, s.begin_step())
        if steer.action == "stop":
            return self._stop_message(steer)
        return await handler(self._steer(request, steer))

    def _call_steering(self, live: _Live, request: ModelRequest) -> Steering | None:
        """This call's steering: the one before_model just took, or the last call's when this
        is a retry of it (retry and fallback middleware call the handler again); None when the
        call is new and before_model did not run for it."""
        ai = _ai_count(request.messages)
        if live.fresh and live.steering is not None:
            return self._took(live, request, live.steering)
        if live.steering is not None and ai == live.ai_seen:
            return live.steering
        return None

    @staticmethod
    def _took(live: _Live, request: ModelRequest, steer: Steering) -> Steering:
        live.steering, live.fresh, live.ai_seen = steer, False, _ai_count(request.messages)
        return steer

    def _stop(self, live: _Live) -> dict[str, Any] | None:
        steer = live.steering
        if steer is None or steer.action != "stop":
            return None
        return {"jump_to": "end", "messages": [self._stop_message(steer)]}

    @staticmethod
    def _stop_message(steer: Steering) -> AIMessage:
        """The run's last message: says that steering ended it and why."""
        return AIMessage(content=f"{STOP_PREFIX} {steer.stop_reason}", name=STOP_NAME)

    # -- the pre-call gate ----------------------------------------------------
    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Any]) -> Any:
        """Run the tool, unless the gate refuses the call: then its ToolMessage says why."""
        refused = self._gate(request)
        return refused if refused is not None else handler(request)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[Any]]
    ) -> Any:
        refused = self._gate(request)
        return refused if refused is not None else await handler(request)

    def _gate(self, request: ToolCallRequest) -> ToolMessage | None:
        """None (run the tool), or the ToolMessage of a refused call. Fails open: no run in
        progress for this invocation, no decision yet, a late one."""
        state = request.state
        rid = state.get("rb_run_id") if isinstance(state, Mapping) else getattr(state, "rb_run_id", None)
        with self._lock:
            live = self._live.get(rid or "")
        call = request.tool_call
        if live is None or live.session.finished or not isinstance(call, Mapping):
            return None
        tool = str(call.get("name") or "")
        verdict = live.session.check_call(tool, call.get("args"))
        if verdict.allow:
            return None
        with self._lock:
            self.denied_calls += 1
        return ToolMessage(
            content=denial_text(verdict, tool),
            tool_call_id=str(call.get("id") or ""),
            name=tool,
            status="error",
        )

    # -- steering -------------------------------------------------------------
    def _steer(self, request: ModelRequest, steer: Steering) -> ModelRequest:
        overrides: dict[str, Any] = {}
        routed = compose.model_of(steer.decision)
        if routed:
            overrides["model"] = self._model(routed)
        injection = compose.injection_of(steer.decision)
        # a tool result's copy of our channel is made inert, the same way on every call
        messages = _defused(request.messages)
        if messages is not request.messages:
            overrides["messages"] = messages
        if self.placement == "end":
            # After the last message (a tool result, the user's turn): the system prompt and the
            # history stay byte for byte what the provider cached. Chat models merge it into the
            # last user turn (Anthropic: after the tool_result blocks).
            if injection is not None:
                overrides["messages"] = [*messages, HumanMessage(content=injection)]
            return request.override(**overrides) if overrides else request
        base: Any = request.system_message.content if request.system_message is not None else ""
        blocks = compose.anthropic_system(base, steer.decision)
        if blocks:
            overrides["system_message"] = SystemMessage(content=blocks)  # type: ignore[arg-type]
        return request.override(**overrides) if overrides else request

    def _model(self, model_id: str) -> BaseChatModel:
        with self._lock:
            m = self._models.get(model_id)
            if m is None:
                if self._factory is not None:
                    m = self._factory(model_id)
                else:
                    from langchain.chat_models import init_chat_model

                    m = init_chat_model(model_id)
                self._models[model_id] = m
            return m


def _defused(messages: Any) -> Any:
    """`messages` with every ToolMessage's copy of our channel made inert
    (`compose.defused_content`): the same list when none holds one, else a new list in which
    only those messages are copies."""
    out = list(messages)
    changed = False
    for i, m in enumerate(out):
        if isinstance(m, ToolMessage):
            content = compose.defused_content(m.content)
            if content is not m.content:
                out[i] = m.model_copy(update={"content": content})
                changed = True
    return out if changed else messages


def _ai_count(messages: Any) -> int:
    return sum(1 for m in messages if isinstance(m, AIMessage))
