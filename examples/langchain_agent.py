"""A LangChain `create_agent` agent steered by rb-streams, end to end on this machine.

    .venv/bin/python -m examples.langchain_agent [--port 9092]

The chat model is scripted (it plays back tool calls, so no API key is needed) but the
tools are real, on a temporary directory, and every step goes through the local Kafka
broker and an rb-streams worker. The agent first keeps re-running a failing check (the
loop monitor fires and a steering block appears in its next system message), then fixes
the file and reads its way through the rest (the run turns FAST and is routed to the cheap
model). Printed per model call: which model served it and what the system message held.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from examples._local import local_stack
from examples.scripted_model import Script, ScriptedModel
from streams.agent.adapters.langchain_middleware import SteeringMiddleware
from streams.agent.client import SyncSteeringClient
from streams.agent.compose import body_of

BASE = "You are a careful coding agent working in a Python repository."


def make_tools(root: Path) -> list[Any]:
    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return (root / path).read_text()

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a file of the repository."""
        (root / path).write_text(content)
        return f"wrote {len(content)} bytes to {path}"

    @tool
    def run_check(path: str) -> str:
        """Run a Python file and return its output."""
        p = subprocess.run([sys.executable, str(root / path)], capture_output=True, text=True, timeout=30)
        return (p.stdout + p.stderr).strip() or f"exit {p.returncode}"

    return [read_file, write_file, run_check]


def script() -> Script:
    def c(i: int, name: str, **args: Any) -> dict[str, Any]:
        return {"name": name, "args": args, "id": f"c{i}"}

    replies = [
        AIMessage(
            content="Let me run the check to see the failure.",
            tool_calls=[c(0, "run_check", path="check.py")],
        )
    ]
    replies += [
        AIMessage(
            content="It still fails; run the check again.", tool_calls=[c(i, "run_check", path="check.py")]
        )
        for i in range(1, 5)
    ]
    replies.append(
        AIMessage(content="Read the module first.", tool_calls=[c(5, "read_file", path="expiry.py")])
    )
    fixed = "def expired(token):\n    return token.get('expires_at', 0) < 100\n"
    replies.append(
        AIMessage(
            content="Use get() for the optional field.",
            tool_calls=[c(6, "write_file", path="expiry.py", content=fixed)],
        )
    )
    replies.append(
        AIMessage(content="Run the check after the edit.", tool_calls=[c(7, "run_check", path="check.py")])
    )
    replies += [
        AIMessage(content=f"Read notes_{i}.txt.", tool_calls=[c(8 + i, "read_file", path=f"notes_{i}.txt")])
        for i in range(8)
    ]
    replies.append(AIMessage(content="The check passes: expired() handles tokens without expires_at."))
    return Script(replies)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=9092)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rb-agent-repo-"))
    (root / "expiry.py").write_text("def expired(token):\n    return token['expires_at'] < 100\n")
    (root / "check.py").write_text("from expiry import expired\nprint('ok' if expired({}) else 'wrong')\n")
    for i in range(8):
        (root / f"notes_{i}.txt").write_text(f"note {i}\n")
    sc = script()
    with local_stack(args.port) as settings, SyncSteeringClient(settings) as client:
        steering = SteeringMiddleware(
            client,
            model="claude-sonnet-4-5",
            model_routing={"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5"},
            model_factory=ScriptedModel.factory(sc),  # init_chat_model(id) by default
            org_id="acme",
        )
        agent = create_agent(
            ScriptedModel(script=sc, model_id="claude-sonnet-4-5"),
            make_tools(root),
            system_prompt=BASE,
            middleware=[steering],
        )
        out = agent.invoke(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": "Fix check.py: expired() crashes on tokens without expires_at.",
                    }
                ]
            }
        )
        for k, (model_id, msgs) in enumerate(sc.calls, 1):
            last = msgs[-1].content  # the steering message ends the call (the prompt before it is unchanged)
            extra = [last] if isinstance(last, str) and last.startswith("[REASONBLOCKS") else []
            entry = steering.step_log[k - 1]
            print(
                f"call {k:>2}  model {model_id:<18} state {entry.fsm_state or '-':<6} fired {','.join(entry.monitors_fired) or '-'}"
            )
            for text in extra:
                head, said = text.split("\n", 1)[0], body_of(text)  # the tagged header, then what it says
                print(f"          messages += {head} {' '.join(said.split())[:150]}...")
        print(f"\nfinal answer: {out['messages'][-1].content}")
        print(f"history: {len(out['messages'])} messages, none of them rewritten or injected")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
