"""What a model call cost in tokens, as each framework reports it, mapped to the step's `usage`.

The wire `usage` (step.schema.json) splits a call's tokens the way providers price them, into
four disjoint counts: `input_tokens` (plain input price: neither read from nor written to the
prompt cache), `cache_read_tokens`, `cache_write_tokens`, `output_tokens`; and `estimated`
(false here: these are the provider's figures). Frameworks disagree on what their input count
holds, so each has its own mapping:

| source | input count | cache read | cache write |
|---|---|---|---|
| Anthropic `Usage` (and the Claude Agent SDK's message/result `usage`) | uncached only | `cache_read_input_tokens` | `cache_creation_input_tokens` |
| OpenAI chat `CompletionUsage` | `prompt_tokens`, all of it | `prompt_tokens_details.cached_tokens` | `prompt_tokens_details.cache_write_tokens` |
| OpenAI `ResponseUsage`, Agents SDK `Usage` | `input_tokens`, all of it | `input_tokens_details.cached_tokens` | `input_tokens_details.cache_write_tokens` |
| LangChain `usage_metadata` | `input_tokens`, all of it | `input_token_details.cache_read` | `input_token_details.cache_creation` |
| OTel `gen_ai.usage.*` | `input_tokens`, all of it | `cache_read.input_tokens` | `cache_creation.input_tokens` |
| OpenInference `llm.token_count.*` | `prompt`, all of it | `prompt_details.cache_read` | `prompt_details.cache_write` |

Where the input count is "all of it", the plain part is what is left after the cache parts; a
producer that reports less than its own cache parts is taken to have reported the plain part
(as Anthropic does), never a negative count. Every count is an integer in [0, 2**53]; anything
else is left out. Nothing here raises on what a framework hands over: an object it cannot read
gives None (the step goes out without `usage`, as before).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..shared.contract import TOKENS_MAX

__all__ = [
    "COUNTS",
    "clean",
    "estimated",
    "from_agents_sdk",
    "from_anthropic",
    "from_langchain",
    "from_openai",
    "from_otel",
    "of",
    "total",
]

COUNTS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
Usage = dict[str, Any]


def _get(obj: Any, *path: str) -> Any:
    """`obj.a.b` or `obj["a"]["b"]` (pydantic models, dataclasses, TypedDicts, plain dicts)."""
    for key in path:
        if obj is None:
            return None
        if isinstance(obj, Mapping):
            obj = obj.get(key)
        else:
            try:
                obj = getattr(obj, key, None)
            except Exception:  # a property that raises is a framework's, not our failure
                return None
    return obj


def _n(value: Any) -> int | None:
    """A token count: a non-negative integer (an integral float from a span attribute too),
    capped at 2**53; anything else is no count."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if not isinstance(value, int) or value < 0:
        return None
    return min(value, TOKENS_MAX)


def _first(obj: Any, *paths: tuple[str, ...]) -> int | None:
    for path in paths:
        v = _n(_get(obj, *path))
        if v is not None:
            return v
    return None


def _wire(plain: int | None, read: int | None, write: int | None, out: int | None) -> Usage | None:
    """The wire dict (missing parts are 0), or None when the source reported no count at all."""
    if plain is None and read is None and write is None and out is None:
        return None
    return {
        "input_tokens": plain or 0,
        "cache_read_tokens": read or 0,
        "cache_write_tokens": write or 0,
        "output_tokens": out or 0,
        "estimated": False,
    }


def _from_total(whole: int | None, read: int | None, write: int | None, out: int | None) -> Usage | None:
    """For sources whose input count includes the cache parts."""
    cached = (read or 0) + (write or 0)
    plain = whole
    if whole is not None and whole >= cached:
        plain = whole - cached
    return _wire(plain, read, write, out)


def from_anthropic(usage: Any) -> Usage | None:
    """Anthropic Messages `usage` (SDK object or dict; also the Claude Agent SDK's
    `AssistantMessage.usage` and `ResultMessage.usage`): `input_tokens` is the uncached part."""
    return _wire(
        _first(usage, ("input_tokens",)),
        _first(usage, ("cache_read_input_tokens",)),
        _first(usage, ("cache_creation_input_tokens",)),
        _first(usage, ("output_tokens",)),
    )


def from_openai(usage: Any) -> Usage | None:
    """OpenAI `CompletionUsage` (chat) or `ResponseUsage` (Responses API), objects or dicts;
    OpenAI-compatible servers that report cache hits as `prompt_cache_hit_tokens` too."""
    if _get(usage, "prompt_tokens") is not None:
        read = _first(usage, ("prompt_tokens_details", "cached_tokens"), ("prompt_cache_hit_tokens",))
        write = _first(usage, ("prompt_tokens_details", "cache_write_tokens"))
        return _from_total(
            _first(usage, ("prompt_tokens",)), read, write, _first(usage, ("completion_tokens",))
        )
    return from_agents_sdk(usage)


