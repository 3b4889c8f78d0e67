"""A Claude Agent SDK agent steered by rb-streams hooks, end to end on this machine.

    .venv/bin/python -m examples.claude_agent [--port 9092]          # scripted CLI, no API key
    .venv/bin/python -m examples.claude_agent --live [--port 9092]   # the real Claude Code CLI

Scripted (the default): the SDK's own `ClaudeSDKClient` runs with a scripted Claude Code CLI
(`examples.scripted_cli`) that plays recorded sessions (tests/fixtures/claude_agent): the
hooks, the SDK's control protocol and every step through the local Kafka broker and an
rb-streams worker are real; the model's replies are recorded. Two sessions:

1. `fix`: reads the code, asks an Explore sub-agent, edits, runs the tests once. Printed per
   step: the tool, who called it (the sub-agent), the model that answered and its tokens.
2. `loop`: reruns the same failing test. The hooks hand the loop warning back with the
   next tool result (`additionalContext`), the escalation asks Claude Code to switch to the
   run's strongest model (`set_model`), and the second ignored warning stops the session
   (`continue: false` with the reason).

`--live` runs the same hooks on the real CLI (needs Claude Code's login or ANTHROPIC_API_KEY)
on a small repository with a failing test in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, Transport
from claude_agent_sdk.types import TextBlock, ToolUseBlock

from examples._local import local_stack
from examples.scripted_cli import ScriptedCLI, load, repeated
from streams.agent.adapters.claude_agent import ClaudeAgentSteering
from streams.agent.client import SyncSteeringClient
from streams.agent.compose import body_of

ROUTING = {"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5"}
LADDER = {"escalate_model_after": 1, "stop_after": 2}


def first_line(text: str, n: int = 100) -> str:
    line = next((x for x in body_of(text).splitlines() if x.strip()), "")
    return line if len(line) <= n else line[: n - 3] + "..."


async def session(
    client: SyncSteeringClient, prompt: str, transport: Transport | None, options: dict[str, Any]
) -> ClaudeAgentSteering:
    """One session on a ClaudeSDKClient (streaming mode: `set_model` works there)."""
    steering = ClaudeAgentSteering(
        client, model="claude-sonnet-4-5", model_routing=ROUTING, escalation=LADDER
    )
    async with (
        steering.arun(),
        ClaudeSDKClient(ClaudeAgentOptions(hooks=steering.hooks(), **options), transport=transport) as sdk,
    ):
        steering.set_model = sdk.set_model
        await sdk.query(prompt)
        async for m in steering.watch(sdk.receive_response()):
            if isinstance(m, AssistantMessage):
                who = f"  [sub-agent of {m.parent_tool_use_id}]" if m.parent_tool_use_id else ""
                for b in m.content:
                    if isinstance(b, ToolUseBlock):
                        print(f"  {m.model:<28} calls {b.name}{who}")
                    elif isinstance(b, TextBlock) and not any(isinstance(x, ToolUseBlock) for x in m.content):
                        print(f"  {m.model:<28} answers: {first_line(b.text)}")
            elif isinstance(m, ResultMessage):
                # After a stop, Claude Code ends its turn normally and reports "success": say
                # what happened to the run, not what the CLI's result type says.
                stopped = steering.stop_reason(m.session_id) is not None or (
                    steering.session is not None and steering.session.stopped_by_steering
                )
                what = "stopped by steering" if stopped else m.subtype
                print(f"  result: {what} after {m.num_turns} turns")
    return steering


def report(steering: ClaudeAgentSteering, cli: ScriptedCLI | None) -> None:
    s = steering.session
    if cli is not None:
        for event, tool_use_id, out in cli.answers:
            ctx = (out.get("hookSpecificOutput") or {}).get("additionalContext")
            if ctx:
                print(f"  {event} {tool_use_id}: additionalContext = {first_line(ctx)}")
            if out.get("continue") is False:
                print(f"  {event} {tool_use_id}: continue=false, stopReason = {out.get('stopReason')}")
        for model in cli.models:
            print(f"  set_model({model}) sent to Claude Code")
    for e in steering.step_log[1:]:
        print(
            f"  step {e.step:>2}: {e.model_id or '-':<28} tokens {e.tokens or '-':>6}  "
            f"{e.action:<8} fsm {e.fsm_state:<8} fired {e.monitors_fired}"
        )
    if s is not None:
        print(f"  run {s.run_id}: {s.outcome}")


async def scripted(client: SyncSteeringClient) -> None:
    fix = load("fix_session")
    print("\nsession 1: a fix with an Explore sub-agent")
    cli = ScriptedCLI(fix["frames"])
    report(await session(client, "fix it", cli, {}), cli)

    loop = load("loop_session")
    print("\nsession 2: rerunning the same failing test")
    cli = ScriptedCLI([{"hook": loop["prompt"]}, *repeated(loop["round"], 12), *loop["end"]])
    report(await session(client, "fix it", cli, {}), cli)


FAILING_REPO = {
    "auth/__init__.py": "",
    "auth/session.py": "import time\n\n\ndef expired(token: dict) -> bool:\n    return token['expires_at'] < time.time()\n",
    "tests/test_session.py": "from auth.session import expired\n\n\ndef test_expired():\n    assert not expired({'user': 'guest'})\n",
}


async def live(client: SyncSteeringClient) -> None:
    root = Path(tempfile.mkdtemp(prefix="rb-claude-agent-"))
    for path, text in FAILING_REPO.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    options = {
        "cwd": str(root),
        "model": "claude-sonnet-4-5",
        "permission_mode": "acceptEdits",
        "allowed_tools": ["Read", "Edit", "Bash", "Grep", "Glob"],
        "max_turns": 20,
    }
    prompt = "tests/test_session.py fails: guest tokens have no expires_at. Fix auth/session.py."
    print(f"\na live session in {root}")
    try:
        report(await session(client, prompt, None, options), None)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the session's scratch repository


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=9092)
    ap.add_argument("--live", action="store_true", help="run the real Claude Code CLI (needs a login or key)")
    args = ap.parse_args()
    logged_in = (Path.home() / ".claude" / ".credentials.json").exists()
    key = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("CLAUDE_CODE_OAUTH_TOKEN")
    if args.live and not (key or logged_in):
        sys.exit(
            "--live needs ANTHROPIC_API_KEY (or Claude Code's login); without --live the CLI is scripted"
        )
    with local_stack(args.port) as settings, SyncSteeringClient(settings) as client:
        asyncio.run(live(client) if args.live else scripted(client))


if __name__ == "__main__":
    main()
