"""OpenTelemetry spans (OpenInference and GenAI conventions) to run events, and the processor
that publishes them without ever holding up the instrumented application."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.trace import Status, StatusCode

from streams.agent.adapters.otel import (
    TEXT_CHARS,
    ObservedStep,
    Out,
    SpanMapper,
    SteeringSpanProcessor,
    parse_args,
)
from streams.agent.client import Decision


class Recorder(SpanProcessor):
    """Feeds a real SDK's spans to a SpanMapper and keeps what it made."""

    def __init__(self, **kw: Any) -> None:
        self.mapper = SpanMapper({"org_id": "acme"}, **kw)
        self.out: list[Out] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.out += self.mapper.start(span)

    def on_end(self, span: ReadableSpan) -> None:
        self.out += self.mapper.end(span)

    def steps(self) -> list[dict[str, Any]]:
        return [{"step": o.step, **o.fields} for o in self.out if o.kind == "step"]

    def kinds(self) -> list[str]:
        return [o.kind if o.kind != "step" else f"step {o.step}" for o in self.out]


def tracer_with(proc: SpanProcessor) -> trace.Tracer:
    provider = TracerProvider()
    provider.add_span_processor(proc)
    return provider.get_tracer("openinference.instrumentation.testfw")


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


# -- OpenInference ------------------------------------------------------------------------
def oi_llm(
    tracer: trace.Tracer,
    text: str | None,
    calls: list[tuple[str, dict[str, Any]]],
    tokens: tuple[int, int],
    model: str = "gpt-x",
) -> None:
    with tracer.start_as_current_span("Model.generate", attributes={"openinference.span.kind": "LLM"}) as s:
        s.set_attribute("llm.model_name", model)
        s.set_attribute("llm.token_count.prompt", tokens[0])
        s.set_attribute("llm.token_count.completion", tokens[1])
        s.set_attribute("llm.token_count.total", sum(tokens))
        if text is not None:
            s.set_attribute("llm.output_messages.0.message.contents.0.message_content.text", text)
        for j, (name, args) in enumerate(calls):
            p = f"llm.output_messages.0.message.tool_calls.{j}.tool_call"
            s.set_attribute(f"{p}.id", f"call-{j}")
            s.set_attribute(f"{p}.function.name", name)
            s.set_attribute(f"{p}.function.arguments", json.dumps(args))


def oi_tool(tracer: trace.Tracer, name: str, kwargs: dict[str, Any], output: str | Exception) -> None:
    # the wrapper's dump of Tool.__call__'s bound arguments, as the smolagents instrumentation records it
    dump = json.dumps({"args": [], "sanitize_inputs_outputs": True, "kwargs": kwargs})
    attrs = {"openinference.span.kind": "TOOL", "tool.name": name, "input.value": dump}
    fails = isinstance(output, Exception)
    with (
        contextlib.suppress(type(output)) if fails else contextlib.nullcontext(),
        tracer.start_as_current_span("SimpleTool", attributes=attrs) as s,
    ):
        if isinstance(output, Exception):
            raise output
        s.set_attribute("output.value", output)


