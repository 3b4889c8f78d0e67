"""Each framework's usage report, in its real shape (the installed SDKs' own types where they
are installed), maps to the step's `usage`: four disjoint counts that add up to the call."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from agents import Usage as AgentsUsage
from langchain_core.messages import AIMessage
from langchain_core.messages.ai import InputTokenDetails, UsageMetadata
from openai.types import CompletionUsage
from openai.types.completion_usage import PromptTokensDetails
from openai.types.responses import ResponseUsage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from openinference.semconv.trace import SpanAttributes
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai

from streams.agent import usage as u
from streams.agent.client import step_event
from streams.core.events import Limits, decode
from streams.shared.contract import TOKENS_MAX


def wire(plain: int, read: int, write: int, out: int, estimated: bool = False) -> dict[str, Any]:
    return {
        "input_tokens": plain,
        "cache_read_tokens": read,
        "cache_write_tokens": write,
        "output_tokens": out,
        "estimated": estimated,
    }


# An Anthropic Messages response's `usage` as the API sends it (the `anthropic` SDK is not a
# dependency: its `Usage` model has exactly these fields; the Claude Agent SDK hands it as a dict).
ANTHROPIC = {
    "input_tokens": 35,
    "cache_creation_input_tokens": 1_200,
    "cache_read_input_tokens": 18_000,
    "cache_creation": {"ephemeral_5m_input_tokens": 1_200, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 240,
    "service_tier": "standard",
}


class AnthropicUsageObject:
    """The SDK object form: attributes, not keys."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def test_anthropic_input_tokens_are_the_uncached_part() -> None:
    assert u.from_anthropic(ANTHROPIC) == wire(35, 18_000, 1_200, 240)
    assert u.from_anthropic(AnthropicUsageObject(**ANTHROPIC)) == wire(35, 18_000, 1_200, 240)
    assert u.of(ANTHROPIC) == wire(35, 18_000, 1_200, 240)
    assert u.total(u.of(ANTHROPIC) or {}) == 35 + 18_000 + 1_200 + 240


def test_openai_chat_usage_subtracts_cached_tokens_from_prompt_tokens() -> None:
    usage = CompletionUsage(
        prompt_tokens=12_000,
        completion_tokens=300,
        total_tokens=12_300,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=11_264),
    )
    assert u.from_openai(usage) == wire(736, 11_264, 0, 300)
    assert u.of(usage) == wire(736, 11_264, 0, 300)
    assert u.of(usage.model_dump()) == wire(736, 11_264, 0, 300)  # the JSON body too
    no_details = CompletionUsage(prompt_tokens=900, completion_tokens=10, total_tokens=910)
    assert u.of(no_details) == wire(900, 0, 0, 10)


def test_openai_compatible_cache_writes_and_hit_counts_are_read() -> None:
    gateway = CompletionUsage(
        prompt_tokens=5_000,
        completion_tokens=50,
        total_tokens=5_050,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=0, cache_write_tokens=4_000),
    )
    assert u.of(gateway) == wire(1_000, 0, 4_000, 50)
    deepseek = {"prompt_tokens": 800, "completion_tokens": 20, "prompt_cache_hit_tokens": 640}
    assert u.of(deepseek) == wire(160, 640, 0, 20)


def test_openai_responses_usage_and_the_agents_sdk_usage_include_cached_input() -> None:
    resp = ResponseUsage(
        input_tokens=9_000,
        input_tokens_details=InputTokensDetails(cached_tokens=8_192, cache_write_tokens=0),
        output_tokens=120,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=64),
        total_tokens=9_120,
    )
    assert u.of(resp) == wire(808, 8_192, 0, 120)
    sdk = AgentsUsage(
        requests=1,
        input_tokens=9_000,
        input_tokens_details=InputTokensDetails(cached_tokens=8_192, cache_write_tokens=0),
        output_tokens=120,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=64),
        total_tokens=9_120,
    )
    assert u.from_agents_sdk(sdk) == wire(808, 8_192, 0, 120)
    assert u.of(sdk) == wire(808, 8_192, 0, 120)


def test_langchain_usage_metadata_with_cache_details() -> None:
    meta = UsageMetadata(
        input_tokens=20_035,  # langchain-anthropic: input + cache read + cache creation
        output_tokens=240,
        total_tokens=20_275,
        input_token_details=InputTokenDetails(cache_read=18_000, cache_creation=2_000),
    )
    msg = AIMessage(content="ok", usage_metadata=meta)
    assert u.from_langchain(msg.usage_metadata) == wire(35, 18_000, 2_000, 240)
    assert u.of(msg.usage_metadata) == wire(35, 18_000, 2_000, 240)
    plain = UsageMetadata(input_tokens=10, output_tokens=5, total_tokens=15)
    assert u.of(plain) == wire(10, 0, 0, 5)


