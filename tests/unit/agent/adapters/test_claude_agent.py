"""The Claude Agent SDK hooks, decisions scripted (no broker, no worker): what each hook
publishes and what it hands back to Claude Code, called as the SDK calls them and through the
SDK's own `query()` / `ClaudeSDKClient` on a scripted CLI."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient, HookMatcher, query
from claude_agent_sdk.types import TextBlock, ToolUseBlock

from examples.scripted_cli import ScriptedCLI, load, repeated
from streams.agent.adapters.claude_agent import (
    STOP_PREFIX,
    ClaudeAgentSteering,
    observation_of,
    step_fields,
    tokens_of,
)
from streams.agent.session import STOPPED_OUTCOME
from tests.unit.agent.fake_client import FakeClient, decision, sent, stop

CTX: Any = {"signal": None}  # what the SDK passes as the hook context
FIX = load("fix_session")
LOOP = load("loop_session")


def hook_inputs(event: str, recording: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return [
        copy.deepcopy(f["hook"])
        for f in recording or FIX["frames"]
        if "hook" in f and f["hook"]["hook_event_name"] == event
    ]


def inject(k: int, text: str = "Stop rerunning the test.") -> dict[str, Any]:
    return decision(k, inject=True, injection_text=f"[REASONBLOCKS]\n{text}", action="nudge")


def steering(client: FakeClient, **kw: Any) -> ClaudeAgentSteering:
    return ClaudeAgentSteering(client, model="claude-sonnet-4-5", **kw)  # type: ignore[arg-type]


def steps(client: FakeClient) -> list[dict[str, Any]]:
    return [f for k, _, f in client.events if k == "step"]


async def call(hook: Any, data: dict[str, Any]) -> Any:
    """As the SDK's Query does: `await callback(input, tool_use_id, {"signal": None})`."""
    return await hook(data, data.get("tool_use_id"), CTX)


def test_the_hooks_are_accepted_by_the_sdk_options() -> None:
    st = steering(FakeClient())
    hooks = st.hooks()
    options = ClaudeAgentOptions(hooks=hooks)
    assert options.hooks is hooks
    assert set(hooks) == {"UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop"}
    for matchers in hooks.values():
        assert all(isinstance(m, HookMatcher) and m.matcher is None for m in matchers)
        assert all(asyncio.iscoroutinefunction(h) for m in matchers for h in m.hooks)


def test_a_tool_call_is_a_step_and_its_decision_comes_back_as_additional_context() -> None:
    client = FakeClient(lambda k: inject(k) if k == 1 else decision(k))
    st = steering(client)
    read = hook_inputs("PostToolUse")[0]

    async def go() -> tuple[Any, Any]:
        first = await call(st.on_user_prompt_submit, hook_inputs("UserPromptSubmit")[0])
        return first, await call(st.on_post_tool_use, read)

    first, out = asyncio.run(go())
    assert first == {}  # decision 0 injects nothing
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "PostToolUse",
            "additionalContext": sent("[REASONBLOCKS]\nStop rerunning the test."),
        }
    }
    (ev,) = steps(client)
    assert ev["action"] == "Read" and ev["action_input"] == read["tool_input"]
    assert ev["observation"].startswith("import time") and "agent" not in ev
    start = client.events[0][2]
    assert start["task"].startswith("tests/test_session.py::test_expired fails")
    assert start["framework"] == "claude-agent-sdk"


def test_a_failed_tool_call_is_an_error_step() -> None:
    client = FakeClient(lambda k: inject(k))
    st = steering(client)
    failed = hook_inputs("PostToolUseFailure", LOOP["round"])[0]
    out = asyncio.run(call(st.on_post_tool_use_failure, failed))
    assert out["hookSpecificOutput"]["hookEventName"] == "PostToolUseFailure"
    (ev,) = steps(client)
    assert ev["observation_is_error"] is True and ev["action"] == "Bash"
    assert ev["observation"].startswith("Exit code 1") and "KeyError: 'expires_at'" in ev["observation"]
    assert client.events[0][0] == "run_start"  # no UserPromptSubmit seen: the first tool hook starts it


def test_who_made_a_tool_call_is_the_steps_agent() -> None:
    grep = next(h for h in hook_inputs("PostToolUse") if h["tool_name"] == "Grep")
    assert step_fields(grep)["agent"] == "Explore:a4f1c9e2b7d3"  # a Task sub-agent
    main = hook_inputs("PostToolUse")[0]
    assert "agent" not in step_fields(main)
    assert step_fields(main, "lead")["agent"] == "lead"
    # a named main thread leads the run even after a sub-agent's steps; a sub-agent never does
    assert step_fields(main, "lead")["lead"] is True and "lead" not in step_fields(grep)
    assert step_fields({**main, "agent_type": "reviewer"})["agent"] == "reviewer"  # a --agent session


