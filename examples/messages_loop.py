"""A plain Anthropic-style messages loop steered by `SteeringSession` (no framework).

    .venv/bin/python -m examples.messages_loop [--port 9092]

`call_model` stands in for `anthropic.Anthropic().messages.create(**request)`: it answers
from a script, so no API key is needed, but the request it gets is exactly what the real
API would get: the caller's `system` and history unchanged (the provider's cached prefix), the
[REASONBLOCKS] block at the end of the last user turn when steering injects, and the routed
`model`.

The loop is traced with OpenTelemetry (the SDK, an in-memory exporter): a span per model call,
and the session writes each decision on it (`streams.agent.tracing`). At the end the example
prints those spans as a tracing backend would show them: the `rb.` attributes of the decision
that steered each call (with the steering text it was given, and its sources), and one
`gen_ai.evaluation.result` event per monitor that fired, with that text as its explanation.
"""

from __future__ import annotations

import argparse
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from examples._local import local_stack
from streams.agent.client import SyncSteeringClient
from streams.agent.compose import REASONBLOCKS_MARKER as MARKER
from streams.agent.compose import body_of
from streams.agent.session import SteeringSession

BASE = "You are a support agent that answers questions from the product documentation."
SCRIPT = [
    ("Search the docs for the refund policy.", "search_docs", {"query": "refund policy"}, "No results."),
    (
        "Search the docs for the refund policy again.",
        "search_docs",
        {"query": "refund policy"},
        "No results.",
    ),
    (
        "Search the docs for the refund policy once more.",
        "search_docs",
        {"query": "refund policy"},
        "No results.",
    ),
    ("Search the docs for refund policy.", "search_docs", {"query": "refund policy"}, "No results."),
    ("Open the billing FAQ instead.", "open_page", {"page": "billing-faq"}, "Refunds within 30 days."),
    ("Refunds are possible within 30 days (billing FAQ).", None, None, None),
]


def call_model(request: dict[str, Any], k: int) -> dict[str, Any]:
    thought, tool, args, _ = SCRIPT[k - 1]
    return {"model": request["model"], "text": thought, "tool": tool, "input": args, "usage": 350 + 40 * k}


def print_trace(spans: tuple[ReadableSpan, ...]) -> None:
    """The exported spans, as a tracing backend shows them: attributes, then events."""
    print("trace:")
    for span in spans:
        a = dict(span.attributes or {})
        print(
            f"  span {span.name!r}: rb.step {a.get('rb.step')} rb.fsm.state {a.get('rb.fsm.state')} "
            f"rb.model.routed {a.get('rb.model.routed')} rb.action {a.get('rb.action')}"
        )
        if a.get("rb.steering.text"):  # the text this call was given, and from where
            sources = ", ".join(str(x) for x in a.get("rb.steering.sources") or ())  # type: ignore[union-attr]
            print(f"    given ({sources}): {str(a['rb.steering.text'])[:80]!r}")
        for e in span.events:
            ea = dict(e.attributes or {})
            said = str(ea.get("gen_ai.evaluation.explanation", ""))
            print(
                f"    event {e.name}: {ea.get('gen_ai.evaluation.name')} "
                f"score {ea.get('gen_ai.evaluation.score.value')} (step {ea.get('rb.step')}) {said[:80]!r}"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=9092)
    args = ap.parse_args()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Can I get a refund after two weeks?"}]
    exporter = InMemorySpanExporter()  # or ConsoleSpanExporter(), or your OTLP exporter
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("examples.messages_loop")
    with local_stack(args.port) as settings, SyncSteeringClient(settings) as client:
        session = SteeringSession(
            client,
            model="claude-sonnet-4-5",
            model_routing={"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5"},
            task=messages[0]["content"],
            task_profile="qa",
            org_id="acme",
        )
        with session:  # run_start now; run_finish at the end (failure: <Type> if this raises)
            for k in range(1, len(SCRIPT) + 1):
                with tracer.start_as_current_span(f"chat {session.model}"):  # the model call's span
                    if not step(session, messages, k):
                        break
        for e in session.step_log:
            print(
                f"  step {e.step}: {e.fsm_state:<6} fired {e.monitors_fired or '-'} injected {e.injection_sources or '-'} {e.latency_ms:.1f} ms"
            )
    provider.shutdown()
    print_trace(exporter.get_finished_spans())
    return 0


def step(session: SteeringSession, messages: list[dict[str, Any]], k: int) -> bool:
    """Model call k and its tool (`messages` grows); False when the model answered."""
    steer = session.begin_step()
    request = steer.request(
        {"model": session.model, "max_tokens": 1024, "system": BASE, "messages": messages}
    )
    # the steering block ends the last user turn; system and history are as sent
    last = request["messages"][-1]["content"]
    blocks = last if isinstance(last, list) else []
    extra = [body_of(b["text"]).splitlines()[0][:110] for b in blocks if b["text"].startswith(MARKER[:-1])]
    print(f"call {k}: model {request['model']:<18} steering blocks {len(extra)} {extra or ''}")
    resp = call_model(request, k)
    messages.append({"role": "assistant", "content": resp["text"]})
    observation = SCRIPT[k - 1][3]
    if resp["tool"] is None:
        return False
    messages.append({"role": "user", "content": f"[{resp['tool']}] {observation}"})
    session.end_step(
        thought=resp["text"],
        action=resp["tool"],
        action_input=resp["input"],
        observation=observation,
        tokens=resp["usage"],
        model_id=resp["model"],
    )
    return True


if __name__ == "__main__":
    raise SystemExit(main())
