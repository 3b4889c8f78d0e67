"""A real LangChain `create_agent` agent with a scripted model, steered through the real
broker and worker by `SteeringMiddleware`."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from examples.scripted_model import Script, ScriptedModel
from streams.agent.adapters.langchain_middleware import SteeringMiddleware
from streams.agent.client import SyncSteeringClient
from streams.core.render import MARKER
from streams.local.worker_process import WorkerProcess
from tests.integration.kafka_io import read_all

pytestmark = pytest.mark.integration
HEADER = MARKER[:-1]  # the block's header, tagged by the composer: "[REASONBLOCKS <tag>]"
BASE = "You are a careful coding agent."
FAILING = "FAILED tests/test_a.py::test_expiry - KeyError: 'expires_at'\n1 failed, 3 passed"


@tool
def run_tests(path: str) -> str:
    """Run the tests in `path`."""
    return FAILING


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"# {path}\ndef handler():\n    return 42\n"


def call(name: str, i: int, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call-{i}"}


@pytest.fixture(scope="module")
def lc_worker(seeded_worker: WorkerProcess) -> WorkerProcess:
    """The session's seeded worker (shared with test_etraces): every test makes its own runs
    and reads back only those."""
    return seeded_worker


def agent_for(client: SyncSteeringClient, script: Script, tools: list[Any]) -> tuple[Any, SteeringMiddleware]:
    mw = SteeringMiddleware(
        client,
        model="claude-sonnet-4-5",
        model_routing={"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5"},
        model_factory=ScriptedModel.factory(script),
        org_id="acme",
    )
    model = ScriptedModel(script=script, model_id="claude-sonnet-4-5")
    return create_agent(model, tools, system_prompt=BASE, middleware=[mw]), mw


def steering_text(msgs: list[Any]) -> str | None:
    """The steering text a call got: its trailing HumanMessage when that starts with the marker."""
    last = msgs[-1]
    if isinstance(last, HumanMessage) and isinstance(last.content, str) and last.content.startswith(HEADER):
        return last.content
    return None


def own_messages(msgs: list[Any]) -> list[Any]:
    """What the call got of the agent's own prompt and history (without the steering message)."""
    return msgs[:-1] if steering_text(msgs) is not None else msgs


def test_a_looping_agent_gets_a_loop_injection_in_its_next_system_message(lc_worker: WorkerProcess) -> None:
    replies = [
        AIMessage(
            content=f"The expiry test fails. Let me run it again (try {i}).",
            tool_calls=[call("run_tests", i, path="tests/test_a.py")],
        )
        for i in range(6)
    ] + [AIMessage(content="I give up for now.")]
    script = Script(replies)
    with SyncSteeringClient(lc_worker.settings, deadline_ms=15000) as c:
        agent, mw = agent_for(c, script, [run_tests])
        out = agent.invoke(
            {"messages": [{"role": "user", "content": "Fix the failing expiry test in tests/test_a.py"}]}
        )
        log = mw.step_log
        run_id = mw.run_id
    # every call: the system message is the agent's own prompt, unchanged (the cached prefix)
    for _, msgs in script.calls:
        assert isinstance(msgs[0], SystemMessage) and msgs[0].content == BASE
    injected = [(k, t) for k, (_, m) in enumerate(script.calls, 1) if (t := steering_text(m)) is not None]
    loop_calls = [(k, t) for k, t in injected if "run_tests" in t and "same" in t]
    assert loop_calls, [t[:200] for _, t in injected]
    k, _ = loop_calls[0]
    assert "semantic_loop" in log[k - 1].monitors_fired and "monitor" in log[k - 1].injection_sources
    # call 1 got the universal rules (E3) from decision 0, after the user's message
    assert steering_text(script.calls[0][1]) is not None
    # the history is the agent's own: no injected text ever enters it, nothing is rewritten, and
    # each call's prompt up to its steering message is the start of the next call's prompt
    history = out["messages"]
    assert not any(HEADER in str(m.content) for m in history)
    for _, msgs in script.calls:
        seen = own_messages(msgs)[1:]
        assert [m.id for m in seen] == [m.id for m in history[: len(seen)]]
    for (_, before), (_, after) in zip(script.calls, script.calls[1:], strict=False):
        cached = [m.model_dump_json() for m in own_messages(before)]
        assert [m.model_dump_json() for m in after[: len(cached)]] == cached
    finish = [
        d
        for d in asyncio.run(
            read_all(lc_worker.settings.bootstrap_servers, lc_worker.settings.steering_topic)
        )
        if d["run_id"] == run_id
    ]
    assert [d["step"] for d in finish] == list(range(len(script.calls)))


