"""A scripted model provider for the OpenAI Agents SDK, for examples and tests (no API key).

The replies come from the SDK's own deterministic test model (`agents.testing.ScriptedModel`,
one script for the whole run); `ScriptedProvider.get_model(name)` gives a `Model` per model
name that plays the next reply of that shared script and records which name served which call,
so a conversation continues across routed models and a test can see where each call went."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from agents import Model, ModelProvider, ModelResponse, Usage
from agents.testing import ModelCall, ScriptedModel, assistant_message, function_call

__all__ = ["Call", "ScriptedProvider", "reply", "say", "usage"]


@dataclass(frozen=True)
class Call:
    model: str  # the model name that served the call
    call: ModelCall  # what it was sent: instructions, input, tools, handoffs


def usage(input_tokens: int = 300, output_tokens: int = 40) -> Usage:
    return Usage(
        requests=1,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


def reply(text: str, *calls: tuple[str, dict[str, Any]], n: int = 0) -> dict[str, Any]:
    """One scripted response: a message, then tool calls (name, args) with ids `c<n>-<i>`."""
    output: list[Any] = [assistant_message(text, item_id=f"m{n}")] if text else []
    output += [function_call(name, args, call_id=f"c{n}-{i}") for i, (name, args) in enumerate(calls)]
    return {"output": output, "usage": usage(), "response_id": f"r{n}"}


def say(text: str, n: int = 0) -> dict[str, Any]:
    return reply(text, n=n)


class ScriptedProvider(ModelProvider):
    """Models by name over one shared script; `calls` lists every call with its model name."""

    def __init__(self, steps: Iterable[Any], default: str = "gpt-4.1") -> None:
        self.script = ScriptedModel(steps)
        self.default = default
        self.calls: list[Call] = []

    def get_model(self, model_name: str | None) -> Model:
        return _Named(self, model_name or self.default)


class _Named(Model):
    def __init__(self, provider: ScriptedProvider, name: str) -> None:
        self.provider, self.model = provider, name

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        script = self.provider.script
        response = await script.get_response(*args, **kwargs)
        last = script.last_call
        assert last is not None
        self.provider.calls.append(Call(self.model, last))
        return response

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        script = self.provider.script

        async def events() -> AsyncIterator[Any]:
            async for event in script.stream_response(*args, **kwargs):
                yield event
            last = script.last_call
            assert last is not None
            self.provider.calls.append(Call(self.model, last))

        return events()
