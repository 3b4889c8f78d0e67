"""Claude Agent SDK hooks steered through the real broker and worker. The Claude Code CLI needs
an API key, so its side is recorded: hook inputs in the SDK's TypedDict shapes
(tests/fixtures/claude_agent), handed to the hooks as the SDK's Query hands them
(`await hook(input, tool_use_id, {"signal": None})`), or played by a scripted CLI under the
SDK's own `query()` / `ClaudeSDKClient`."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, query

from examples.scripted_cli import ScriptedCLI, load, repeated
from streams.agent.adapters.claude_agent import STOP_PREFIX, ClaudeAgentSteering, tokens_of
from streams.agent.client import SyncSteeringClient
from streams.agent.compose import REASONBLOCKS_MARKER
from streams.agent.session import STOPPED_OUTCOME
from streams.local.worker_process import WorkerProcess
from tests.integration.helpers import run_summary, steps_of

pytestmark = pytest.mark.integration

CTX: Any = {"signal": None}
FIX = load("fix_session")
LOOP = load("loop_session")
ROUTING = {"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5"}
LADDER = {"escalate_model_after": 1, "stop_after": 2}


@pytest.fixture(scope="module")
def cc_worker(adapters_worker: WorkerProcess) -> WorkerProcess:
    """The adapters' shared worker (conftest): every test reads back only its runs."""
    return adapters_worker


def steering(client: SyncSteeringClient, **kw: Any) -> ClaudeAgentSteering:
    return ClaudeAgentSteering(
        client, model="claude-sonnet-4-5", model_routing=ROUTING, e_traces_enabled=False, **kw
    )


async def drive_loop(st: ClaudeAgentSteering, rounds: int) -> list[Any]:
    """A session stuck rerunning the same failing test, its hooks called as the SDK calls them
    (PreToolUse, then PostToolUseFailure, per round) until a hook says stop; the outputs of the
    PostToolUseFailure hooks."""
    prompt = copy.deepcopy(LOOP["prompt"])
    await st.on_user_prompt_submit(prompt, None, CTX)
    outs: list[Any] = []
    for frame in repeated(LOOP["round"], rounds):
        if "hook" not in frame:
            continue
        data = frame["hook"]
        if data["hook_event_name"] == "PreToolUse":
            pre = await st.on_pre_tool_use(data, data["tool_use_id"], CTX)
            assert pre == {}, pre  # no tool call is denied before the stop
            continue
        out = await st.on_post_tool_use_failure(data, data["tool_use_id"], CTX)
        outs.append(out)
        if out.get("continue_") is False:
            break
    return outs


def context_of(out: Any) -> str | None:
    return (out.get("hookSpecificOutput") or {}).get("additionalContext")


def test_a_session_through_the_sdk_publishes_its_tool_calls_as_steps(cc_worker: WorkerProcess) -> None:
    cli = ScriptedCLI(FIX["frames"])
    with SyncSteeringClient(cc_worker.settings, deadline_ms=15000) as c:
        st = steering(c)

        async def go() -> list[Any]:
            options = ClaudeAgentOptions(hooks=st.hooks())
            async with st.arun():
                return [m async for m in st.watch(query(prompt="fix it", options=options, transport=cli))]

        messages = asyncio.run(go())
        run_id = st.run_id
        log = st.step_log
    assert run_id is not None and type(messages[-1]).__name__ == "ResultMessage"
    assert [e.late for e in log] == [False] * 6  # decision 0 and one per tool call, all in time
    steps = steps_of(cc_worker, run_id)
    assert [(e["step"], e["action"], e.get("agent")) for e in steps] == [
        (1, "Read", None),
        (2, "Grep", "Explore:a4f1c9e2b7d3"),
        (3, "Task", None),
        (4, "Edit", None),
        (5, "Bash", None),
    ]
    assert [e["model_id"] for e in steps][:2] == ["claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"]
    usage = {  # tool use id -> the usage of the model call that made it
        b["id"]: f["stream"]["message"]["usage"]
        for f in FIX["frames"]
        if f.get("stream", {}).get("type") == "assistant"
        for b in f["stream"]["message"]["content"]
        if b["type"] == "tool_use"
    }
    calls = [
        h["tool_use_id"]
        for h in (f.get("hook", {}) for f in FIX["frames"])
        if h.get("hook_event_name") == "PostToolUse"
    ]
    expected = [tokens_of(usage[t]) for t in calls]
    assert [e["tokens"] for e in steps] == expected
    summary = run_summary(cc_worker, run_id)
    assert summary["outcome"] == "success" and summary["tokens_used"] == sum(t or 0 for t in expected)


