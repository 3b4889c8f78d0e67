"""What a steering decision must look like in the user's trace, computed from the decision's own
fields (not from `streams.agent.tracing`): the tests compare the spans an in-memory exporter
received against it, field for field."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streams.shared.contract import REASONBLOCKS_MARKER
from streams.shared.untrusted import scrub

EVALUATION = "gen_ai.evaluation.result"
REFUSAL = "rb.gate.refused"
GUARDRAIL = "run_guardrail rb-streams"
TEXT_MAX = 2000
NAME_MAX = 100

_EXPORTER = InMemorySpanExporter()
_PROVIDER: TracerProvider | None = None


def global_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    """The process's global tracer provider, set once (OpenTelemetry allows one) with an
    in-memory exporter behind a SimpleSpanProcessor: the guardrail spans are made with the
    global provider, as in an application that set one."""
    global _PROVIDER
    if _PROVIDER is None:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):  # another test set one first: export from it too
            provider = current
        else:
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        _PROVIDER = provider
    return _PROVIDER, _EXPORTER


@pytest.fixture
def exported() -> Iterator[tuple[trace.Tracer, InMemorySpanExporter]]:
    provider, exporter = global_provider()
    exporter.clear()
    yield provider.get_tracer("app"), exporter
    exporter.clear()


def data_of(decision: Any) -> Mapping[str, Any]:
    return getattr(decision, "data", decision)  # type: ignore[no-any-return]


def cleaned(text: str | None, n: int = TEXT_MAX) -> str | None:
    """A worker's text as it may stand in a trace: scrubbed and cut (the marker line dropped)."""
    if not isinstance(text, str):
        return None
    t = scrub(text.strip().removeprefix(REASONBLOCKS_MARKER), n)[:n].strip()
    return t or None


def short(value: object, n: int = NAME_MAX) -> str | None:
    """A name (a monitor's, a model's, a state's) or a reason as it may stand in a trace:
    scrubbed, cut."""
    if not isinstance(value, str):
        return None
    return scrub(value, n)[:n].strip() or None


def explanation(d: Mapping[str, Any]) -> str | None:
    if "inject" in d and not d["inject"]:
        return None
    return cleaned(d.get("injection_text"))


def evaluations(d: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One `gen_ai.evaluation.result` event per monitor the decision says fired."""
    monitors = d.get("monitors") or {}
    scores = monitors.get("scores") or {}
    out = []
    for name in monitors.get("fired") or []:
        e: dict[str, Any] = {"gen_ai.evaluation.name": short(name), "gen_ai.evaluation.score.label": "fired"}
        score = scores.get(name)
        if isinstance(score, int | float) and not isinstance(score, bool):
            e["gen_ai.evaluation.score.value"] = float(score)
        if (text := explanation(d)) is not None:
            e["gen_ai.evaluation.explanation"] = text
        e["rb.step"] = d["step"]
        out.append(e)
    return out


def steering(d: Mapping[str, Any] | None, requested: str | None, *, late: bool = False) -> dict[str, Any]:
    """The `rb.` attributes of a decision applied to a call (None: none came)."""
    a: dict[str, Any] = {}
    if requested:
        a["rb.model.requested"] = short(requested)
    if late:
        a["rb.decision.late"] = True
    if d is None:
        return a
    a["rb.step"] = d["step"]
    for key, name in (("fsm_state", "rb.fsm.state"), ("model", "rb.model.routed"), ("arm", "rb.arm")):
        if short(d.get(key)):
            a[name] = short(d[key])
    if "rb.model.routed" not in a and requested:
        a["rb.model.routed"] = short(requested)  # not routed: the call goes to the model asked for
    if isinstance(d.get("difficulty"), int | float):
        a["rb.difficulty"] = float(d["difficulty"])
    a["rb.action"] = d.get("action") or "continue"
    if (text := explanation(d)) is not None:
        a["rb.steering.text"] = text
        sources: list[str] = []
        for i in d.get("injections") or []:
            if (src := short(i.get("source"))) is not None and src not in sources:
                sources.append(src)
        if sources:
            a["rb.steering.sources"] = tuple(sources)
    reason = d.get("action_reason") or {}
    if (said := short(reason.get("text"), TEXT_MAX)) is not None:
        a["rb.action.reason"] = said
    return a


def guardrail(d: Mapping[str, Any]) -> dict[str, Any]:
    """The proposed guardrail span's attributes for a decision applied to a model call."""
    action = d.get("action") or "continue"
    fired = bool((d.get("monitors") or {}).get("fired"))
    if action == "stop":
        verdict, act = "deny", "block"
    elif action == "escalate" or explanation(d) is not None:
        verdict, act = "warn", "modify"
    else:
        verdict, act = ("warn" if fired else "allow"), "allow"
    a = {
        "gen_ai.operation.name": "run_guardrail",
        "gen_ai.security.guardrail.name": "rb-streams",
        "gen_ai.security.target.type": "llm_input",
        "gen_ai.security.verdict.type": verdict,
        "gen_ai.security.action.type": act,
        "rb.step": d["step"],
        "rb.action": action,
    }
    if (said := short((d.get("action_reason") or {}).get("text"), TEXT_MAX)) is not None:
        a["rb.action.reason"] = said
    return a


def last_stands(span: ReadableSpan, ds: Sequence[Mapping[str, Any]], requested: str | None) -> None:
    """A span that saw several decisions: the last one's attributes stand, and what it does not
    set is an earlier one's (OpenTelemetry cannot remove an attribute)."""
    got, want = attrs(span), steering(ds[-1], requested)
    assert {k: got.get(k) for k in want} == want
    earlier = {k for d in ds[:-1] for k in steering(d, requested)}
    assert set(got) - set(want) <= earlier


def events_of(spans: Sequence[ReadableSpan], name: str = EVALUATION) -> list[dict[str, Any]]:
    """The events named `name` of `spans`, in order."""
    return [dict(e.attributes or {}) for s in spans for e in s.events if e.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def guardrails_under(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[dict[str, Any]]:
    """The guardrail spans whose parent is `parent`, their attributes in order."""
    return [
        attrs(s)
        for s in named(spans, GUARDRAIL)
        if s.parent is not None and parent.context is not None and s.parent.span_id == parent.context.span_id
    ]


def all_values(spans: Sequence[ReadableSpan]) -> Iterator[tuple[str, str, Any]]:
    """(where, key, value) of every attribute written: the spans' and their events'."""
    for s in spans:
        for k, v in (s.attributes or {}).items():
            yield from ((s.name, k, x) for x in (v if isinstance(v, tuple) else (v,)))
        for e in s.events:
            for k, v in (e.attributes or {}).items():
                yield from ((f"{s.name}/{e.name}", k, x) for x in (v if isinstance(v, tuple) else (v,)))
