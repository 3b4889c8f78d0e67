"""A scripted chat model for examples and tests: plays back AI messages (with tool calls) and
records every request it received (which model id, which messages). Routed "models" made by
`ScriptedModel.factory` share one script, so the conversation continues across routing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult


@dataclass
class Script:
    replies: list[AIMessage]
    calls: list[tuple[str, list[BaseMessage]]] = field(default_factory=list)


class ScriptedModel(GenericFakeChatModel):
    """langchain_core's GenericFakeChatModel, playing a shared `Script` and recording calls."""

    messages: Any = None  # the base class's reply iterator: the shared script replaces it
    script: Any
    model_id: str = "scripted-default"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.script.calls.append((self.model_id, list(messages)))
        reply = self.script.replies.pop(0) if self.script.replies else AIMessage(content="Done.")
        reply = reply.model_copy(update={"response_metadata": {"model_name": self.model_id}})
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Sequence[Any], **kw: Any) -> ScriptedModel:  # type: ignore[override]
        return self

    @staticmethod
    def factory(script: Script) -> Callable[[str], ScriptedModel]:
        return lambda model_id: ScriptedModel(script=script, model_id=model_id)