NOTE = "The module is small and the next file to read is clear. "


def test_an_easy_run_is_routed_to_the_fast_model(lc_worker: WorkerProcess) -> None:
    files = [f"src/mod_{i}.py" for i in range(9)]
    replies = [
        # each reply writes ~750 tokens: the cheaper model's output saves more than the cache
        # write the switch costs (issue 39: routing declines a switch that cannot pay)
        AIMessage(content=f"Read {f}. " + NOTE * 60, tool_calls=[call("read_file", i, path=f)])
        for i, f in enumerate(files)
    ]
    script = Script([*replies, AIMessage(content="Done.")])
    with SyncSteeringClient(lc_worker.settings, deadline_ms=15000) as c:
        agent, mw = agent_for(c, script, [read_file])
        agent.invoke({"messages": [{"role": "user", "content": "Read the modules."}]})
        log = mw.step_log
    used = [model_id for model_id, _ in script.calls]
    fast_from = next(e.step for e in log if e.fsm_state == "FAST")
    # decision k (the first FAST one) steers call k+1, which is used[k]
    assert used[:fast_from] == ["claude-sonnet-4-5"] * fast_from
    assert used[fast_from:] and set(used[fast_from:]) == {"claude-haiku-4-5"}


def test_a_late_decision_leaves_the_call_unsteered_and_is_recorded(lc_worker: WorkerProcess) -> None:
    replies = [
        AIMessage(content="Read a.", tool_calls=[call("read_file", 0, path="a.py")]),
        AIMessage(content="Done."),
    ]
    script = Script(replies)
    with SyncSteeringClient(lc_worker.settings, deadline_ms=1) as c:  # nothing arrives in 1 ms
        agent, mw = agent_for(c, script, [read_file])
        agent.invoke({"messages": [{"role": "user", "content": "Read a."}]})
        log = mw.step_log
    assert [e.late for e in log] == [True, True] and not any(e.steered for e in log)
    for model_id, msgs in script.calls:
        assert model_id == "claude-sonnet-4-5"
        assert msgs[0].content == BASE and steering_text(msgs) is None


def test_async_use_and_a_failing_run_is_finished_with_the_exception_type(lc_worker: WorkerProcess) -> None:
    @tool
    def broken(path: str) -> str:
        """Always raises."""
        raise ValueError("disk full")

    script = Script([AIMessage(content="Try the tool.", tool_calls=[call("broken", 0, path="x")])])
    s = lc_worker.settings

    async def scenario() -> str | None:
        with SyncSteeringClient(s, deadline_ms=15000) as c:
            agent, mw = agent_for(c, script, [broken])
            with pytest.raises(ValueError):
                async with mw.arun():
                    await agent.ainvoke({"messages": [{"role": "user", "content": "Use the tool."}]})
            assert mw.session is not None and mw.session.outcome == "failure: ValueError"
            return mw.run_id

    run_id = asyncio.run(scenario())
    import json
    import urllib.request

    summary: dict[str, Any] = {}
    for _ in range(100):  # run_finish has no decision: poll the run's state
        url = f"http://127.0.0.1:{s.web_port}/runs/{run_id}"
        summary = json.loads(urllib.request.urlopen(url, timeout=10).read())
        if summary["finished"]:
            break
        time.sleep(0.1)
    assert summary["outcome"] == "failure: ValueError", summary