def test_a_stop_ends_the_session_the_sdk_way_and_says_why() -> None:
    client = FakeClient(lambda k: stop(k) if k >= 2 else decision(k))
    st = steering(client)
    rounds = repeated(LOOP["round"], 4)
    failures = hook_inputs("PostToolUseFailure", rounds)
    pre = hook_inputs("PreToolUse", rounds)

    async def go() -> list[Any]:
        await call(st.on_user_prompt_submit, copy.deepcopy(LOOP["prompt"]))
        outs = [await call(st.on_post_tool_use_failure, f) for f in failures[:3]]
        return [*outs, await call(st.on_pre_tool_use, pre[3])]

    outs = asyncio.run(go())
    why = "You were warned at step 2 and ran the same call again at steps 3, 4."
    assert outs[0] == {}
    assert outs[1] == {"continue_": False, "stopReason": f"{STOP_PREFIX} {why}"}
    assert outs[2] == outs[1]  # a later tool hook (a parallel call, a sub-agent) stops too
    assert outs[3]["continue_"] is False
    assert outs[3]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert len(steps(client)) == 2  # nothing published after the stop
    assert client.outcome() == STOPPED_OUTCOME
    assert st.stop_reason(LOOP["prompt"]["session_id"]) == why


def test_the_stop_hook_finishes_the_run() -> None:
    client = FakeClient()
    st = steering(client)

    async def go() -> None:
        await call(st.on_user_prompt_submit, hook_inputs("UserPromptSubmit")[0])
        await call(st.on_post_tool_use, hook_inputs("PostToolUse")[0])
        assert await call(st.on_stop, hook_inputs("Stop")[0]) == {}

    asyncio.run(go())
    assert client.kinds() == ["run_start", "step 1", "run_finish"] and client.outcome() == "success"


def test_without_end_on_stop_a_conversation_is_one_run_until_it_is_ended() -> None:
    client = FakeClient()
    st = steering(client, end_on_stop=False)
    sid = FIX["frames"][0]["hook"]["session_id"]

    async def go() -> None:
        for _ in range(2):  # two turns of one ClaudeSDKClient conversation
            await call(st.on_user_prompt_submit, hook_inputs("UserPromptSubmit")[0])
            await call(st.on_post_tool_use, hook_inputs("PostToolUse")[0])
            await call(st.on_stop, hook_inputs("Stop")[0])
        await st.aend_session(sid)

    asyncio.run(go())
    assert client.kinds() == ["run_start", "step 1", "step 2", "run_finish"]


def test_a_block_that_raises_finishes_its_runs_as_failures() -> None:
    client = FakeClient()
    st = steering(client)

    async def go() -> None:
        async with st.arun():
            await call(st.on_post_tool_use, hook_inputs("PostToolUse")[0])
            raise ConnectionError("the CLI died")

    with pytest.raises(ConnectionError):
        asyncio.run(go())
    assert client.outcome() == "failure: ConnectionError"


def test_parallel_tool_hooks_of_one_session_publish_one_step_after_another() -> None:
    client = FakeClient()
    st = steering(client)
    posts = hook_inputs("PostToolUse")

    async def go() -> None:
        await asyncio.gather(*(call(st.on_post_tool_use, p) for p in posts))

    asyncio.run(go())
    assert [s["step"] for s in steps(client)] == list(range(1, len(posts) + 1))
    assert client.kinds().count("run_start") == 1


def test_the_message_stream_fills_thought_model_and_tokens_once_per_model_call() -> None:
    st = steering(FakeClient())
    usage = {"input_tokens": 10, "cache_read_input_tokens": 1000, "output_tokens": 50}
    text = AssistantMessage(content=[TextBlock("Read both.")], model="claude-opus-4-5", message_id="m1")
    calls = AssistantMessage(
        content=[ToolUseBlock("t1", "Read", {}), ToolUseBlock("t2", "Read", {})],
        model="claude-opus-4-5",
        usage=usage,
        message_id="m1",
    )
    st.observe(text)
    st.observe(calls)
    first, second = (asyncio.run(st._call_of(t)) for t in ("t1", "t2"))
    assert first is not None and second is not None
    assert (first.thought, first.model_id, first.tokens) == ("Read both.", "claude-opus-4-5", 1060)
    assert second.tokens is None  # the call's tokens are counted on its first step only
    assert tokens_of(None) is None
    # its usage too, split as Anthropic prices it, and the model the stream says served it
    assert first.usage == {
        "input_tokens": 10,
        "cache_read_tokens": 1000,
        "cache_write_tokens": 0,
        "output_tokens": 50,
        "estimated": False,
    }
    assert first.served_model == "claude-opus-4-5" and second.usage is None