def test_a_looping_session_gets_the_warning_with_its_next_tool_result(cc_worker: WorkerProcess) -> None:
    with SyncSteeringClient(cc_worker.settings, deadline_ms=15000) as c:
        st = steering(c)
        outs = asyncio.run(drive_loop(st, 4))
        asyncio.run(st.on_stop(copy.deepcopy(LOOP["end"][1]["hook"]), None, CTX))
        run_id = st.run_id
    texts = [context_of(o) for o in outs]
    assert texts[:2] == [None, None], texts  # two runs of a failing test are not a loop yet
    nudge = texts[2]
    assert nudge is not None and nudge.startswith(REASONBLOCKS_MARKER[:-1] + " "), (
        texts
    )  # "[REASONBLOCKS <tag>]"
    assert "`Bash`" in nudge  # the warning names the call that repeats
    assert outs[2]["hookSpecificOutput"]["hookEventName"] == "PostToolUseFailure"
    assert run_id is not None and run_summary(cc_worker, run_id)["outcome"] == "success"


def test_an_ignored_warning_escalates_the_model_then_stops_the_session(cc_worker: WorkerProcess) -> None:
    asked: list[str] = []

    async def set_model(model: str) -> None:  # what ClaudeSDKClient.set_model is given
        asked.append(model)

    with SyncSteeringClient(cc_worker.settings, deadline_ms=15000) as c:
        st = steering(c, escalation=LADDER, set_model=set_model)
        outs = asyncio.run(drive_loop(st, 12))
        sid = LOOP["prompt"]["session_id"]
        pre_after = asyncio.run(
            st.on_pre_tool_use(copy.deepcopy(LOOP["round"][1]["hook"]), "toolu_late", CTX)
        )
        run_id = st.run_id
        why = st.stop_reason(sid)
    last = outs[-1]
    assert why and last == {"continue_": False, "stopReason": f"{STOP_PREFIX} {why}"}, outs
    assert "Bash" in why  # says what was repeated
    assert asked == ["claude-opus-4-5"]  # the escalation model (routing SLOW), asked for once
    assert pre_after["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert run_id is not None
    summary = run_summary(cc_worker, run_id)
    assert summary["outcome"] == STOPPED_OUTCOME and summary["rung"] == "stop"


def test_through_the_sdk_the_cli_switches_models_and_is_stopped(cc_worker: WorkerProcess) -> None:
    cli = ScriptedCLI([{"hook": LOOP["prompt"]}, *repeated(LOOP["round"], 12), *LOOP["end"]])
    with SyncSteeringClient(cc_worker.settings, deadline_ms=15000) as c:
        st = steering(c, escalation=LADDER)

        async def run() -> None:
            async with ClaudeSDKClient(ClaudeAgentOptions(hooks=st.hooks()), transport=cli) as sdk:
                st.set_model = sdk.set_model  # a connected client's (the hooks went in before)
                await sdk.query("fix it")
                async for _ in st.watch(sdk.receive_response()):
                    pass

        asyncio.run(run())
    assert cli.models == ["claude-opus-4-5"]  # set_model reached the CLI through the SDK
    assert cli.stopped is not None and cli.stopped.startswith(STOP_PREFIX)
    assert st.run_id is not None
    steps = steps_of(cc_worker, st.run_id)
    models = [e["model_id"] for e in steps]
    assert models[0] == "claude-sonnet-4-5-20250929" and models[-1] == "claude-opus-4-5", models
    assert run_summary(cc_worker, st.run_id)["outcome"] == STOPPED_OUTCOME