# -- concurrency, threads, retries (per-invocation state) ------------------------------------


class ConversationModel(ScriptedModel):
    """Replies from the conversation itself, so concurrent invocations do not share a script:
    two tool calls (the first a pair, both reported), then a final answer; fails once first
    when `fail_first` is set (a transient connection error)."""

    fail_first: bool = False

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        from langchain_core.messages import HumanMessage, ToolMessage
        from langchain_core.outputs import ChatGeneration, ChatResult

        self.script.calls.append((self.model_id, list(messages)))
        if self.fail_first and len(self.script.calls) == 1:
            raise ConnectionError("connection reset by peer")
        last_human = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        tools_since = sum(1 for m in messages[last_human:] if isinstance(m, ToolMessage))
        if tools_since == 0:
            reply = AIMessage(
                content="Read both.",
                tool_calls=[call("read_file", 0, path="a.py"), call("read_file", 1, path="b.py")],
            )
        elif tools_since == 2:
            reply = AIMessage(content="Run the tests.", tool_calls=[call("run_tests", 2, path="tests")])
        else:
            reply = AIMessage(content="Done.")
        reply = reply.model_copy(update={"response_metadata": {"model_name": self.model_id}})
        return ChatResult(generations=[ChatGeneration(message=reply)])


def conversation_agent(
    client: SyncSteeringClient, script: Script, middleware: list[Any] | None = None, **kw: Any
) -> tuple[Any, SteeringMiddleware]:
    model = ConversationModel(script=script, model_id="claude-sonnet-4-5", **kw)
    mw = SteeringMiddleware(client, model="claude-sonnet-4-5", model_factory=lambda _id: model, org_id="acme")
    return create_agent(
        model, [read_file, run_tests], system_prompt=BASE, middleware=[*(middleware or []), mw], **{}
    ), mw


def events_by_run(w: WorkerProcess) -> dict[str, list[dict[str, Any]]]:
    s = w.settings
    out: dict[str, list[dict[str, Any]]] = {}
    for ev in asyncio.run(read_all(s.bootstrap_servers, s.steps_topic)):
        if ev["run_id"].startswith("lc-"):  # not the worker's readiness probes
            out.setdefault(ev["run_id"], []).append(ev)
    return out


def shape(events: list[dict[str, Any]]) -> list[str]:
    return [ev["type"] if ev["type"] != "step" else f"step {ev['step']}" for ev in events]


def test_ten_concurrent_invocations_of_one_agent_are_ten_runs(lc_worker: WorkerProcess) -> None:
    script = Script([])

    async def scenario() -> list[Any]:
        with SyncSteeringClient(lc_worker.settings, deadline_ms=15000) as c:
            agent, mw = conversation_agent(c, script)
            outs = await asyncio.gather(
                *(
                    agent.ainvoke({"messages": [{"role": "user", "content": f"Task {i}: read a and b."}]})
                    for i in range(10)
                )
            )
            assert mw.active_runs() == []  # every run finished
            return outs

    outs = asyncio.run(scenario())
    assert all(o["messages"][-1].content == "Done." for o in outs)
    # this test's runs: the worker is shared with the module's other tests
    runs = {k: v for k, v in events_by_run(lc_worker).items() if v[0].get("task", "").startswith("Task ")}
    assert len(runs) == 10, {k: shape(v) for k, v in runs.items()}
    for evs in runs.values():
        assert shape(evs) == ["run_start", "step 1", "step 2", "run_finish"], shape(evs)
        assert evs[-1]["outcome"] == "success"
        both = evs[1]  # the first step had two tool calls: both are reported
        assert both["action"] == "read_file+read_file"
        assert [c["args"]["path"] for c in both["action_input"]] == ["a.py", "b.py"]
    assert sorted(evs[0]["task"] for evs in runs.values()) == sorted(
        f"Task {i}: read a and b." for i in range(10)
    )


