"""Compose the system prompt for an agent's next model call from a steering decision.

Agent side only: no I/O, no Kafka. The steering injection goes in its own *uncached* block
after the base system prompt, and the base prompt carries `cache_control: ephemeral`, so the
provider's prompt cache keeps hitting on the (unchanging) base prompt while the (changing)
injection never invalidates it. Providers that do not know `cache_control` ignore it.

Nothing here mutates its inputs: every function returns new containers, and message-history
entries are passed through as the same objects, untouched.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from ..contract import REASONBLOCKS_MARKER

__all__ = [
    "REASONBLOCKS_MARKER",
    "anthropic_request",
    "anthropic_system",
    "injection_of",
    "model_of",
    "openai_system_message",
    "plain_system",
    "with_system",
]

Block = dict[str, Any]
Base = str | Sequence[Mapping[str, Any]]


class _HasData(Protocol):
    """Anything carrying the wire dict as `.data` (e.g. `streams.agent.client.Decision`)."""

    @property
    def data(self) -> Mapping[str, Any]: ...


DecisionLike = Mapping[str, Any] | _HasData | None

_EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}


def _data_of(decision: DecisionLike) -> Mapping[str, Any] | None:
    """The decision's wire dict, whichever way it was handed to us (None = late/missing)."""
    if decision is None:
        return None
    if isinstance(decision, Mapping):
        return decision
    data = getattr(decision, "data", None)
    if isinstance(data, Mapping):
        return data
    raise TypeError(f"expected a decision dict, an object with a .data dict, or None; got {type(decision)!r}")


def injection_of(decision: DecisionLike) -> str | None:
    """The text to inject for this call, or None when there is nothing to inject.

    A late or missing decision (None) means the call runs unsteered, so it injects nothing;
    an explicit `inject: false` or an empty/blank text also injects nothing, so callers
    never emit an empty block.
    """
    data = _data_of(decision)
    if data is None:
        return None
    if "inject" in data and not data["inject"]:
        return None
    text = data.get("injection_text")
    if not isinstance(text, str) or not text.strip():
        return None
    return text


def model_of(decision: DecisionLike) -> str | None:
    """The routed model id, or None to keep the caller's model."""
    data = _data_of(decision)
    if data is None:
        return None
    model = data.get("model")
    return model if isinstance(model, str) and model else None


def _is_injection_block(block: Mapping[str, Any]) -> bool:
    text = block.get("text")
    return block.get("type") == "text" and isinstance(text, str) and text.startswith(REASONBLOCKS_MARKER)


def _base_blocks(base: Base | None) -> list[Block]:
    """Fresh copies of the base prompt as content blocks, cache breakpoint on the last one.

    The breakpoint caches everything up to and including that block, so one marker on the
    last base block covers the whole base prompt. Existing `cache_control` markers are kept
    as they are. Injection blocks left over from an earlier composition are dropped, so
    re-composing an already composed prompt never stacks stale injections.
    """
    if base is None:
        return []
    if isinstance(base, str):
        if not base:
            return []
        return [{"type": "text", "text": base, "cache_control": dict(_EPHEMERAL)}]
    blocks = [copy.deepcopy(dict(b)) for b in base if not _is_injection_block(b)]
    if blocks and "cache_control" not in blocks[-1]:
        blocks[-1]["cache_control"] = dict(_EPHEMERAL)
    return blocks


def _compose_blocks(base: Base | None, decision: DecisionLike) -> list[Block]:
    blocks = _base_blocks(base)
    injection = injection_of(decision)
    if injection is not None:
        # Deliberately no cache_control: the injection changes from call to call.
        blocks.append({"type": "text", "text": injection})
    return blocks


def anthropic_system(base: Base, decision: DecisionLike) -> list[Block]:
    """Anthropic Messages API `system=[...]`: cached base block(s), then the uncached injection."""
    return _compose_blocks(base, decision)


def openai_system_message(base: Base, decision: DecisionLike) -> dict[str, Any]:
    """OpenAI Chat Completions system message with content parts (cached base, uncached injection).

    OpenAI caches prefixes automatically and ignores `cache_control`; OpenAI-compatible
    gateways that forward to Anthropic use it.
    """
    return {"role": "system", "content": _compose_blocks(base, decision)}


def _text_of(base: Base | None) -> str:
    """Flatten a base prompt to one string (text blocks joined by blank lines, injections dropped)."""
    if base is None:
        return ""
    if isinstance(base, str):
        return base
    parts = [
        b["text"]
        for b in base
        if b.get("type") == "text" and isinstance(b.get("text"), str) and not _is_injection_block(b)
    ]
    return "\n\n".join(p for p in parts if p)


def plain_system(base: str, decision: DecisionLike) -> str:
    """For providers that only take a string system prompt: base, blank line, injection."""
    injection = injection_of(decision)
    if injection is None:
        return base
    return f"{base}\n\n{injection}" if base else injection


def with_system(
    messages: Sequence[Mapping[str, Any]],
    decision: DecisionLike,
    base: Base | None = None,
    provider: Literal["openai", "plain"] = "openai",
) -> list[Any]:
    """A new OpenAI-style message list with the leading system message composed for this call.

    The base prompt is the content of the leading system message if there is one, otherwise
    `base`. All other entries are the very same objects, in the same order, unmodified, so
    the conversation history (and the provider's cached prefix of it) stays as it was.
    `provider="plain"` emits the system content as a single string for OpenAI-compatible
    servers that reject content parts. If there is nothing at all to put in the system
    message, none is emitted.
    """
    if provider not in ("openai", "plain"):
        raise ValueError(f"unknown provider {provider!r}; expected 'openai' or 'plain'")
    history: list[Any] = list(messages)
    role = "system"
    if history and history[0].get("role") in ("system", "developer"):
        role = history[0]["role"]
        base = history[0].get("content")
        history = history[1:]
    content: str | list[Block]
    if provider == "plain":
        content = plain_system(_text_of(base), decision)
    else:
        content = _compose_blocks(base, decision)
    if not content:
        return history
    return [{"role": role, "content": content}, *history]


def anthropic_request(request: Mapping[str, Any], decision: DecisionLike) -> dict[str, Any]:
    """A new Anthropic request with the system prompt composed and the model routed.

    `messages` is passed through as the same (unmodified) object; the model is replaced
    only when the decision routes to one, so a late decision keeps the caller's model.
    """
    out = dict(request)
    system = _compose_blocks(request.get("system"), decision)
    if system:
        out["system"] = system
    else:
        out.pop("system", None)
    model = model_of(decision)
    if model is not None:
        out["model"] = model
    return out
