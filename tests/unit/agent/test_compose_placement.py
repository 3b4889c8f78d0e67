"""The default placement keeps the prompt cache: the steering text goes after everything the
agent sent, so what the provider cached (tools, system, history, in that order) is a byte-for-
byte prefix of the steered request, and the caller's objects are never changed."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from streams.agent.client import Decision
from streams.agent.compose import (
    PLACEMENTS,
    REASONBLOCKS_MARKER,
    anthropic_messages,
    anthropic_request,
    openai_messages,
    with_system,
)
from streams.agent.session import Steering, SteeringSession
from tests.unit.agent.fake_client import FakeClient
from tests.unit.agent.fake_client import sent as tagged

BASE = "You are a careful coding agent."
INJECTION = (
    f"{REASONBLOCKS_MARKER}\n- You ran `pytest -x` 3 times with the same result: read the error first."
)
LATER = f"{REASONBLOCKS_MARKER}\n- Check the import path before editing again."
SENT = tagged(INJECTION)  # as the request carries it: the header tagged with the run's tag (issue 49)
EPHEMERAL = {"type": "ephemeral"}


def decision(text: str | None = INJECTION, model: str | None = None) -> dict[str, Any]:
    return {
        "run_id": "r",
        "step": 3,
        "fsm_state": "STRUGGLING",
        "inject": text is not None,
        "injection_text": text,
        "model": model,
    }


# -- the provider's order -----------------------------------------------------------------------


def _blocks(content: Any) -> list[Any]:
    """Content as the API reads it: a string is one text block."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def anthropic_prompt(request: dict[str, Any]) -> list[bytes]:
    """An Anthropic request as the prefix the cache sees: tools, then system, then each
    message's blocks in order (one line per block, cache_control included)."""
    out = [orjson.dumps(["tool", t], option=orjson.OPT_SORT_KEYS) for t in request.get("tools", [])]
    system = request.get("system")
    if system:
        out += [orjson.dumps(["system", b], option=orjson.OPT_SORT_KEYS) for b in _blocks(system)]
    for i, m in enumerate(request["messages"]):
        out += [
            orjson.dumps(["msg", i, m["role"], b], option=orjson.OPT_SORT_KEYS) for b in _blocks(m["content"])
        ]
    return out


def openai_prompt(messages: list[dict[str, Any]]) -> list[bytes]:
    return [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in messages]


def tool_turn_request(cache_last: bool = True) -> dict[str, Any]:
    """A request after a tool call: the last user turn holds tool_result blocks only, the last
    carrying the caller's cache breakpoint (the pattern Anthropic documents for agents)."""
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": "t2", "content": "1 failed"}
    if cache_last:
        result["cache_control"] = dict(EPHEMERAL)
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "tools": [{"name": "bash", "description": "Run a command.", "input_schema": {"type": "object"}}],
        "system": [{"type": "text", "text": BASE, "cache_control": dict(EPHEMERAL)}],
        "messages": [
            {"role": "user", "content": "Fix the failing test."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"c": "pytest -x"}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1 failed"}],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t2", "name": "bash", "input": {"c": "pytest -x"}}],
            },
            {"role": "user", "content": [result]},
        ],
    }


# -- Anthropic shape ----------------------------------------------------------------------------


def test_the_unsteered_anthropic_prompt_is_a_byte_prefix_of_the_steered_one() -> None:
    req = tool_turn_request()
    before, after = anthropic_prompt(req), anthropic_prompt(anthropic_request(req, decision()))
    assert after[: len(before)] == before
    assert after[len(before) :] == [orjson.dumps(["msg", 4, "user", {"text": SENT, "type": "text"}])]


def test_the_steering_block_follows_the_tool_results_in_the_last_user_turn() -> None:
    out = anthropic_request(tool_turn_request(), decision())
    last = out["messages"][-1]
    assert last["role"] == "user" and len(out["messages"]) == 5
    assert [b["type"] for b in last["content"]] == ["tool_result", "text"]  # tool_result blocks first
    assert last["content"][-1] == {"type": "text", "text": SENT}


def test_the_callers_cache_breakpoint_stays_on_its_block_and_still_covers_the_history() -> None:
    req = tool_turn_request()
    out = anthropic_request(req, decision())
    marked = [
        (i, j)
        for i, m in enumerate(out["messages"])
        if isinstance(m["content"], list)
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]
    assert marked == [(4, 0)]  # the caller's one breakpoint, not moved, none added
    assert "cache_control" not in out["messages"][4]["content"][-1]  # the steering block is after it
    assert out["system"] is req["system"] and out["tools"] is req["tools"]


def test_the_callers_request_and_history_are_never_changed() -> None:
    req = tool_turn_request()
    snapshot = copy.deepcopy(req)
    out = anthropic_request(req, decision(model="claude-haiku-4-5"))
    assert req == snapshot
    assert out["model"] == "claude-haiku-4-5" and req["model"] == "claude-sonnet-4-5"
    assert all(a is b for a, b in zip(out["messages"][:4], req["messages"][:4], strict=True))
    assert out["messages"][4] is not req["messages"][4]
    assert out["messages"][4]["content"][0] is req["messages"][4]["content"][0]  # the block itself, untouched


def test_a_string_user_turn_becomes_its_text_block_then_the_steering_block() -> None:
    req = {"model": "m", "system": BASE, "messages": [{"role": "user", "content": "Fix the bug."}]}
    snapshot = copy.deepcopy(req)
    out = anthropic_request(req, decision())
    assert out["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Fix the bug."}, {"type": "text", "text": SENT}],
        }
    ]
    assert out["system"] == BASE  # the system prompt as sent: no block, no breakpoint added
    assert req == snapshot
    before = anthropic_prompt(req)
    assert anthropic_prompt(out)[: len(before)] == before