def test_openinference_agent_run_becomes_run_start_steps_and_run_finish(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    task = json.dumps({"task": "Find the capital of France", "stream": False})
    with tracer.start_as_current_span(
        "ToolCallingAgent.run", attributes={"openinference.span.kind": "AGENT", "input.value": task}
    ):
        oi_llm(tracer, "I will search for it.", [("web_search", {"query": "capital of France"})], (400, 30))
        oi_tool(tracer, "web_search", {"query": "capital of France"}, "Paris is the capital of France.")
        oi_llm(tracer, "The answer is Paris.", [], (520, 12), model="gpt-x-2")
    assert rec.kinds() == ["run_start", "step 1", "step 2", "run_finish"]
    start = rec.out[0]
    assert start.run_id.startswith("otel-") and len(start.run_id) == 5 + 32
    assert start.fields == {
        "task": "Find the capital of France",
        "agent_name": "ToolCallingAgent",
        "framework": "testfw",
        "org_id": "acme",
    }
    one, two = rec.steps()
    assert one == {
        "step": 1,
        "thought": "I will search for it.",
        "action": "web_search",
        "action_input": {"query": "capital of France"},
        "observation": "Paris is the capital of France.",
        "tokens": 430,
        "model_id": "gpt-x",
        "usage": {
            "input_tokens": 400,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "output_tokens": 30,
            "estimated": False,
        },
        "served_model": "gpt-x",
    }
    # no tool call: a message step; the model the call reported, not the first one
    assert two == {
        "step": 2,
        "thought": "The answer is Paris.",
        "tokens": 532,
        "model_id": "gpt-x-2",
        "usage": {
            "input_tokens": 520,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "output_tokens": 12,
            "estimated": False,
        },
        "served_model": "gpt-x-2",
    }
    assert rec.out[-1].fields == {"outcome": "success"}
    assert rec.mapper.live_spans == 0


def test_a_failing_tool_is_an_error_observation_and_a_failed_root_a_failed_run(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    with (
        pytest.raises(RuntimeError),
        tracer.start_as_current_span("agent.run", attributes={"openinference.span.kind": "AGENT"}),
    ):
        oi_llm(tracer, "Query the db.", [("query_db", {"sql": "select 1"})], (10, 5))
        oi_tool(tracer, "query_db", {"sql": "select 1"}, ConnectionError("database unreachable"))
        raise RuntimeError("agent gave up")
    (step,) = rec.steps()
    assert step["observation"] == "ConnectionError: database unreachable"
    assert step["observation_is_error"] is True
    assert rec.out[-1].fields == {"outcome": "failure: RuntimeError"}


def test_parallel_tool_calls_are_one_step_with_every_call(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    with tracer.start_as_current_span("agent.run", attributes={"openinference.span.kind": "AGENT"}):
        oi_llm(
            tracer,
            "Both at once.",
            [("read_file", {"path": "a.py"}), ("read_file", {"path": "b.py"})],
            (1, 1),
        )
        oi_tool(tracer, "read_file", {"path": "a.py"}, "A")
        oi_tool(tracer, "read_file", {"path": "b.py"}, "B")
    (step,) = rec.steps()
    assert step["action"] == "read_file+read_file"
    assert step["action_input"] == [
        {"name": "read_file", "args": {"path": "a.py"}},
        {"name": "read_file", "args": {"path": "b.py"}},
    ]
    assert step["observation"] == "A\nB"


def test_a_model_call_or_tool_inside_a_tool_is_not_a_step_of_the_agent(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    with tracer.start_as_current_span("agent.run", attributes={"openinference.span.kind": "AGENT"}):
        oi_llm(tracer, "Summarise the page.", [("summarise", {"url": "u"})], (1, 1))
        with tracer.start_as_current_span(
            "summarise", attributes={"openinference.span.kind": "TOOL", "tool.name": "summarise"}
        ) as t:
            oi_llm(tracer, "a summary", [], (50, 50))  # the tool's own model call
            t.set_attribute("output.value", "short page")
        oi_llm(tracer, "Done.", [], (1, 1))
    assert [(s["step"], s.get("action"), s.get("observation")) for s in rec.steps()] == [
        (1, "summarise", "short page"),
        (2, None, None),
    ]


def test_a_failed_model_call_is_no_step_and_a_tool_nobody_asked_for_is_its_own(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    with tracer.start_as_current_span("agent.run", attributes={"openinference.span.kind": "AGENT"}):
        with tracer.start_as_current_span(
            "Model.generate", attributes={"openinference.span.kind": "LLM"}
        ) as s:
            s.set_status(Status(StatusCode.ERROR, "rate limited"))
        oi_tool(tracer, "lookup", {"key": "k"}, "v")
    assert rec.steps() == [{"step": 1, "action": "lookup", "action_input": {"key": "k"}, "observation": "v"}]


def test_an_agent_span_left_open_ends_with_the_root_span_around_it(rec: Recorder) -> None:
    """An instrumentation that never ends its agent span on an exception: the user's own span
    around the call ends the run (as a failure) and nothing of it is kept."""
    tracer = tracer_with(rec)
    with pytest.raises(RuntimeError), tracer.start_as_current_span("task"):
        agent = tracer.start_span("agent.run", attributes={"openinference.span.kind": "AGENT"})
        with trace.use_span(agent, end_on_exit=False):
            oi_llm(tracer, "Try.", [], (1, 1))
            raise RuntimeError("model endpoint down")
    assert rec.kinds() == ["run_start", "step 1", "run_finish"]
    assert rec.out[-1].fields == {"outcome": "failure: RuntimeError"}
    assert rec.mapper.live_spans == 0


def test_a_trace_without_model_calls_publishes_nothing(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    with tracer.start_as_current_span("GET /health"), tracer.start_as_current_span("db query"):
        pass
    assert rec.out == []
    assert rec.mapper.live_spans == 0


def test_model_calls_outside_any_agent_are_a_run_of_the_trace(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    with tracer.start_as_current_span("POST /chat"):
        oi_llm(tracer, "Hello!", [], (3, 2))
    assert rec.kinds() == ["run_start", "step 1", "run_finish"]
    assert "agent" not in rec.steps()[0]


def test_a_retrieval_is_an_action_whose_observation_is_the_documents(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    with tracer.start_as_current_span("query", attributes={"openinference.span.kind": "AGENT"}):
        oi_llm(tracer, "Look it up.", [], (1, 1))
        attrs = {
            "openinference.span.kind": "RETRIEVER",
            "input.value": "refund policy",
            "retrieval.documents.0.document.content": "Refunds within 30 days.",
            "retrieval.documents.1.document.content": "No refunds on sale items.",
        }
        with tracer.start_as_current_span("VectorIndexRetriever.retrieve", attributes=attrs):
            pass
    (step,) = rec.steps()
    assert step["action"] == "retrieve" and step["action_input"] == "refund policy"
    assert step["observation"] == "Refunds within 30 days.\nNo refunds on sale items."


# -- GenAI semantic conventions -------------------------------------------------------------
def genai_chat(tracer: trace.Tracer, text: str, calls: list[dict[str, Any]], usage: tuple[int, int]) -> None:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
    with tracer.start_as_current_span("chat gpt-4o", attributes=attrs) as s:
        parts: list[dict[str, Any]] = [{"type": "text", "content": text}]
        parts += [{"type": "tool_call", **c} for c in calls]
        s.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": parts}]))
        s.set_attribute("gen_ai.response.model", "gpt-4o-2024-08-06")
        s.set_attribute("gen_ai.usage.input_tokens", usage[0])
        s.set_attribute("gen_ai.usage.output_tokens", usage[1])


def genai_tool(tracer: trace.Tracer, name: str, call_id: str, args: dict[str, Any], result: str) -> None:
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
    }
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs) as s:
        s.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
        s.set_attribute("gen_ai.tool.call.result", result)


def genai_agent(tracer: trace.Tracer, name: str) -> Any:
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    return tracer.start_as_current_span(f"invoke_agent {name}", attributes=attrs)


def test_genai_conventions_give_the_same_steps(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    with genai_agent(tracer, "Weather bot"):
        genai_chat(
            tracer,
            "Checking.",
            [{"id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}}],
            (200, 20),
        )
        genai_tool(tracer, "get_weather", "c1", {"city": "Paris"}, "rain, 12C")
        genai_chat(tracer, "It rains in Paris.", [], (260, 10))
    assert rec.out[0].fields["agent_name"] == "Weather bot"
    one, two = rec.steps()
    assert one == {
        "step": 1,
        "thought": "Checking.",
        "action": "get_weather",
        "action_input": {"city": "Paris"},
        "observation": "rain, 12C",
        "tokens": 220,
        "model_id": "gpt-4o-2024-08-06",
        "usage": {
            "input_tokens": 200,
            "cache_read_tokens": 0,
            "cache_write_tokens": 0,
            "output_tokens": 20,
            "estimated": False,
        },
        "served_model": "gpt-4o-2024-08-06",
    }
    assert two["thought"] == "It rains in Paris." and two["tokens"] == 270
    assert rec.out[-1].kind == "run_finish"


def test_cache_token_attributes_split_the_steps_usage(rec: Recorder) -> None:
    """OpenInference's prompt_details and the GenAI conventions' cache attributes: the prompt
    count includes them, the step's `usage` has them apart."""
    tracer = tracer_with(rec)
    with tracer.start_as_current_span("run", attributes={"openinference.span.kind": "AGENT"}):
        with tracer.start_as_current_span("llm", attributes={"openinference.span.kind": "LLM"}) as s:
            s.set_attribute("llm.model_name", "claude-sonnet-4-5")
            s.set_attribute("llm.token_count.prompt", 12_000)
            s.set_attribute("llm.token_count.prompt_details.cache_read", 10_000)
            s.set_attribute("llm.token_count.prompt_details.cache_write", 1_500)
            s.set_attribute("llm.token_count.completion", 80)
            s.set_attribute("llm.output_messages.0.message.contents.0.message_content.text", "Done.")
        with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}) as s:
            s.set_attribute("gen_ai.request.model", "claude-haiku-4-5")
            s.set_attribute("gen_ai.response.model", "claude-haiku-4-5-20251001")
            s.set_attribute("gen_ai.usage.input_tokens", 3_000)
            s.set_attribute("gen_ai.usage.cache_read.input_tokens", 2_900)
            s.set_attribute("gen_ai.usage.output_tokens", 15)
            parts = [{"type": "text", "content": "Rain."}]
            s.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": parts}]))
    one, two = rec.steps()
    assert one["usage"] == {
        "input_tokens": 500,
        "cache_read_tokens": 10000,
        "cache_write_tokens": 1500,
        "output_tokens": 80,
        "estimated": False,
    }
    assert two["usage"] == {
        "input_tokens": 100,
        "cache_read_tokens": 2900,
        "cache_write_tokens": 0,
        "output_tokens": 15,
        "estimated": False,
    }
    assert two["served_model"] == "claude-haiku-4-5-20251001"


def test_a_sub_agent_makes_the_run_multi_agent_and_the_delegation_goes_first(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    with genai_agent(tracer, "manager"):
        genai_chat(
            tracer,
            "Ask the researcher.",
            [{"id": "d1", "name": "researcher", "arguments": {"task": "find x"}}],
            (100, 10),
        )
        with genai_agent(tracer, "researcher"):
            genai_chat(
                tracer, "Searching.", [{"id": "s1", "name": "search", "arguments": {"q": "x"}}], (50, 5)
            )
            genai_tool(tracer, "search", "s1", {"q": "x"}, "x = 42")
            genai_chat(tracer, "x is 42.", [], (60, 5))
        genai_chat(tracer, "The answer is 42.", [], (120, 8))
    got = [(s["step"], s.get("agent"), s.get("action"), s["tokens"]) for s in rec.steps()]
    assert got == [
        (1, "manager", "researcher", 110),  # before any of the researcher's steps: the manager leads
        (2, "researcher", "search", 55),
        (3, "researcher", None, 65),
        (4, "manager", None, 128),
    ]
    assert rec.kinds().count("run_start") == 1 and rec.kinds()[-1] == "run_finish"


def test_a_single_agent_run_names_no_agent_unless_asked() -> None:
    for multi, want in ((None, None), (True, "solo")):
        rec = Recorder(multi_agent=multi)
        tracer = tracer_with(rec)
        with genai_agent(tracer, "solo"):
            genai_chat(tracer, "Hi.", [], (1, 1))
        assert rec.steps()[0].get("agent") == want


def test_a_wrapper_dump_of_bound_arguments_is_unwrapped() -> None:
    assert parse_args('{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"q": "x"}}') == {"q": "x"}
    assert parse_args({"args": [1], "kwargs": {"q": "x"}}) == {"q": "x", "args": [1]}
    assert parse_args('{"kwargs": {"q": 1}, "other": 2}') == {"kwargs": {"q": 1}, "other": 2}
    assert parse_args("plain text") == "plain text"
    assert parse_args('"quoted"') == '"quoted"'


# -- the processor: publishing off the span thread ---------------------------------------------
class SlowAsyncClient:
    """The async client's surface, answering after `delay_s` (a slow worker)."""

    def __init__(self, delay_s: float = 0.0, fail: type[Exception] | None = None) -> None:
        self.delay_s = delay_s
        self.fail = fail
        self.events: list[tuple[str, str, int]] = []

    async def start_run(self, run_id: str, **fields: Any) -> Decision | None:
        return await self._answer("run_start", run_id, 0)

    async def step(self, run_id: str, step: int, **fields: Any) -> Decision | None:
        return await self._answer("step", run_id, step)

    async def finish_run(self, run_id: str, outcome: str = "success") -> None:
        self.events.append(("run_finish", run_id, -1))

    def forget(self, run_id: str) -> None:
        pass

    async def _answer(self, kind: str, run_id: str, step: int) -> Decision | None:
        await asyncio.sleep(self.delay_s)
        if self.fail is not None:
            raise self.fail("broker away")
        self.events.append((kind, run_id, step))
        return Decision({"run_id": run_id, "step": step, "monitors": {"fired": []}}, 1.0)


class LoopClient:
    """What the processor uses of `SyncSteeringClient`: its loop (on a thread) and async client."""

    def __init__(self, inner: SlowAsyncClient) -> None:
        self.loop = asyncio.new_event_loop()
        self.async_client = inner
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


@pytest.fixture
def loop_client() -> Iterator[LoopClient]:
    c = LoopClient(SlowAsyncClient(delay_s=0.1))
    yield c
    c.stop()


def agent_run(tracer: trace.Tracer, calls: int) -> list[float]:
    """An agent making `calls` model calls; the time each span took to end (the app's cost)."""
    took: list[float] = []
    with genai_agent(tracer, "a"):
        for k in range(calls):
            span = tracer.start_span("chat m", attributes={"gen_ai.operation.name": "chat"})
            span.set_attribute(
                "gen_ai.output.messages", json.dumps([{"parts": [{"type": "text", "content": f"t{k}"}]}])
            )
            t0 = time.perf_counter()
            span.end()
            took.append(time.perf_counter() - t0)
    return took


def test_the_processor_never_waits_for_a_decision_and_delivers_them_in_order(loop_client: LoopClient) -> None:
    seen: list[ObservedStep] = []
    proc = SteeringSpanProcessor(loop_client, on_decision=seen.append)  # type: ignore[arg-type]
    took = agent_run(tracer_with(proc), 10)
    # each decision takes 0.1 s: ending all ten spans costs the app less than one of them
    assert sum(took) < 0.1, took
    assert proc.force_flush(10_000)
    assert [o.step for o in seen] == list(range(11))  # run_start (0), then steps 1..10 in order
    assert all(o.decision is not None for o in seen)
    assert seen[3].event["thought"] == "t2" and seen[3].event["type"] == "step"
    assert loop_client.async_client.events[-1][0] == "run_finish"
    assert (proc.published, proc.decisions, proc.late, proc.dropped, proc.errors) == (12, 11, 0, 0, 0)


def test_past_max_pending_events_are_dropped_and_counted_not_queued(loop_client: LoopClient) -> None:
    proc = SteeringSpanProcessor(loop_client, max_pending=3)  # type: ignore[arg-type]
    tracer = tracer_with(proc)
    agent_run(tracer, 10)
    agent_run(tracer, 1)  # a new run while full: dropped whole (its steps and finish too)
    assert proc.force_flush(10_000)
    assert proc.published + proc.dropped == 12 + 3
    assert proc.dropped >= 8
    runs = {r for _, r, _ in loop_client.async_client.events}
    assert len(runs) == 1  # the second run never reached the client (not even its finish)


def test_publishing_errors_are_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    c = LoopClient(SlowAsyncClient(fail=ConnectionError))
    seen: list[ObservedStep] = []
    try:
        proc = SteeringSpanProcessor(c, on_decision=seen.append)  # type: ignore[arg-type]
        with caplog.at_level(logging.WARNING, logger="streams.agent.adapters.otel"):
            agent_run(tracer_with(proc), 4)
            assert proc.force_flush(10_000)
    finally:
        c.stop()
    assert proc.errors == 5  # run_start and four steps
    assert len([r for r in caplog.records if "ConnectionError" in r.getMessage()]) == 2  # per kind
    assert seen == []


def test_a_raising_callback_is_counted_and_the_run_goes_on(loop_client: LoopClient) -> None:
    def bad(o: ObservedStep) -> None:
        raise ValueError("callback bug")

    loop_client.async_client.delay_s = 0.0
    proc = SteeringSpanProcessor(loop_client, on_decision=bad)  # type: ignore[arg-type]
    agent_run(tracer_with(proc), 3)
    assert proc.force_flush(5_000)
    assert proc.errors == 4 and proc.published == 5


def test_bad_run_options_are_refused_at_construction(loop_client: LoopClient) -> None:
    with pytest.raises(ValueError, match="monitors_off: unknown monitor 'loop'"):
        SteeringSpanProcessor(loop_client, monitors_off=["loop"])  # type: ignore[arg-type]


def test_the_module_imports_nothing_of_the_worker() -> None:
    """The agent side stays light: stdlib, OpenTelemetry, OpenInference, streams.agent."""
    src = Path(__file__).parents[4] / "streams" / "agent" / "adapters" / "otel.py"
    tree = ast.parse(src.read_text())
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mods.add(("." * node.level) + (node.module or ""))
        elif isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
    allowed = (
        "opentelemetry",
        "openinference",
        "..client",
        "..tracing",
        "..usage",
        "..validation",
        "__future__",
    )
    stdlib = {
        "asyncio",
        "contextlib",
        "json",
        "logging",
        "re",
        "threading",
        "time",
        "collections.abc",
        "dataclasses",
        "typing",
    }
    assert {m for m in mods if not m.startswith(allowed) and m not in stdlib} == set()


def test_a_part_of_a_distributed_trace_is_a_run_of_its_own(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    remote = trace.SpanContext(
        0xABC, 0x123, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)
    )
    for _ in range(2):  # two requests of one distributed trace handled here
        with tracer.start_as_current_span(
            "handler", context=trace.set_span_in_context(trace.NonRecordingSpan(remote))
        ):
            oi_llm(tracer, "Hi.", [], (1, 1))
    starts = [o.run_id for o in rec.out if o.kind == "run_start"]
    assert len(set(starts)) == 2 and all(r.startswith(f"otel-{0xABC:032x}-") for r in starts)


def test_events_after_the_client_stopped_are_counted_not_queued() -> None:
    c = LoopClient(SlowAsyncClient())
    c.stop()
    proc = SteeringSpanProcessor(c)  # type: ignore[arg-type]
    agent_run(tracer_with(proc), 2)
    assert proc.pending == 0 and proc.errors == 4 and proc.force_flush(100)


def test_a_run_whose_root_never_ends_is_finished_once_idle_and_forgotten() -> None:
    """A hung app (or an instrumentation that leaves a span open) must not hold its run's
    spans until the cap: after `idle_s` without a span moving, the next span finishes it."""
    now = [0.0]
    r = Recorder(idle_s=600.0, clock=lambda: now[0])
    tracer = tracer_with(r)
    root = tracer.start_span("ToolCallingAgent.run", attributes={"openinference.span.kind": "AGENT"})
    with trace.use_span(root, end_on_exit=False):
        oi_llm(tracer, "I will search for it.", [("web_search", {"query": "q"})], (10, 5))
        oi_tool(tracer, "web_search", {"query": "q"}, "nothing")
    assert r.kinds() == ["run_start"] and r.mapper.live_spans == 1  # the root, still open
    now[0] = 300.0
    with tracer.start_as_current_span("other", attributes={"openinference.span.kind": "CHAIN"}):
        pass
    assert r.kinds() == ["run_start"]  # 5 minutes idle: kept
    now[0] = 1000.0  # 1,000 s after the open run's last span moved
    with tracer.start_as_current_span("later", attributes={"openinference.span.kind": "CHAIN"}):
        pass
    assert r.kinds() == ["run_start", "step 1", "run_finish"]  # its pending step first, then its end
    assert r.out[-1].fields == {"outcome": "failure: trace_not_ended"}
    assert r.mapper.abandoned == 1 and r.mapper.live_spans == 0
    root.end()  # ends after all: nothing more for a forgotten run
    assert r.kinds() == ["run_start", "step 1", "run_finish"]


# -- memory while no worker answers (issue 38 item 7) -------------------------------------
def test_tool_inputs_are_cut_before_an_event_is_queued(rec: Recorder) -> None:
    tracer = tracer_with(rec)
    huge = "y" * 1_000_000
    with genai_agent(tracer, "a"):
        oi_tool(tracer, "upload", {"path": "a.txt", "data": huge}, "ok")  # JSON: not even parsed
        oi_tool(tracer, "upload", {"path": "b.txt", "data": "z" * 20_000}, "ok")  # parsed, then cut
    inputs = [s["action_input"] for s in rec.steps()]
    assert len(inputs) == 2
    for value in inputs:
        assert isinstance(value, str) and len(value) <= TEXT_CHARS  # the JSON text's head
    assert inputs[1].startswith('{"path": "b.txt"') or '"b.txt"' in inputs[1]
    assert parse_args({"k": "v"}) == {"k": "v"} and parse_args('{"k": 1}') == {"k": 1}  # small: whole


def test_while_no_worker_answers_pending_events_hold_bounded_memory() -> None:
    """The issue's case: RSS 44 -> 430 MB at 400 pending 1 MB inputs. Now each input is cut
    to TEXT_CHARS before it is queued, and past max_pending_bytes events are dropped."""
    import tracemalloc

    c = LoopClient(SlowAsyncClient(delay_s=3600.0))  # a worker that never answers
    try:
        proc = SteeringSpanProcessor(c, max_pending_bytes=2_000_000)  # type: ignore[arg-type]
        tracer = tracer_with(proc)
        tracemalloc.start()
        try:
            for i in range(200):
                with genai_agent(tracer, f"a{i}"):
                    oi_tool(tracer, "upload", {"data": "x" * 1_000_000 + str(i)}, "ok")
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert proc.pending_bytes <= 2_000_000 + 64_000 and proc.dropped > 0
        assert held < 20_000_000, held  # not 200 MB of inputs
    finally:
        asyncio.run_coroutine_threadsafe(cancel_all(), c.loop).result(5)
        c.stop()


async def cancel_all() -> None:
    """Cancel the loop's other tasks (publishes waiting on a worker that never answers)."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
