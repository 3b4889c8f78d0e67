"""An OpenAI Agents SDK run steered by rb-streams, end to end on this machine.

    .venv/bin/python -m examples.openai_agents_agent [--stop] [--port 9092]

Real `Runner`, real `Agent`s and function tools (on a temporary directory), every step through
the local Kafka broker and an rb-streams worker; the model is scripted (the SDK's own
`agents.testing.ScriptedModel` behind a model provider), so no API key is needed. A triage
agent hands the task to a coding agent, which keeps re-running a failing check: the loop
monitor fires, a `[REASONBLOCKS]` message ends its next model input, and when it runs the
same check again anyway (an ignored warning) the run is escalated to `model_routing["SLOW"]`.
It then reads the file, fixes it, and the check passes. Printed per model call: the agent, the
model that served it, the decision's rung and the steering message its input ended with.

With `--stop` a single coding agent never listens, and the run's policy has `stop_after: 2`:
the second ignored warning ends the run before its next model call (`Runner.run` raises
`RunStoppedBySteering`, a `streams.RunStopped`); the example exits 3, like examples.loop_guard.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, RunConfig, RunHooks, function_tool

from examples._local import local_stack
from examples.openai_scripted import ScriptedProvider, reply, say
from streams.agent.adapters.openai_agents import AgentsSteering
from streams.agent.client import SyncSteeringClient
from streams.agent.compose import REASONBLOCKS_MARKER as MARKER
from streams.agent.compose import body_of
from streams.agent.session import RunStopped

EXIT_STOPPED = 3
ROUTING = {"FAST": "gpt-4.1-mini", "SLOW": "o3"}
TASK = "check.py prints 'wrong': expired() crashes on tokens without expires_at. Fix it."
CODER = "You are a careful coding agent working in a Python repository."
FIXED = "def expired(token):\n    return token.get('expires_at', 0) < 100\n"


def make_tools(root: Path) -> list[FunctionTool]:
    @function_tool
    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return (root / path).read_text()

    @function_tool
    def write_file(path: str, content: str) -> str:
        """Write a file of the repository."""
        (root / path).write_text(content)
        return f"wrote {len(content)} bytes to {path}"

    @function_tool
    def run_check(path: str) -> str:
        """Run a Python file and return its output."""
        p = subprocess.run([sys.executable, str(root / path)], capture_output=True, text=True, timeout=30)
        return (p.stdout + p.stderr).strip() or f"exit {p.returncode}"

    return [read_file, write_file, run_check]


def script(stop: bool) -> list[dict[str, Any]]:
    def rerun(n: int) -> dict[str, Any]:
        return reply("It still fails; run the check again.", ("run_check", {"path": "check.py"}), n=n)

    if stop:
        return [*(rerun(i) for i in range(1, 11)), say("I could not make the check pass.", n=11)]
    return [
        reply("A coding task: hand it to the coder.", ("transfer_to_coder", {}), n=0),
        *(rerun(i) for i in range(1, 6)),
        reply("Read the module first.", ("read_file", {"path": "expiry.py"}), n=6),
        reply(
            "Use get() for the optional field.", ("write_file", {"path": "expiry.py", "content": FIXED}), n=7
        ),
        reply("Run the check after the edit.", ("run_check", {"path": "check.py"}), n=8),
        say("The check passes: expired() handles tokens without expires_at.", n=9),
    ]


class Speakers(RunHooks[Any]):
    """Your own run hooks still run (after the steering's): here, who made each model call."""

    def __init__(self) -> None:
        self.agents: list[str] = []

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
        self.agents.append(agent.name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stop", action="store_true", help="an agent that never listens, stopped by its policy")
    ap.add_argument("--port", type=int, default=9092)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rb-agent-repo-"))
    (root / "expiry.py").write_text("def expired(token):\n    return token['expires_at'] < 100\n")
    (root / "check.py").write_text(
        "from expiry import expired\ntry:\n    print('ok' if expired({}) else 'wrong')\n"
        "except KeyError as e:\n    print(f'wrong: KeyError {e}')\n"
    )
    coder = Agent(name="Coder", instructions=CODER, tools=make_tools(root), model="gpt-4.1")
    start = coder if args.stop else Agent(name="Triage", instructions="Route the task.", handoffs=[coder])
    provider = ScriptedProvider(script(args.stop))  # in production: leave the SDK's provider
    speakers = Speakers()
    policy = {"escalate_model_after": 1, "stop_after": 2 if args.stop else None}
    code = 0
    with local_stack(args.port) as settings, SyncSteeringClient(settings) as client:
        steering = AgentsSteering(client, model_routing=ROUTING, escalation=policy, org_id="acme")
        try:
            result = steering.run_sync(
                start,
                TASK,
                hooks=speakers,
                run_config=RunConfig(model_provider=provider, tracing_disabled=True),
            )
            answer = f"final answer ({result.last_agent.name}): {result.final_output}"
        except RunStopped as stop:
            answer, code = f"stopped by steering after step {stop.step}: {stop.reason}", EXIT_STOPPED
        log = steering.step_log
    for k, call in enumerate(provider.calls):
        entry = log[k]  # decision k steered call k+1
        fired = ",".join(entry.monitors_fired) or "-"
        print(
            f"call {k + 1:>2}  {speakers.agents[k]:<7} model {call.model:<8} {entry.action:<9} fired {fired}"
        )
        last = list(call.call.input)[-1:]
        extra = [
            i["content"]
            for i in last
            if isinstance(i, dict) and str(i.get("content")).startswith(MARKER[:-1])
        ]
        for text in extra:  # the steering message after the input (the cached prefix is unchanged)
            head = text.split("\n", 1)[0]  # the tagged header, then what it says
            print(f"          input += {head} {' '.join(body_of(text).split())[:150]}...")
    print(f"\n{answer}", file=sys.stderr if code else sys.stdout)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