def test_a_prefill_keeps_its_place_after_the_steered_user_turn() -> None:
    messages = [{"role": "user", "content": "Answer in JSON."}, {"role": "assistant", "content": "{"}]
    out = anthropic_messages(messages, decision())
    assert out[1] is messages[1] and out[0]["content"][-1]["text"] == SENT


def test_no_user_turn_gets_one_holding_the_steering_text() -> None:
    assert anthropic_messages([], decision()) == [
        {"role": "user", "content": [{"type": "text", "text": SENT}]}
    ]


def test_nothing_to_inject_passes_the_messages_through_as_the_same_object() -> None:
    req = tool_turn_request()
    for d in (None, decision(None)):
        out = anthropic_request(req, d)
        assert out["messages"] is req["messages"] and out == req


def test_composing_a_composed_request_again_replaces_the_steering_block() -> None:
    req = tool_turn_request()
    once = anthropic_request(req, decision())
    twice = anthropic_request(once, decision(LATER))
    assert [b.get("text") for b in twice["messages"][-1]["content"]] == [None, tagged(LATER)]
    assert anthropic_request(once, None)["messages"][-1]["content"] == req["messages"][-1]["content"]


def test_each_calls_cached_part_is_the_start_of_the_next_call_and_system_placement_breaks_it() -> None:
    """Three calls of one run with a different steering text each: with the default placement,
    call k's prompt up to its steering block is a prefix of call k+1's prompt (the cache hits on
    the whole history); with `placement="system"` it stops at the base prompt."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    own: list[list[bytes]] = []
    sent: dict[str, list[list[bytes]]] = {"end": [], "system": []}
    for k, text in enumerate([INJECTION, None, LATER]):
        req = {"model": "m", "system": BASE, "messages": list(history)}
        own.append(anthropic_prompt(req))
        for placement in PLACEMENTS:
            composed = anthropic_request(req, decision(text), placement=placement)
            sent[placement].append(anthropic_prompt(composed))
        history += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{k}", "name": "bash", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": "1 failed"}],
            },
        ]
    for k in range(2):
        cached = own[k]  # call k's prompt up to its steering block
        assert sent["end"][k][: len(cached)] == cached
        assert sent["end"][k + 1][: len(cached)] == cached  # call k+1 reads it all from the cache
    for k in range(2):
        before, after = sent["system"][k], sent["system"][k + 1]
        shared = next(i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b)
        assert shared == 1  # only the base system block: the history after it is written again


# -- OpenAI chat shape --------------------------------------------------------------------------


def chat_history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": BASE},
        {"role": "user", "content": "Fix the bug."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "1 failed"},
    ]


def test_the_openai_steering_text_is_a_trailing_user_message_after_the_tool_result() -> None:
    messages = chat_history()
    snapshot = copy.deepcopy(messages)
    out = with_system(messages, decision())
    assert messages == snapshot and len(out) == 5
    assert all(a is b for a, b in zip(out, messages, strict=False))  # the same objects, system included
    assert out[-1] == {"role": "user", "content": SENT}
    assert openai_prompt(out)[:4] == openai_prompt(messages)


def test_openai_base_is_put_first_as_given_and_nothing_else_changes() -> None:
    messages = chat_history()[1:]
    out = with_system(messages, decision(), base=BASE)
    assert out[0] == {"role": "system", "content": BASE} and out[1:4] == messages
    assert with_system(messages, None) == messages
    blocks = [{"type": "text", "text": BASE, "cache_control": EPHEMERAL}]
    assert with_system(messages, None, base=blocks)[0] == {"role": "system", "content": blocks}
    assert with_system(messages, None, base=blocks, provider="plain")[0] == {
        "role": "system",
        "content": BASE,
    }


def test_openai_recomposition_replaces_the_trailing_steering_message() -> None:
    once = openai_messages(chat_history(), decision())
    assert (
        openai_messages(once, decision(LATER))[-1]["content"] == tagged(LATER)
        and len(openai_messages(once, decision(LATER))) == 5
    )
    assert openai_messages(once, None) == chat_history()


def test_an_unknown_placement_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="placement must be 'end' or 'system'"):
        anthropic_request(tool_turn_request(), decision(), placement="start")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="placement"):
        with_system(chat_history(), decision(), placement="middle")  # type: ignore[arg-type]


# -- the session's Steering ---------------------------------------------------------------------


def test_steering_places_at_the_end_by_default_and_in_the_system_when_asked() -> None:
    d = Decision(data=decision(), latency_ms=1.0)
    req = {"model": "m", "system": BASE, "messages": [{"role": "user", "content": "Go."}]}
    end = Steering(2, d, "m").request(req)
    assert end["system"] == BASE and end["messages"][-1]["content"][-1]["text"] == SENT
    system = Steering(2, d, "m", "system").request(req)
    assert system["system"][-1] == {"type": "text", "text": SENT} and system["messages"] is req["messages"]
    assert Steering(2, d, "m").messages(chat_history())[-1] == {"role": "user", "content": SENT}
    assert Steering(2, d, "m", "system").messages(chat_history())[0]["content"][-1]["text"] == SENT


def test_a_session_hands_its_placement_to_each_steering_and_refuses_an_unknown_one() -> None:
    client = FakeClient(lambda k: decision())
    s = SteeringSession(client, model="m", placement="system")  # type: ignore[arg-type]
    s.start()
    assert s.begin_step().placement == "system"
    assert SteeringSession(client, model="m").placement == "end"  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="placement"):
        SteeringSession(client, model="m", placement="top")  # type: ignore[arg-type]
