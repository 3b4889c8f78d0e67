"""The snippets a new user copies first run as written against a real worker (issue 40): the
README's, and the first Python block of docs/agents.md, docs/langchain.md and
docs/difficulty.md, read from the files at test time so that they cannot rot.

Only the names a snippet leaves to the user (the LLM client, the base request, the tools) are
filled in, by stand-ins defined here; the snippet's own code (its `with` blocks, its loop, its
`except RunStopped`) is what runs. The clients read `RB_*` from the environment, as the
snippets say.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from streams.agent.session import STOPPED_OUTCOME
from streams.local.worker_process import WorkerProcess
from tests.integration.helpers import DECISION_KEY, run_summary

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
FAILING = "FAILED tests/test_session.py::test_expired - KeyError: 'expires_at'\n1 failed, 12 passed"


def first_python_block(page: str) -> str:
    text = (ROOT / page).read_text(encoding="utf-8")
    found = re.search(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert found, f"{page} has no python block"
    return found.group(1)


def free_names(code: str) -> set[str]:
    """Names the snippet reads but never binds or imports: what the user must provide."""
    tree = ast.parse(code)
    bound = {
        a.asname or a.name.split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    bound |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler) and n.name}
    bound |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - bound - set(dir(builtins))


@pytest.fixture(scope="module")
def env(adapters_worker: WorkerProcess) -> Iterator[WorkerProcess]:
    """The snippets' clients configured as a user's would be: from RB_* in the environment."""
    s = adapters_worker.settings
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RB_BROKER", s.broker)
        mp.setenv("RB_TOPIC_PREFIX", s.topic_prefix)
        mp.setenv("RB_DECISION_KEY", DECISION_KEY)
        mp.setenv("RB_CLIENT_DEADLINE_MS", "15000")  # a busy CI machine: every call steered
        yield adapters_worker


class FakeAnthropic:
    """`anthropic.messages.create(**request)` answering from a script of tool calls (then a final
    answer), in the SDK's shapes (content blocks, usage, model); records each request."""

    def __init__(self, tool_calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.messages = self
        self.script = list(tool_calls)
        self.requests: list[dict[str, Any]] = []

    def create(self, **request: Any) -> Any:
        self.requests.append({**request, "messages": list(request["messages"])})  # as sent
        usage = SimpleNamespace(input_tokens=900, output_tokens=60, cache_read_input_tokens=0)
        if not self.script:
            text = SimpleNamespace(type="text", text="The test passes now.")
            return SimpleNamespace(
                content=[text], usage=usage, model=request["model"], stop_reason="end_turn"
            )
        name, args = self.script.pop(0)
        blocks = [
            SimpleNamespace(type="text", text=f"Next: {name} {args}."),
            SimpleNamespace(type="tool_use", id=f"toolu_{len(self.requests)}", name=name, input=args),
        ]
        return SimpleNamespace(content=blocks, usage=usage, model=request["model"], stop_reason="tool_use")


def run_tool(call: Any) -> tuple[str, bool]:
    if call.name == "run_tests" and call.input.get("fixed") is not True:
        return FAILING, True
    return {"read_file": "def expiry(tok):\n    return tok['expires_at']\n"}.get(call.name, "ok"), False


def base_request() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "You are a careful coding agent.",
        "messages": [{"role": "user", "content": "Fix the failing test in tests/test_session.py."}],
    }


def run_readme(tool_calls: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], FakeAnthropic]:
    code = first_python_block("README.md")
    assert free_names(code) == {"anthropic", "request", "run_tool"}  # what the README says is yours
    model = FakeAnthropic(tool_calls)
    ns: dict[str, Any] = {"anthropic": model, "request": base_request(), "run_tool": run_tool}
    exec(compile(code, "README.md snippet", "exec"), ns)
    return ns, model


def test_the_readme_snippet_steers_a_run_and_finishes_it(env: WorkerProcess) -> None:
    work: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "auth/session.py"}),
        (
            "edit_file",
            {"path": "auth/session.py", "old": "tok['expires_at']", "new": "tok.get('expires_at')"},
        ),
        ("run_tests", {"path": "tests/test_session.py", "fixed": True}),
    ]
    ns, model = run_readme(work)
    s = ns["s"]
    assert s.finished and s.outcome == "success" and not s.stopped_by_steering
    assert len(model.requests) == 4 and [e.steered for e in s.step_log] == [True] * 4
    # each call was composed from its decision: the history grows, the steering goes at the end
    assert [len(r["messages"]) for r in model.requests] == [1, 3, 5, 7]
    summary = run_summary(env, s.run_id)
    assert summary["finished"] and summary["outcome"] == "success"