def test_a_decision_that_routes_asks_claude_code_to_switch_models_once() -> None:
    asked: list[str] = []

    async def set_model(model: str) -> None:
        asked.append(model)

    client = FakeClient(
        lambda k: decision(k, model="claude-opus-4-5", action="escalate") if k else decision(k)
    )
    st = steering(client, set_model=set_model)
    posts = hook_inputs("PostToolUse")

    async def go() -> None:
        for p in posts[:3]:
            await call(st.on_post_tool_use, p)
        await asyncio.sleep(0)  # the switch runs beside the hook, not inside it

    asyncio.run(go())
    assert asked == ["claude-opus-4-5"]


def test_tool_responses_read_as_the_model_saw_them() -> None:
    assert observation_of({"stdout": "ok", "stderr": "warn", "interrupted": False}) == "ok\nwarn"
    read = next(h for h in hook_inputs("PostToolUse") if h["tool_name"] == "Read")
    assert observation_of(read["tool_response"]).startswith("import time")
    edit = next(h for h in hook_inputs("PostToolUse") if h["tool_name"] == "Edit")
    assert "+    expires_at = token.get('expires_at')" in observation_of(edit["tool_response"])
    task = next(h for h in hook_inputs("PostToolUse") if h["tool_name"] == "Task")
    assert observation_of(task["tool_response"]).startswith("Tokens are built in auth/login.py")
    long = "x" * 50_000 + "\n1 failed, 12 passed"
    cut = observation_of(long)
    assert len(cut) < 17_000 and cut.endswith("1 failed, 12 passed")  # the summary at the end stays


def test_bad_run_options_are_refused_when_the_adapter_is_built() -> None:
    with pytest.raises(ValueError, match="stop_after"):
        steering(FakeClient(), escalation={"stop_after": 0})


def test_through_the_sdk_a_session_is_steered_and_its_steps_carry_the_stream() -> None:
    """query() with a scripted CLI: the SDK's own control protocol calls the hooks."""
    client = FakeClient(lambda k: inject(k, "Confirm with one test run.") if k == 4 else decision(k))
    st = steering(client)
    cli = ScriptedCLI(FIX["frames"])

    async def go() -> list[Any]:
        options = ClaudeAgentOptions(hooks=st.hooks())
        return [m async for m in st.watch(query(prompt="fix it", options=options, transport=cli))]

    messages = asyncio.run(go())
    assert type(messages[-1]).__name__ == "ResultMessage"
    assert cli.contexts == [sent("[REASONBLOCKS]\nConfirm with one test run.")]
    got = [(s["action"], s.get("agent"), s.get("model_id")) for s in steps(client)]
    assert got == [
        ("Read", None, "claude-sonnet-4-5-20250929"),
        ("Grep", "Explore:a4f1c9e2b7d3", "claude-haiku-4-5-20251001"),
        ("Task", None, "claude-sonnet-4-5-20250929"),
        ("Edit", None, "claude-sonnet-4-5-20250929"),
        ("Bash", None, "claude-sonnet-4-5-20250929"),
    ]
    assert steps(client)[0]["thought"] == "I'll look at the expiry check first."
    assert all(isinstance(s["tokens"], int) and s["tokens"] > 0 for s in steps(client))
    # the usage the CLI reported for each call, split into the parts it is priced by
    for s in steps(client):
        u = s["usage"]
        assert (
            sum(u[k] for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"))
            == s["tokens"]
        )
        assert u["estimated"] is False and s["served_model"] == s["model_id"]
    assert client.outcome() == "success"


def test_through_the_sdk_a_stop_reaches_claude_code_as_continue_false() -> None:
    client = FakeClient(lambda k: stop(k) if k >= 3 else decision(k))
    st = steering(client)
    cli = ScriptedCLI([{"hook": LOOP["prompt"]}, *repeated(LOOP["round"], 6), *LOOP["end"]])

    async def go() -> None:
        async with ClaudeSDKClient(ClaudeAgentOptions(hooks=st.hooks()), transport=cli) as sdk:
            await sdk.query("fix it")
            async for _ in st.watch(sdk.receive_response()):
                pass

    asyncio.run(go())
    assert cli.stopped is not None and cli.stopped.startswith(STOP_PREFIX)
    assert (
        "PostToolUseFailure",
        "toolu_01Py002",
        {"continue": False, "stopReason": cli.stopped},
    ) in cli.answers
    assert len(steps(client)) == 3 and client.outcome() == STOPPED_OUTCOME