def test_a_thread_is_one_run_across_its_turns(lc_worker: WorkerProcess) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    script = Script([])
    with SyncSteeringClient(lc_worker.settings, deadline_ms=15000) as c:
        model = ConversationModel(script=script, model_id="claude-sonnet-4-5")
        mw = SteeringMiddleware(c, model="claude-sonnet-4-5", model_factory=lambda _id: model, org_id="acme")
        agent = create_agent(
            model, [read_file, run_tests], system_prompt=BASE, middleware=[mw], checkpointer=InMemorySaver()
        )
        cfg = {"configurable": {"thread_id": "thread-1"}}
        agent.invoke({"messages": [{"role": "user", "content": "Turn one: read a and b."}]}, cfg)
        run_id = mw.thread_run("thread-1")
        assert run_id is not None
        agent.invoke({"messages": [{"role": "user", "content": "Turn two: now b again."}]}, cfg)
        assert mw.thread_run("thread-1") == run_id  # the same run
        mw.end_thread("thread-1")
        assert mw.thread_run("thread-1") is None
    evs = events_by_run(lc_worker)[run_id]
    # turn 1: calls 1-3; turn 2: calls 4-6 continue the numbering; one start, one finish
    assert shape(evs) == ["run_start", *(f"step {k}" for k in range(1, 6)), "run_finish"], shape(evs)
    assert evs[0]["task"] == "Turn one: read a and b."


def test_a_retried_model_call_neither_ends_the_run_nor_publishes_a_step_twice(
    lc_worker: WorkerProcess,
) -> None:
    from langchain.agents.middleware import ModelRetryMiddleware

    script = Script([])
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.01, jitter=False)
    with SyncSteeringClient(lc_worker.settings, deadline_ms=15000) as c:
        agent, mw = conversation_agent(c, script, [retry], fail_first=True)
        out = agent.invoke({"messages": [{"role": "user", "content": "Read a and b."}]})
        run_id = mw.run_id
    assert out["messages"][-1].content == "Done."
    assert len(script.calls) == 4  # the failed call, then the three of the conversation
    evs = events_by_run(lc_worker)[run_id]
    assert shape(evs) == ["run_start", "step 1", "step 2", "run_finish"], shape(evs)
    assert evs[-1]["outcome"] == "success"


def test_an_idle_thread_is_finished_and_its_next_turn_is_a_new_run(lc_worker: WorkerProcess) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    script = Script([])
    with SyncSteeringClient(lc_worker.settings, deadline_ms=15000) as c:
        model = ConversationModel(script=script, model_id="claude-sonnet-4-5")
        mw = SteeringMiddleware(
            c, model="claude-sonnet-4-5", model_factory=lambda _id: model, org_id="acme", thread_idle_s=1.0
        )
        agent = create_agent(
            model, [read_file, run_tests], system_prompt=BASE, middleware=[mw], checkpointer=InMemorySaver()
        )
        cfg = {"configurable": {"thread_id": "thread-idle"}}
        agent.invoke({"messages": [{"role": "user", "content": "Turn one: read a and b."}]}, cfg)
        first = mw.thread_run("thread-idle")
        time.sleep(1.2)  # longer than thread_idle_s: the conversation is over
        agent.invoke({"messages": [{"role": "user", "content": "Turn two, much later."}]}, cfg)
        second = mw.thread_run("thread-idle")
        mw.end_thread("thread-idle")
    assert first is not None and second is not None and first != second
    runs = events_by_run(lc_worker)
    assert shape(runs[first]) == ["run_start", "step 1", "step 2", "run_finish"], shape(runs[first])
    assert runs[first][-1]["outcome"] == "success"
    # the new run starts at turn two; its answer is not published (the thread ended after it)
    assert shape(runs[second]) == ["run_start", "step 1", "step 2", "run_finish"], shape(runs[second])
