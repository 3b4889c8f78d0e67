"""A CLI agent whose exit code tells a loop stop apart from success and failure.

    .venv/bin/python -m examples.loop_guard [--scenario loop|listens|crash] [--langchain] [--port 9092]
    echo $?   # 0: success, 1: failure, 3: stopped by steering (the agent kept looping)

The run asks for the escalation ladder (`escalation={"escalate_model_after": 1,
"stop_after": 2}`): when the agent ignores a warning (does again what it was warned about) its
next call goes to the run's strongest model (`model_routing["SLOW"]`), and when it ignores
two the decision says `stop`. `SteeringSession.begin_step()` then raises `RunStopped`, the run
is finished as `failure: stopped_by_steering`, and this wrapper exits with 3, so a shell
script, a CI job or a job queue can tell "the agent looped and was cut off" from "the agent
failed" without parsing its output. With `--langchain` the same agent is a `create_agent`
agent: the middleware ends it with a final message that says why, and the wrapper reads
`session.stopped_by_steering`.

The model is scripted (no API key needed); every step goes through the local Kafka broker
and an rb-streams worker. Scenarios: `loop` reruns the same failing test whatever it is told
(exit 3), `listens` changes course after the first warning and fixes the bug (exit 0),
`crash` hits a tool that raises (exit 1).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from examples._local import local_stack
from streams.agent.client import SyncSteeringClient
from streams.agent.session import RunStopped, SteeringSession

EXIT_SUCCESS, EXIT_FAILURE, EXIT_STOPPED = 0, 1, 3

BASE = "You are a careful coding agent working in a Python repository."
TASK = "Fix the failing test in tests/test_session.py (expired tokens raise KeyError)."
RUN = dict(
    model="claude-sonnet-4-5",
    model_routing={"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5"},
    escalation={"escalate_model_after": 1, "stop_after": 2},
    task=TASK,
    org_id="acme",
)
FAILING = "FAILED tests/test_session.py::test_expired - KeyError: 'expires_at'\n1 failed, 12 passed"
RERUN = ("The expiry test fails. Run it again.", "run_tests", {"path": "tests/test_session.py"}, FAILING)
FIXED = "Expired tokens now return None instead of raising (auth/session.py)."

# (thought, tool, args, observation); a step without a tool is the final answer.
Step = tuple[str, str | None, dict[str, Any] | None, str | None]
SCRIPTS: dict[str, list[Step]] = {
    "loop": [*[RERUN] * 10, ("FAILED: the test still fails and I cannot see why.", None, None, None)],
    "listens": [
        *[RERUN] * 4,
        (
            "Stop rerunning; read the code.",
            "read_file",
            {"path": "auth/session.py"},
            "return tok['expires_at']",
        ),
        ("Use .get for the expiry.", "edit_file", {"path": "auth/session.py"}, "edited 1 line"),
        ("Run the test once more.", "run_tests", {"path": "tests/test_session.py"}, "13 passed"),
        (FIXED, None, None, None),
    ],
    "crash": [("Read the config.", "read_config", {"path": "settings.toml"}, None)],
}


def run_tool(name: str, observation: str | None) -> str:
    if observation is None:
        raise OSError(f"{name}: permission denied")
    return observation


def plain_agent(client: SyncSteeringClient, script: list[Step]) -> str:
    """A framework-free loop: raises RunStopped when steering stops the run."""
    with SteeringSession(client, **RUN) as session:  # type: ignore[arg-type]
        for thought, tool, args, observation in script:
            steer = session.begin_step()  # RunStopped here when the decision says stop
            print(f"call {steer.step}: {steer.model} {steer.action}")
            if tool is None:
                session.finish("failure" if thought.startswith("FAILED") else "success")
                return thought
            out = run_tool(tool, observation)
            session.end_step(thought=thought, action=tool, action_input=args, observation=out, tokens=400)
    return "FAILED: out of steps"


def langchain_agent(client: SyncSteeringClient, script: list[Step]) -> tuple[str, bool]:
    """The same agent on LangChain: the middleware ends a stopped run itself (no exception)."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langchain_core.tools import StructuredTool

    from examples.scripted_model import Script, ScriptedModel
    from streams.agent.adapters.langchain_middleware import SteeringMiddleware

    def make_tool(name: str, observation: str | None) -> StructuredTool:
        def use(path: str) -> str:
            return run_tool(name, observation)

        return StructuredTool.from_function(use, name=name, description=f"The {name} tool (takes a path).")

    tools = [make_tool(tool, obs) for _, tool, _, obs in {s[1]: s for s in script if s[1]}.values()]
    replies = [
        AIMessage(content=t, tool_calls=[{"name": tool, "args": args or {}, "id": f"c{i}"}] if tool else [])
        for i, (t, tool, args, _) in enumerate(script)
    ]
    scripted = Script(replies)
    fields = {k: v for k, v in RUN.items() if k != "task"}
    mw = SteeringMiddleware(client, model_factory=ScriptedModel.factory(scripted), **fields)  # type: ignore[arg-type]
    agent = create_agent(
        ScriptedModel(script=scripted, model_id="claude-sonnet-4-5"),
        tools,
        system_prompt=BASE,
        middleware=[mw],
    )
    with mw.run():  # run_finish with failure: <Type> if the agent raises
        out = agent.invoke({"messages": [{"role": "user", "content": TASK}]})
    for k, (model_id, _) in enumerate(scripted.calls, 1):
        print(f"call {k}: {model_id}")
    stopped = mw.session is not None and mw.session.stopped_by_steering
    return str(out["messages"][-1].content), stopped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", choices=sorted(SCRIPTS), default="loop")
    ap.add_argument(
        "--langchain", action="store_true", help="run the agent as a LangChain create_agent agent"
    )
    ap.add_argument("--port", type=int, default=9092)
    args = ap.parse_args()
    script = SCRIPTS[args.scenario]
    with local_stack(args.port) as settings, SyncSteeringClient(settings) as client:
        try:
            if args.langchain:
                answer, stopped = langchain_agent(client, script)
                if stopped:
                    print(f"stopped by steering: {answer}", file=sys.stderr)
                    return EXIT_STOPPED
            else:
                answer = plain_agent(client, script)
        except RunStopped as stop:
            print(f"stopped by steering after step {stop.step}: {stop.reason}", file=sys.stderr)
            return EXIT_STOPPED
        except Exception as exc:  # the agent itself failed (run_finish: failure: <Type>)
            print(f"agent failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
    print(f"final answer: {answer}")
    return EXIT_FAILURE if answer.startswith("FAILED") else EXIT_SUCCESS


if __name__ == "__main__":
    raise SystemExit(main())