def from_agents_sdk(usage: Any) -> Usage | None:
    """OpenAI Agents SDK `Usage` (and the Responses API's `ResponseUsage`): `input_tokens`
    includes the cached tokens."""
    return _from_total(
        _first(usage, ("input_tokens",)),
        _first(usage, ("input_tokens_details", "cached_tokens")),
        _first(usage, ("input_tokens_details", "cache_write_tokens")),
        _first(usage, ("output_tokens",)),
    )


def from_langchain(usage_metadata: Any) -> Usage | None:
    """LangChain `AIMessage.usage_metadata`: `input_tokens` is every input token, the cache
    parts are in `input_token_details` (`cache_read`, `cache_creation`)."""
    return _from_total(
        _first(usage_metadata, ("input_tokens",)),
        _first(usage_metadata, ("input_token_details", "cache_read")),
        _first(usage_metadata, ("input_token_details", "cache_creation")),
        _first(usage_metadata, ("output_tokens",)),
    )


# OpenInference first (its instrumentors set both forms at times; its names are more precise).
OI_PROMPT = "llm.token_count.prompt"
OI_COMPLETION = "llm.token_count.completion"
OI_CACHE_READ = "llm.token_count.prompt_details.cache_read"
OI_CACHE_WRITE = "llm.token_count.prompt_details.cache_write"
GENAI_INPUT = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
GENAI_OUTPUT = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
GENAI_CACHE_READ = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
GENAI_CACHE_WRITE = ("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens")


def from_otel(attributes: Mapping[str, Any] | None) -> Usage | None:
    """An LLM span's attributes: OpenInference's `llm.token_count.*`, else the OTel GenAI
    conventions' `gen_ai.usage.*` (the deprecated names too). Both count the cache parts in
    the input."""
    if not attributes:
        return None

    def pick(*keys: str) -> int | None:
        return next((v for k in keys if (v := _n(attributes.get(k))) is not None), None)

    oi = _from_total(pick(OI_PROMPT), pick(OI_CACHE_READ), pick(OI_CACHE_WRITE), pick(OI_COMPLETION))
    if oi is not None:
        return oi
    return _from_total(
        pick(*GENAI_INPUT), pick(*GENAI_CACHE_READ), pick(*GENAI_CACHE_WRITE), pick(*GENAI_OUTPUT)
    )


def clean(usage: Mapping[str, Any]) -> Usage | None:
    """A wire `usage` dict made valid: the four counts (0 when missing or not a count) and
    `estimated` (a bool); None when it has no count at all."""
    counts = [_n(usage.get(k)) for k in COUNTS]
    if all(c is None for c in counts):
        return None
    out: Usage = {k: c or 0 for k, c in zip(COUNTS, counts, strict=True)}
    out["estimated"] = usage.get("estimated") is True
    return out


def of(usage: Any) -> Usage | None:
    """Any of the above, told apart by its fields: a wire dict, OTel span attributes, LangChain
    `usage_metadata`, OpenAI chat or Responses usage, the Agents SDK's `Usage`, Anthropic's."""
    if usage is None:
        return None
    try:
        if isinstance(usage, Mapping):
            if any(k in usage for k in ("cache_read_tokens", "cache_write_tokens", "estimated")):
                return clean(usage)
            if any(isinstance(k, str) and k.startswith(("llm.token_count.", "gen_ai.usage.")) for k in usage):
                return from_otel(usage)
        if _get(usage, "input_token_details") is not None:
            return from_langchain(usage)
        if _get(usage, "prompt_tokens") is not None:
            return from_openai(usage)
        if _get(usage, "input_tokens_details") is not None:
            return from_agents_sdk(usage)
        return from_anthropic(usage)  # also a bare {input_tokens, output_tokens}: no cache parts
    except Exception:  # a framework object we cannot read: no usage, never a failed step
        return None


def estimated(input_tokens: int, output_tokens: int) -> Usage:
    """A usage estimated from a step's text (the provider reported none): all input at the
    plain price, marked `estimated`."""
    return {
        "input_tokens": _n(input_tokens) or 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "output_tokens": _n(output_tokens) or 0,
        "estimated": True,
    }


def total(usage: Mapping[str, Any]) -> int:
    """Every token of the call (the step's `tokens` when the agent gave none), capped at 2**53."""
    return min(sum(_n(usage.get(k)) or 0 for k in COUNTS), TOKENS_MAX)
