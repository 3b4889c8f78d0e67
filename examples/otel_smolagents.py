"""A smolagents manager and its research agent, monitored through OpenTelemetry: no change to
the agents, only a span processor next to the OpenInference instrumentation.

    .venv/bin/python -m examples.otel_smolagents [--port 9092]

The model is smolagents' own `OpenAIModel` with a scripted client (no API key, no network):
the framework, its tool calling, its instrumentation and the steering path are the real ones.
The researcher runs the same failing search three times; the worker's decisions (printed by
the `on_decision` callback) show the loop monitor firing. Observe-only: smolagents never
sees the decisions, they go to the worker's metrics, to the callback and into the trace: the
processor writes each step's decision on a `rb.steering.decision` span under the step's model
call (its evaluation events and `rb.` attributes), printed at the end from an in-memory
exporter, as a tracing backend would show them.
"""

from __future__ import annotations

import argparse
import json
import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from smolagents import OpenAIModel, ToolCallingAgent, tool
from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction

from examples._local import local_stack
from streams.agent.adapters.otel import DECISION_SPAN, ObservedStep, SteeringSpanProcessor
from streams.agent.client import SyncSteeringClient

TASK = "What is the refund window for annual plans?"


@dataclass
class Reply:
    """One scripted chat completion: text, at most one tool call, its token usage."""

    text: str
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    usage: tuple[int, int] = (300, 40)


class ScriptedCompletions:
    """`client.chat.completions.create` answering from a script, in the OpenAI response shape
    (arguments as JSON text, usage in prompt/completion tokens) that `OpenAIModel` reads. An
    exception in the script is raised (the provider failing)."""

    def __init__(self, replies: list[Reply | Exception]) -> None:
        self.replies = list(replies)
        self.lock = threading.Lock()

    def create(self, **request: Any) -> Any:
        with self.lock:
            r = (
                self.replies.pop(0)
                if self.replies
                else Reply("Out of script.", "final_answer", {"answer": "?"})
            )
        if isinstance(r, Exception):
            raise r
        calls = None
        if r.tool:
            fn = ChatMessageToolCallFunction(name=r.tool, arguments=json.dumps(r.args))
            calls = [ChatMessageToolCall(id=f"call-{id(r)}", type="function", function=fn)]
        message = SimpleNamespace(role="assistant", content=r.text, tool_calls=calls)
        usage = SimpleNamespace(prompt_tokens=r.usage[0], completion_tokens=r.usage[1])
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=usage)


class ScriptedModel(OpenAIModel):  # type: ignore[misc]
    """smolagents' OpenAIModel (so its `generate`, and the instrumentation of it, are the real
    ones) whose client plays a script."""

    def __init__(self, model_id: str, replies: list[Reply | Exception]) -> None:
        self.scripted = SimpleNamespace(chat=SimpleNamespace(completions=ScriptedCompletions(replies)))
        super().__init__(model_id=model_id)

    def create_client(self) -> Any:
        return self.scripted


@tool
def search_docs(query: str) -> str:
    """Search the product documentation.

    Args:
        query: what to look for
    """
    if "refund" in query.lower():
        raise ConnectionError("docs index unavailable (503)")
    return f"No page matches {query!r}."


@tool
def open_page(page: str) -> str:
    """Open a documentation page by its name.

    Args:
        page: the page name, e.g. billing-faq
    """
    return "Billing FAQ: annual plans can be refunded within 30 days of purchase."


def researcher(replies: list[Reply | Exception], model_id: str = "scripted-small") -> ToolCallingAgent:
    return ToolCallingAgent(
        tools=[search_docs, open_page],
        model=ScriptedModel(model_id, replies),
        name="researcher",
        description="Finds facts in the product documentation.",
        max_steps=8,
        verbosity_level=-1,
    )


def manager(
    replies: list[Reply | Exception], helpers: list[ToolCallingAgent], model_id: str = "scripted-large"
) -> ToolCallingAgent:
    return ToolCallingAgent(
        tools=[],
        model=ScriptedModel(model_id, replies),
        managed_agents=helpers,
        name="manager",
        max_steps=6,
        verbosity_level=-1,
    )


def team() -> ToolCallingAgent:
    """The example's run: the manager delegates; the researcher loops on a failing search,
    then opens the billing FAQ; both answer."""
    failing = Reply(
        "Search the docs for the refund policy.", "search_docs", {"query": "refund policy"}, (820, 35)
    )
    research = researcher(
        [
            failing,
            Reply(
                "Search the docs for the refund policy again.",
                "search_docs",
                {"query": "refund policy"},
                (900, 38),
            ),
            Reply(
                "Once more: search the refund policy.", "search_docs", {"query": "refund policy"}, (980, 36)
            ),
            Reply(
                "The index is down; open the billing FAQ instead.",
                "open_page",
                {"page": "billing-faq"},
                (1050, 30),
            ),
            Reply(
                "Found it.", "final_answer", {"answer": "Annual plans: refunds within 30 days."}, (1120, 25)
            ),
        ]
    )
    return manager(
        [
            Reply("Ask the researcher to find the refund window.", "researcher", {"task": TASK}, (600, 45)),
            Reply(
                "The researcher found it.",
                "final_answer",
                {"answer": "Within 30 days of purchase."},
                (700, 20),
            ),
        ],
        [research],
    )


def show(o: ObservedStep) -> None:
    """The callback: one line per decision (on the client's thread)."""
    d, e = o.decision, o.event
    if o.step == 0:
        print(f"run {o.run_id}: task {e.get('task')!r}, decision 0 {'received' if d else 'late'}", flush=True)
        return
    mon = (d.data.get("monitors") or {}) if d is not None else {}
    fired = mon.get("fired") or []
    verdict = "decision late" if d is None else f"fired {fired} {mon.get('failure_type') or ''}".rstrip()
    print(
        f"  step {o.step}: {e.get('agent') or '-':<10} {e.get('action') or '(message)':<12} "
        f"tokens {e.get('tokens')} model {e.get('model_id')}  {verdict}",
        flush=True,
    )
    if d is not None and d.injection_text and fired:
        print(f"      would steer with: {d.injection_text.splitlines()[1][:120]}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=9092)
    args = ap.parse_args()
    with local_stack(args.port) as settings, SyncSteeringClient(settings, deadline_ms=15_000) as client:
        # the wiring: a tracer provider, the processor, the framework's instrumentation
        provider = TracerProvider()
        processor = SteeringSpanProcessor(
            client, on_decision=show, tracer_provider=provider, org_id="acme", task_profile="qa"
        )
        provider.add_span_processor(processor)
        exporter = InMemorySpanExporter()  # your exporter (OTLP to Phoenix, Langfuse, ...)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        SmolagentsInstrumentor().instrument(tracer_provider=provider)
        try:
            answer = team().run(TASK)
            processor.force_flush()
        finally:
            SmolagentsInstrumentor().uninstrument()
        print(f"final answer: {answer}")
        print(
            f"published {processor.published}, late {processor.late}, dropped {processor.dropped}, errors {processor.errors}"
        )
        print("trace:")
        for span in exporter.get_finished_spans():
            if span.name != DECISION_SPAN:
                continue
            a = dict(span.attributes or {})
            fired = [e.attributes.get("gen_ai.evaluation.name") for e in span.events if e.attributes]
            print(f"  {span.name} (step {a.get('rb.step')}) {a.get('rb.fsm.state')}: evaluations {fired}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