def test_otel_genai_and_openinference_attributes() -> None:
    genai_attrs = {
        genai.GEN_AI_USAGE_INPUT_TOKENS: 3_000,
        genai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 2_500,
        genai.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: 400,
        genai.GEN_AI_USAGE_OUTPUT_TOKENS: 70,
    }
    assert u.from_otel(genai_attrs) == wire(100, 2_500, 400, 70)
    assert u.of(genai_attrs) == wire(100, 2_500, 400, 70)
    deprecated = {"gen_ai.usage.prompt_tokens": 50, "gen_ai.usage.completion_tokens": 5}
    assert u.from_otel(deprecated) == wire(50, 0, 0, 5)
    oi = {
        SpanAttributes.LLM_TOKEN_COUNT_PROMPT: 12_000,
        SpanAttributes.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_READ: 10_000,
        SpanAttributes.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_WRITE: 1_500,
        SpanAttributes.LLM_TOKEN_COUNT_COMPLETION: 80,
        SpanAttributes.LLM_TOKEN_COUNT_TOTAL: 12_080,
    }
    assert u.from_otel(oi) == wire(500, 10_000, 1_500, 80)
    assert u.from_otel({}) is None and u.from_otel({"gen_ai.request.model": "x"}) is None


def test_an_input_count_smaller_than_its_cache_parts_is_taken_as_the_plain_part() -> None:
    """A producer that reports Anthropic's uncached count under a 'total' name: never negative."""
    attrs = {genai.GEN_AI_USAGE_INPUT_TOKENS: 35, genai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 18_000}
    assert u.from_otel(attrs) == wire(35, 18_000, 0, 0)


@pytest.mark.parametrize(
    "bad",
    [
        None,
        42,
        "lots",
        {"input_tokens": -5, "output_tokens": "7"},
        {"input_tokens": True},
        {"input_tokens": 1.5},
        {"prompt_tokens": float("nan")},
        object(),
    ],
)
def test_what_cannot_be_read_is_no_usage_never_an_error(bad: Any) -> None:
    assert u.of(bad) is None


def test_counts_are_capped_and_wire_dicts_are_cleaned() -> None:
    assert u.of({"input_tokens": 2**70, "output_tokens": 1}) == wire(TOKENS_MAX, 0, 0, 1)
    assert u.of({"cache_read_tokens": 5, "output_tokens": -1, "estimated": "yes", "x": 1}) == wire(0, 5, 0, 0)
    assert u.of({"input_tokens": 10, "output_tokens": 3, "estimated": True}) == wire(10, 0, 0, 3, True)
    assert u.estimated(1_000, 50) == wire(1_000, 0, 0, 50, True)


class Raises:
    @property
    def input_tokens(self) -> int:
        raise RuntimeError("lazy field failed")


def test_a_framework_object_whose_field_raises_gives_no_usage() -> None:
    assert u.of(Raises()) is None


# -- the step event ----------------------------------------------------------------------------


def test_the_step_event_carries_usage_and_served_model_and_the_worker_accepts_it() -> None:
    usage = CompletionUsage(
        prompt_tokens=12_000,
        completion_tokens=300,
        total_tokens=12_300,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=11_264),
    )
    ev = step_event("r1", 3, action="bash", usage=usage, served_model="gpt-4.1-2025-04-14" + "x" * 400)
    assert ev["usage"] == wire(736, 11_264, 0, 300)
    assert ev["tokens"] == 12_300  # from the usage when the agent gave no total
    assert ev["served_model"] == ("gpt-4.1-2025-04-14" + "x" * 400)[:256]
    assert decode(orjson.dumps(ev), Limits())["usage"] == ev["usage"]
    assert step_event("r1", 3, tokens=99, usage=usage)["tokens"] == 99  # the agent's own total wins


def test_a_step_without_usage_is_the_event_of_before() -> None:
    ev = step_event("r1", 1, thought="t", tokens=5, model_id="m")
    assert "usage" not in ev and "served_model" not in ev
    assert "usage" not in step_event("r1", 1, usage=object()) and "usage" not in step_event("r1", 1, usage={})
    decode(orjson.dumps(ev), Limits())