def test_the_readme_snippet_catches_the_stop_and_the_run_is_finished_as_stopped(
    env: WorkerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same failing test again and again: warned, escalated, stopped; the snippet's
    `except RunStopped` ends the loop and its `with` has sent run_finish."""
    ns, model = run_readme([("run_tests", {"path": "tests/test_session.py"})] * 15)
    s = ns["s"]
    assert s.stopped_by_steering and s.finished and s.outcome == STOPPED_OUTCOME
    assert len(model.requests) < 15  # stopped before the script ran out
    assert "opus" in str([r["model"] for r in model.requests])  # escalated on the way
    assert capsys.readouterr().out.startswith("steering stopped the run: ")
    assert run_summary(env, s.run_id)["outcome"] == STOPPED_OUTCOME


def test_the_agents_doc_client_snippet_runs(env: WorkerProcess) -> None:
    code = first_python_block("docs/agents.md")
    assert free_names(code) == {"default_model"}
    ns: dict[str, Any] = {"default_model": "claude-sonnet-4-6"}
    run = eval(compile(code, "docs/agents.md snippet", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), ns)
    if run is not None:  # a coroutine: the snippet awaits
        asyncio.run(run)
    assert ns["d"] is not None and ns["d"].step == 1
    assert run_summary(env, "run-42")["finished"]


def test_the_langchain_doc_snippet_starts_its_client_and_steers_the_agent(
    env: WorkerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    import langchain.agents.factory as factory
    import langchain.chat_models
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from examples.scripted_model import Script, ScriptedModel

    @tool
    def run_tests(path: str) -> str:
        """Run the tests in `path`."""
        return "13 passed"

    script = Script(
        replies=[
            AIMessage(
                content="Run the tests.",
                tool_calls=[{"name": "run_tests", "args": {"path": "tests"}, "id": "c1"}],
            )
        ]
    )
    # "anthropic:<model>" ids resolve to the scripted model (no provider package, no API key)
    monkeypatch.setattr(factory, "init_chat_model", ScriptedModel.factory(script))
    monkeypatch.setattr(langchain.chat_models, "init_chat_model", ScriptedModel.factory(script))
    code = first_python_block("docs/langchain.md")
    assert free_names(code) == {"tools", "BASE"}
    ns: dict[str, Any] = {"tools": [run_tests], "BASE": "You are a careful coding agent."}
    exec(compile(code, "docs/langchain.md snippet", "exec"), ns)
    steering = ns["steering"]
    assert ns["result"]["messages"][-1].content == "Done."
    assert [e.steered for e in steering.step_log] == [True, True]  # run_start and the tool step
    assert run_summary(env, steering.run_id)["finished"]


def test_the_difficulty_doc_plugin_snippet_defines_working_scorers() -> None:
    ns: dict[str, Any] = {}
    exec(compile(first_python_block("docs/difficulty.md"), "docs/difficulty.md snippet", "exec"), ns)
    assert ns["shouting"]("STOP") == 1.0 and ns["shouting"]("calm") == 0.1
    assert callable(ns["trajectory_strict"])


def test_get_runs_lists_the_runs_the_worker_holds_page_by_page(env: WorkerProcess) -> None:
    """`GET /runs` on a real worker (Faust's routing: /runs beside /runs/{run_id}): paging by
    `after` reaches the runs the snippets above started, each with its summary fields."""
    import json
    import urllib.request

    base = f"http://127.0.0.1:{env.settings.web_port}/runs"
    seen: dict[str, dict[str, Any]] = {}
    after = ""
    while True:
        with urllib.request.urlopen(f"{base}?limit=50&after={after}", timeout=10) as r:
            page = json.loads(r.read())
        seen.update((x["run_id"], x) for x in page)
        if len(page) < 50:
            break
        after = page[-1]["run_id"]
    assert seen["run-42"]["finished"] and seen["run-42"]["outcome"] == "success"
    assert list(seen) == sorted(seen)
