from __future__ import annotations

import copy

import pytest

from streams.agent.client import Decision
from streams.agent.compose import (
    REASONBLOCKS_MARKER,
    anthropic_request,
    anthropic_system,
    injection_of,
    model_of,
    openai_system_message,
    plain_system,
    run_tag,
    with_system,
)
from tests.unit.agent.fake_client import sent

BASE = "You are a careful coding agent."
INJECTION = f"{REASONBLOCKS_MARKER}\n- Re-read the failing test before editing.\n- Check the import path."
SENT = sent(INJECTION, "run-1")  # as the request carries it: the header tagged with the run's tag
EPHEMERAL = {"type": "ephemeral"}


def decision(
    injection: str | None = INJECTION, inject: bool = True, model: str | None = None
) -> dict[str, object]:
    return {
        "run_id": "run-1",
        "step": 3,
        "fsm_state": "struggling",
        "inject": inject,
        "injection_text": injection,
        "model": model,
    }


# --- injection_of ---------------------------------------------------------------------------


def test_injection_of_returns_text_when_injecting():
    assert injection_of(decision()) == SENT


def test_injection_of_none_decision_is_unsteered():
    assert injection_of(None) is None


@pytest.mark.parametrize("text", [None, "", "   \n"])
def test_injection_of_empty_text_is_nothing(text):
    assert injection_of(decision(injection=text)) is None


def test_injection_of_respects_inject_false():
    assert injection_of(decision(inject=False)) is None


def test_injection_of_without_inject_key_uses_text():
    assert injection_of({"injection_text": INJECTION}) == INJECTION


def test_injection_of_accepts_object_with_data():
    assert injection_of(Decision(data=decision(), latency_ms=1.0)) == SENT


def test_injection_of_rejects_unknown_type():
    with pytest.raises(TypeError):
        injection_of(42)  # type: ignore[arg-type]


# --- anthropic_system -----------------------------------------------------------------------


def test_base_block_keeps_cache_control_with_injection():
    blocks = anthropic_system(BASE, decision())
    assert blocks[0] == {"type": "text", "text": BASE, "cache_control": EPHEMERAL}


def test_base_block_keeps_cache_control_without_injection():
    blocks = anthropic_system(BASE, decision(injection=None, inject=False))
    assert blocks == [{"type": "text", "text": BASE, "cache_control": EPHEMERAL}]


def test_injection_block_is_separate_uncached_and_starts_with_marker():
    blocks = anthropic_system(BASE, decision())
    assert len(blocks) == 2
    inj = blocks[1]
    assert inj == {"type": "text", "text": SENT}
    assert "cache_control" not in inj
    assert inj["text"].splitlines()[0] == f"[REASONBLOCKS {run_tag('run-1')}]"  # the run's tag (issue 49)


def test_no_injection_gives_only_the_base_block_and_no_empty_block():
    for d in (decision(injection=None), decision(injection=""), decision(inject=False)):
        blocks = anthropic_system(BASE, d)
        assert len(blocks) == 1
        assert all(b["text"] for b in blocks)


def test_late_none_decision_is_unsteered_base_only():
    assert anthropic_system(BASE, None) == [{"type": "text", "text": BASE, "cache_control": EPHEMERAL}]


def test_empty_base_string_gives_only_the_injection_block():
    assert anthropic_system("", decision()) == [{"type": "text", "text": SENT}]
    assert anthropic_system("", None) == []


def test_block_list_base_gets_cache_control_on_last_block_and_is_not_mutated():
    base = [
        {"type": "text", "text": "Tools policy.", "cache_control": {"type": "ephemeral", "ttl": "1h"}},
        {"type": "text", "text": "Project notes."},
        {"type": "text", "text": BASE},
    ]
    snapshot = copy.deepcopy(base)
    blocks = anthropic_system(base, decision())
    assert base == snapshot
    assert blocks[0] == snapshot[0]  # existing marker untouched
    assert "cache_control" not in blocks[1]
    assert blocks[2] == {"type": "text", "text": BASE, "cache_control": EPHEMERAL}
    assert blocks[3] == {"type": "text", "text": SENT}
    assert all(b is not o for b, o in zip(blocks, base, strict=False))


