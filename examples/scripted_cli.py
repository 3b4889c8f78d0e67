"""A scripted Claude Code CLI for examples and tests: a `claude_agent_sdk` Transport that plays
back a recorded session (the CLI's stream-json frames and its hook inputs) instead of running
the CLI, so the SDK's own code (`query()`, `ClaudeSDKClient`, its control protocol, hook
dispatch and message parsing) runs unchanged without an API key.

What it does as the CLI would: answers `initialize` (keeps the hook callback ids per event and
matcher), asks the SDK to run every registered hook of a recorded hook input
(`control_request` `hook_callback`) and waits for the answer, stops the session when an answer
says `continue: false` (or a PreToolUse denies: the tool does not run), applies `set_model` to
the assistant frames that follow, and ends with the recorded `result`. What the model would
have been given by the hooks (`additionalContext`) is kept in `contexts`; it does not change
what the recording plays next (the model is scripted). The `result` frame after a stop is
this script's own (the recordings have none for that case).
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from claude_agent_sdk import Transport

Frame = dict[str, Any]
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "claude_agent"


def load(name: str) -> dict[str, Any]:
    """A recording of tests/fixtures/claude_agent (hook inputs in the SDK's TypedDict shapes)."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


def repeated(round_: list[Frame], n: int) -> list[Frame]:
    """`n` copies of a recorded round, each with its own tool use, message and frame ids (the
    CLI never reuses one)."""
    out: list[Frame] = []
    for i in range(n):
        text = json.dumps(round_)
        for old in sorted(set(re.findall(r'"((?:toolu|msg)_[A-Za-z0-9]+)"', text)), key=len, reverse=True):
            text = text.replace(f'"{old}"', f'"{old}{i:03d}"')
        text = re.sub(r'"uuid": "([^"]+)"', rf'"uuid": "\1-{i:03d}"', text)
        out += json.loads(text)
    return out


class ScriptedCLI(Transport):
    """Plays `frames` ({"stream": frame} or {"hook": hook input}) after the first user message."""

    def __init__(self, frames: list[Frame]) -> None:
        self.frames = copy.deepcopy(frames)
        self.hooks: dict[str, list[tuple[str | None, list[str]]]] = {}
        self.answers: list[tuple[str, str | None, dict[str, Any]]] = []  # (event, tool_use_id, output)
        self.contexts: list[str] = []  # every additionalContext the hooks returned, in order
        self.models: list[str | None] = []  # set_model requests, in order
        self.stopped: str | None = None  # the stopReason that ended the session
        self.model: str | None = None
        self._out: asyncio.Queue[Frame | None] = asyncio.Queue()
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._play: asyncio.Task[None] | None = None
        self._n = 0
        self._turns = 0

    # -- Transport ---------------------------------------------------------------
    async def connect(self) -> None:
        return None

    def is_ready(self) -> bool:
        return True

    async def end_input(self) -> None:
        await self._out.put(None)

    async def close(self) -> None:
        if self._play is not None:
            self._play.cancel()
        await self._out.put(None)

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        while (frame := await self._out.get()) is not None:
            yield frame

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            msg = json.loads(line)
            kind = msg.get("type")
            if kind == "control_request":
                await self._control(msg["request_id"], msg["request"])
            elif kind == "control_response":
                resp = msg["response"]
                fut = self._waiting.pop(resp["request_id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(resp)
            elif kind == "user" and self._play is None:
                self._play = asyncio.get_running_loop().create_task(self._run())

    # -- the CLI's side ---------------------------------------------------------------
    async def _control(self, request_id: str, request: dict[str, Any]) -> None:
        sub = request.get("subtype")
        if sub == "initialize":
            for event, matchers in (request.get("hooks") or {}).items():
                self.hooks[event] = [(m.get("matcher"), list(m["hookCallbackIds"])) for m in matchers]
        elif sub == "set_model":
            self.model = request.get("model")
            self.models.append(self.model)
        await self._out.put(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": request_id, "response": {}},
            }
        )

    async def _run(self) -> None:
        skip = False  # a denied tool call: its PostToolUse never comes
        for item in self.frames:
            if "stream" in item:
                frame = item["stream"]
                if frame.get("type") == "assistant":
                    skip = False
                    self._turns += 1
                    if self.model:
                        frame["message"]["model"] = self.model
                await self._out.put(frame)
                await asyncio.sleep(0)  # the CLI writes a frame before it runs the tool
                continue
            if skip:
                continue
            for out in await self._hook(item["hook"]):
                if out.get("continue") is False:
                    self.stopped = str(out.get("stopReason") or "")
                    await self._out.put(self._result_of_stop())
                    return
                specific = out.get("hookSpecificOutput") or {}
                if specific.get("permissionDecision") == "deny":
                    skip = True
                if specific.get("additionalContext"):
                    self.contexts.append(specific["additionalContext"])

    async def _hook(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        """Every registered callback of the input's event whose matcher fits, as the CLI asks."""
        event = data["hook_event_name"]
        outs: list[dict[str, Any]] = []
        for matcher, ids in self.hooks.get(event, []):
            if matcher not in (None, "", "*") and not re.fullmatch(matcher, str(data.get("tool_name", ""))):
                continue
            for cid in ids:
                self._n += 1
                rid = f"cli_{self._n}"
                fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
                self._waiting[rid] = fut
                await self._out.put(
                    {
                        "type": "control_request",
                        "request_id": rid,
                        "request": {
                            "subtype": "hook_callback",
                            "callback_id": cid,
                            "input": data,
                            "tool_use_id": data.get("tool_use_id"),
                        },
                    }
                )
                resp = await fut
                out = (resp.get("response") or {}) if resp.get("subtype") == "success" else {}
                self.answers.append((event, data.get("tool_use_id"), out))
                outs.append(out)
        return outs

    def _result_of_stop(self) -> Frame:
        sid = next((i["hook"]["session_id"] for i in self.frames if "hook" in i), "")
        return {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": 0,
            "duration_api_ms": 0,
            "num_turns": self._turns,
            "result": self.stopped,
            "session_id": sid,
            "stop_reason": None,
        }
