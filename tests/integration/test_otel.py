"""A real smolagents run (a manager and its managed agent, smolagents' own OpenAIModel with a
scripted client), instrumented with OpenInference's SmolagentsInstrumentor, monitored through
`SteeringSpanProcessor` by the real broker and worker: observe-only."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from examples.otel_smolagents import TASK, Reply, researcher, team
from streams.agent.adapters.otel import ObservedStep, SteeringSpanProcessor
from streams.agent.client import SyncSteeringClient
from streams.local.worker_process import WorkerProcess
from tests.integration.kafka_io import read_all

pytestmark = pytest.mark.integration


@dataclass
class Observed:
    """What the processor's callback received, per run."""

    runs: dict[str, list[ObservedStep]] = field(default_factory=dict)

    def __call__(self, o: ObservedStep) -> None:
        self.runs.setdefault(o.run_id, []).append(o)


@dataclass
class Stack:
    worker: WorkerProcess
    processor: SteeringSpanProcessor
    seen: Observed

    tracer: trace.Tracer

    def run(self, agent: Any, task: str, wrap: bool = False) -> tuple[str, list[ObservedStep], Any]:
        """Run the agent (`wrap`: inside a span of our own); its run id, the decisions the
        callback got, and the agent's result."""
        before = set(self.seen.runs)
        try:
            with self.tracer.start_as_current_span("task") if wrap else contextlib.nullcontext():
                result: Any = agent.run(task)
        except Exception as exc:
            result = exc
        assert self.processor.force_flush(60_000)
        (run_id,) = set(self.seen.runs) - before
        return run_id, sorted(self.seen.runs[run_id], key=lambda o: o.step), result

    def wire(self, run_id: str) -> list[dict[str, Any]]:
        s = self.worker.settings
        return [
            e
            for e in asyncio.run(read_all(s.bootstrap_servers, s.steps_topic, idle_s=1.5))
            if e["run_id"] == run_id
        ]


@pytest.fixture(scope="module")
def stack(adapters_worker: WorkerProcess) -> Iterator[Stack]:
    """The adapters' shared worker (conftest), one client, one instrumented tracer provider
    for the module; each test makes its own runs (one trace each)."""
    w = adapters_worker
    seen = Observed()
    client = SyncSteeringClient(w.settings, deadline_ms=20_000)
    client.start()
    processor = SteeringSpanProcessor(client, on_decision=seen, org_id="acme")
    provider = TracerProvider()
    provider.add_span_processor(processor)
    SmolagentsInstrumentor().instrument(tracer_provider=provider)
    try:
        yield Stack(w, processor, seen, provider.get_tracer("app"))
    finally:
        SmolagentsInstrumentor().uninstrument()
        provider.shutdown()
        client.stop()
    assert (processor.errors, processor.dropped) == (0, 0)


def test_a_manager_and_its_researcher_are_monitored_step_by_step(stack: Stack) -> None:
    t0 = time.monotonic()
    run_id, seen, answer = stack.run(team(), TASK)
    assert answer == "Within 30 days of purchase."
    steps = [o for o in seen if o.step > 0]
    got = [
        (o.event.get("agent"), o.event.get("action"), o.event.get("tokens"), o.event.get("model_id"))
        for o in steps
    ]
    assert got == [
        ("manager", "researcher", 645, "scripted-large"),  # the delegation, before the researcher's steps
        ("researcher", "search_docs", 855, "scripted-small"),
        ("researcher", "search_docs", 938, "scripted-small"),
        ("researcher", "search_docs", 1016, "scripted-small"),
        ("researcher", "open_page", 1080, "scripted-small"),
        ("researcher", "final_answer", 1145, "scripted-small"),
        ("manager", "final_answer", 720, "scripted-large"),
    ]
    second = steps[1].event
    assert second["thought"] == "Search the docs for the refund policy."
    assert second["action_input"] == {
        "query": "refund policy"
    }  # the model's arguments, not the wrapper's dump
    assert second["observation"] == "ConnectionError: docs index unavailable (503)"
    assert second["observation_is_error"] is True
    assert "30 days" in steps[4].event["observation"]
    # a decision came back for run_start and every step, each answering its own step
    assert [o.step for o in seen] == list(range(8))
    assert all(o.decision is not None and o.decision.step == o.step for o in seen)
    # the third identical failure is a loop, and the decision says so (what the dashboards count)
    fired = {o.step: o.decision.data["monitors"]["fired"] for o in steps if o.decision is not None}
    assert "semantic_loop" in fired[4], fired
    assert steps[3].decision is not None and "search_docs" in (steps[3].decision.injection_text or "")
    # the worker received exactly the run: run_start (task, framework), 7 steps, run_finish success
    wire = stack.wire(run_id)
    assert [e["type"] for e in wire] == ["run_start"] + ["step"] * 7 + ["run_finish"]
    assert (wire[0]["task"], wire[0]["framework"], wire[0]["agent_name"], wire[0]["org_id"]) == (
        TASK,
        "smolagents",
        "manager",
        "acme",
    )
    assert wire[-1]["outcome"] == "success"
    print(f"\nmulti-agent run: 9 events, decisions back in {time.monotonic() - t0:.1f}s")


def test_a_single_agent_whose_model_fails_is_a_failed_run_without_agent_names(stack: Stack) -> None:
    """The instrumentation leaves a raising agent's span open: the run ends with our span around it."""
    agent = researcher(
        [
            Reply("Search for pricing.", "search_docs", {"query": "pricing"}, (400, 30)),
            RuntimeError("model endpoint down"),
        ]
    )
    run_id, seen, result = stack.run(agent, "How much is the pro plan?", wrap=True)
    assert isinstance(result, Exception), result
    steps = [o.event for o in seen if o.step > 0]
    assert [(s["action"], s["observation"], s["tokens"]) for s in steps] == [
        ("search_docs", "No page matches 'pricing'.", 430)
    ]
    assert "agent" not in steps[0]  # one agent: no speaker names (the monitors would read a chat)
    wire = stack.wire(run_id)
    assert [e["type"] for e in wire] == ["run_start", "step", "run_finish"]
    assert wire[0]["task"] == "How much is the pro plan?"
    assert wire[-1]["outcome"] == f"failure: {type(result).__name__}", (wire[-1], result)