def test_block_list_base_keeps_existing_marker_on_last_block():
    base = [{"type": "text", "text": BASE, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    blocks = anthropic_system(base, None)
    assert blocks == base
    assert blocks[0] is not base[0]


def test_recomposing_drops_stale_injection_blocks():
    first = anthropic_system(BASE, decision())
    second = anthropic_system(first, decision(injection=f"{REASONBLOCKS_MARKER}\n- new advice"))
    assert [b["text"] for b in second] == [BASE, sent(f"{REASONBLOCKS_MARKER}\n- new advice", "run-1")]
    assert anthropic_system(first, None) == [{"type": "text", "text": BASE, "cache_control": EPHEMERAL}]


def test_output_is_fresh_each_call():
    a = anthropic_system(BASE, decision())
    a[0]["cache_control"]["type"] = "changed"
    assert anthropic_system(BASE, decision())[0]["cache_control"] == EPHEMERAL


# --- openai ---------------------------------------------------------------------------------


def test_openai_system_message_shape():
    assert openai_system_message(BASE, decision()) == {
        "role": "system",
        "content": [
            {"type": "text", "text": BASE, "cache_control": EPHEMERAL},
            {"type": "text", "text": SENT},
        ],
    }


def test_openai_system_message_without_injection_has_only_base_part():
    assert openai_system_message(BASE, None)["content"] == [
        {"type": "text", "text": BASE, "cache_control": EPHEMERAL}
    ]


def _history():
    return [
        {"role": "system", "content": BASE},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t1"}]},
        {"role": "tool", "tool_call_id": "t1", "content": "ok"},
    ]


def test_with_system_system_placement_keeps_history_objects_identical_and_in_order():
    messages = _history()
    snapshot = copy.deepcopy(messages)
    ids = [id(m) for m in messages]
    out = with_system(messages, decision(), placement="system")
    assert out is not messages
    assert messages == snapshot
    assert [id(m) for m in messages] == ids
    assert len(out) == len(messages)
    for new, old in zip(out[1:], messages[1:], strict=True):
        assert new is old
    assert out[0] == openai_system_message(BASE, decision())
    assert out[0] is not messages[0]


def test_with_system_system_placement_uses_base_when_history_has_no_system_message():
    messages = _history()[1:]
    out = with_system(messages, decision(), base=BASE, placement="system")
    assert out[0] == openai_system_message(BASE, decision())
    assert all(n is o for n, o in zip(out[1:], messages, strict=True))
    assert len(messages) == 3


def test_with_system_without_base_or_injection_adds_nothing():
    messages = _history()[1:]
    out = with_system(messages, None)
    assert out == messages
    assert out is not messages


def test_with_system_system_placement_late_decision_keeps_base_only():
    out = with_system(_history(), None, placement="system")
    assert out[0]["content"] == [{"type": "text", "text": BASE, "cache_control": EPHEMERAL}]


def test_with_system_system_placement_recomposition_does_not_stack_injections():
    once = with_system(_history(), decision(), placement="system")
    twice = with_system(once, decision(injection=f"{REASONBLOCKS_MARKER}\n- later"), placement="system")
    assert [p["text"] for p in twice[0]["content"]] == [
        BASE,
        sent(f"{REASONBLOCKS_MARKER}\n- later", "run-1"),
    ]


def test_with_system_system_placement_plain_provider_emits_string_content():
    out = with_system(_history(), decision(), provider="plain", placement="system")
    assert out[0] == {"role": "system", "content": f"{BASE}\n\n{SENT}"}


def test_with_system_rejects_unknown_provider():
    with pytest.raises(ValueError):
        with_system(_history(), None, provider="bedrock")  # type: ignore[arg-type]


# --- plain string ---------------------------------------------------------------------------


def test_plain_system_appends_injection_after_blank_line():
    assert plain_system(BASE, decision()) == f"{BASE}\n\n{SENT}"


def test_plain_system_without_injection_is_base():
    assert plain_system(BASE, None) == BASE
    assert plain_system(BASE, decision(inject=False)) == BASE


def test_plain_system_empty_base_is_injection_alone():
    assert plain_system("", decision()) == SENT


# --- anthropic request ----------------------------------------------------------------------


def _request():
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": BASE,
        "messages": [{"role": "user", "content": "Fix the bug."}],
    }


def test_anthropic_request_system_placement_routes_model_and_leaves_messages_untouched():
    req = _request()
    snapshot = copy.deepcopy(req)
    out = anthropic_request(req, decision(model="claude-haiku-4-5"), placement="system")
    assert req == snapshot
    assert out is not req
    assert out["model"] == "claude-haiku-4-5"
    assert out["messages"] is req["messages"]
    assert out["messages"] == snapshot["messages"]
    assert out["max_tokens"] == 1024
    assert out["system"] == anthropic_system(BASE, decision())


def test_anthropic_request_keeps_model_when_not_routed():
    out = anthropic_request(_request(), decision(model=None))
    assert out["model"] == "claude-sonnet-4-5"


def test_anthropic_request_system_placement_late_decision_is_unsteered():
    out = anthropic_request(_request(), None, placement="system")
    assert out["model"] == "claude-sonnet-4-5"
    assert out["system"] == [{"type": "text", "text": BASE, "cache_control": EPHEMERAL}]


def test_anthropic_request_system_placement_without_system_or_injection_has_no_system_key():
    req = _request()
    del req["system"]
    assert "system" not in anthropic_request(req, None, placement="system")
    assert anthropic_request(req, decision(), placement="system")["system"] == [
        {"type": "text", "text": SENT}
    ]


def test_decision_object_with_data_works_everywhere():
    d = Decision(data=decision(model="claude-haiku-4-5"), latency_ms=12.0)
    assert model_of(d) == "claude-haiku-4-5"
    assert anthropic_system(BASE, d) == anthropic_system(BASE, d.data)
    assert plain_system(BASE, d) == f"{BASE}\n\n{SENT}"
    assert anthropic_request(_request(), d)["model"] == "claude-haiku-4-5"
    assert with_system(_history(), d, placement="system")[0] == openai_system_message(BASE, d.data)
    assert with_system(_history(), d)[-1] == {"role": "user", "content": SENT}
