"""LangChain 1.x `AgentMiddleware`: rb-streams steering for a `create_agent` agent in one line.

    from streams.agent.langchain_middleware import SteeringMiddleware
    steering = SteeringMiddleware(client, model_routing={"FAST": "anthropic:claude-haiku-4-5"})
    agent = create_agent("anthropic:claude-sonnet-4-5", tools, system_prompt=BASE,
                         middleware=[steering])

Per agent invocation (one run): run_start before the first model call; before every later
call, the previous step (the last AI message as thought, its first tool call as action, the
tool messages after it as observation, token usage) is published and its decision awaited
within the client's deadline; the call then goes to the routed model (`init_chat_model` ids,
cached per id) with the composed system message (base prompt with `cache_control`, plus a
separate uncached `[REASONBLOCKS]` block only when injecting). The message history is never
modified. run_finish goes out when the agent ends (`success`, or what `mark_failure` set) or,
through the `run()` context manager, with `failure: <ExceptionType>` when it raises.
Needs the `langchain` extra (`pip install 'rb-streams[langchain]'`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from . import compose
from .client import StepLogEntry, SyncSteeringClient
from .session import SteeringSession, failure_outcome


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
        call = ai.tool_calls[0]
        fields["action"] = call["name"]
        fields["action_input"] = call.get("args") or {}
        results = [m for m in messages[last_ai + 1 :] if isinstance(m, ToolMessage)]
        if results:
            fields["observation"] = "\n".join(_text(m.content) for m in results)
            fields["observation_is_error"] = any(getattr(m, "status", "success") == "error" for m in results)
    usage = ai.usage_metadata
    if usage:
        fields["tokens"] = int(usage.get("total_tokens") or 0)
    model_id = (ai.response_metadata or {}).get("model_name") or (ai.response_metadata or {}).get("model")
    if model_id:
        fields["model_id"] = str(model_id)
    return fields


def _task(messages: list[BaseMessage]) -> str | None:
    first = next((m for m in messages if isinstance(m, HumanMessage)), None)
    return _text(first.content)[:2000] if first is not None else None


class SteeringMiddleware(AgentMiddleware):
    """One rb-streams run per agent invocation; see the module docstring."""

    def __init__(
        self,
        client: SyncSteeringClient,
        *,
        model: str | None = None,
        model_routing: dict[str, str] | None = None,
        model_factory: Callable[[str], BaseChatModel] | None = None,
        run_id_prefix: str = "lc",
        **run_fields: Any,
    ) -> None:
        super().__init__()
        self.client = client
        self.model = model
        self.model_routing = model_routing
        self.run_fields = run_fields
        self.run_id_prefix = run_id_prefix
        self._factory = model_factory
        self._models: dict[str, BaseChatModel] = {}
        self._lock = threading.Lock()
        self.session: SteeringSession | None = None
        self._failure: str | None = None

    # -- public -------------------------------------------------------------
    @property
    def step_log(self) -> list[StepLogEntry]:
        return self.session.step_log if self.session else []

    @property
    def run_id(self) -> str | None:
        return self.session.run_id if self.session else None

    def mark_failure(self, reason: str = "failure") -> None:
        """The run's outcome when it ends: `failure` or `failure: <reason>`."""
        self._failure = reason if reason.startswith("failure") else f"failure: {reason}"

    @contextlib.contextmanager
    def run(self) -> Iterator[SteeringMiddleware]:
        """Ends the run with `failure: <Type>` if the block raises (the agent never reached
        its end), else as `after_agent` would."""
        try:
            yield self
        except BaseException as exc:
            if self.session is not None:
                self.session.finish(failure_outcome(type(exc)))
            raise
        else:
            self._finish()

    @contextlib.asynccontextmanager
    async def arun(self) -> AsyncIterator[SteeringMiddleware]:
        try:
            yield self
        except BaseException as exc:
            if self.session is not None:
                await self.session.afinish(failure_outcome(type(exc)))
            raise
        else:
            await self._afinish()

    # -- hooks --------------------------------------------------------------
    def _new_session(self, state: Any) -> SteeringSession:
        import uuid

        self._failure = None
        fields = {"model_routing": self.model_routing, "framework": "langchain", **self.run_fields}
        fields.setdefault("task", _task(list(state.get("messages", []))))
        return SteeringSession(
            self.client, f"{self.run_id_prefix}-{uuid.uuid4().hex[:12]}", model=self.model, **fields
        )

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.session = self._new_session(state)
        self.session.start()
        return None

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self.session = self._new_session(state)
        await self.session.astart()
        return None

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self._finish()
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        await self._afinish()
        return None

    def _finish(self) -> None:
        if self.session is not None:
            self.session.finish(self._failure or "success")

    async def _afinish(self) -> None:
        if self.session is not None:
            await self.session.afinish(self._failure or "success")

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        s = self._session()
        if s.calls > 0:
            s.end_step(**previous_step(list(request.messages)))
        try:
            return handler(self._steer(request, s))
        except Exception as exc:
            s.finish(failure_outcome(type(exc)))
            raise

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[Any]],
    ) -> Any:
        s = self._session()
        if s.calls > 0:
            await s.aend_step(**previous_step(list(request.messages)))
        try:
            return await handler(self._steer(request, s))
        except Exception as exc:
            await s.afinish(failure_outcome(type(exc)))
            raise

    # -- steering -------------------------------------------------------------
    def _session(self) -> SteeringSession:
        if self.session is None or self.session.finished:
            raise RuntimeError("SteeringMiddleware: no run in progress (before_agent did not run)")
        return self.session

    def _steer(self, request: ModelRequest, s: SteeringSession) -> ModelRequest:
        steer = s.begin_step()
        overrides: dict[str, Any] = {}
        routed = compose.model_of(steer.decision)
        if routed:
            overrides["model"] = self._model(routed)
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
