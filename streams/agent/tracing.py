"""Steering decisions in the user's own OpenTelemetry traces, agent side.

When the application has OpenTelemetry set up (a tracer provider, a span current where the
agent takes its decision), each decision handed to the agent is written on that span: one
`gen_ai.evaluation.result` event per monitor that fired (the GenAI semantic conventions'
evaluation event) and a few `rb.`-prefixed attributes where no convention exists (the FSM
state, the difficulty, the model asked for and the model routed to, the ladder's action and
why, the experiment arm, a late decision). A refusal of the pre-call gate is an
`rb.gate.refused` event.

Opt-in (`guardrail=True`: the client setting `client_trace_guardrail`, `RB_CLIENT_TRACE_GUARDRAIL`),
the proposed GenAI guardrail shape as well: a `run_guardrail rb-streams` span, a child of the
span written on, with the verdict and the action the agent side enforced. That convention is
proposed, not merged: its names may change, ours (`rb.`) will not.

Only what the worker produced is written (its decision's fields, its steering text, the gate's
own reason): never an event's text (a tool output, a thought). Texts are scrubbed and cut.

Off unless OpenTelemetry is in use: nothing of it is imported here (a client-only install
without it loads nothing more), only looked up in `sys.modules`, where an application that set a
tracer provider has put it. No span is current, or it is not recording: nothing is done.
It fails open: any error (a broken tracer, an odd decision) is swallowed, logged once.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ..shared.contract import REASONBLOCKS_MARKER
from ..shared.untrusted import scrub

__all__ = [
    "EVALUATION_EVENT",
    "GUARDRAIL_OP",
    "REFUSAL_EVENT",
    "SCOPE",
    "TEXT_MAX",
    "quiet",
    "record_decision",
    "record_evaluation",
    "record_refusal",
    "record_steering",
]

log = logging.getLogger(__name__)

EVALUATION_EVENT = "gen_ai.evaluation.result"
REFUSAL_EVENT = "rb.gate.refused"
# the proposed GenAI guardrail convention (a `run_guardrail` span; proposed, not merged)
GUARDRAIL_OP = "run_guardrail"
GUARDRAIL_NAME = "rb-streams"
SCOPE = "rb-streams"  # the instrumentation scope of the spans made here
TEXT_MAX = 2000  # characters of a steering text, an action's reason, kept in an attribute
TOOL_MAX = 100  # characters of a tool name
REASON_MAX = 600  # characters of the gate's reason (what the model is told, streams.agent.gate)

# Set while a session asks its client for a decision: the session writes the decision on the
# span of the call it steers (begin_step), so the client does not write it again.
_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("rb_tracing_quiet", default=False)
_failed = False  # logged once
_tracer: Any = None  # the global provider's tracer, for the guardrail spans


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Within it, `record_decision` writes nothing (a session records the decision itself)."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def _recording(span: Any) -> Any:
    """The span to write on (`span`, else the current one), or None: OpenTelemetry is not in
    use, no span is current, or it does not record."""
    if span is None:
        trace = sys.modules.get("opentelemetry.trace")
        if trace is None:  # never imported: no tracer provider can have been set
            return None
        span = trace.get_current_span()
    return span if span is not None and span.is_recording() else None


def _text(value: object, n: int) -> str | None:
    """`value` scrubbed and cut to `n` characters (None: no text, or nothing left)."""
    if not isinstance(value, str):
        return None
    return _clean(value, n) if len(value) <= CACHED_MAX else _scrubbed(value, n)


def _scrubbed(value: str, n: int) -> str | None:
    t = scrub(value, n)[:n].strip()  # cut again: a defused marker is longer than the marker
    return t or None


# A run's texts and names repeat from decision to decision (a monitor's warning, the states,
# the model names): cleaned once. Only texts up to CACHED_MAX characters are kept here.
CACHED_MAX = 4 * TEXT_MAX
_clean = functools.lru_cache(maxsize=1024)(_scrubbed)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _steering_text(data: Mapping[str, Any]) -> str | None:
    """The steering text the agent received (none when the decision injects nothing), without
    its marker line."""
    if "inject" in data and not data["inject"]:
        return None
    text = data.get("injection_text")
    if not isinstance(text, str):
        return None
    return _text(text.strip().removeprefix(REASONBLOCKS_MARKER), TEXT_MAX)


def _failed_once(where: str, exc: BaseException) -> None:
    global _failed
    if not _failed:
        _failed = True
        log.warning("tracing: could not record the %s on the span (ignored from now on): %r", where, exc)


def record_decision(
    decision: Any,
    span: Any = None,
    *,
    late: bool = False,
    requested_model: str | None = None,
    guardrail: bool = False,
    tracer: Any = None,
) -> None:
    """Write `decision` (a `Decision`, its wire dict, or None: none came) on `span`, else the
    current span: its evaluations (`record_evaluation`) and its steering (`record_steering`).
    `late`: the decision missed its deadline (the call went on unsteered); `requested_model`:
    the model the agent asked for; `guardrail`: the proposed guardrail span too, made with
    `tracer` (default: the global tracer provider's). Never raises."""
    record_evaluation(decision, span)
    record_steering(
        decision, span, late=late, requested_model=requested_model, guardrail=guardrail, tracer=tracer
    )


def _data(decision: Any) -> Mapping[str, Any] | None:
    data = getattr(decision, "data", decision)
    return data if isinstance(data, Mapping) else None


def record_evaluation(decision: Any, span: Any = None) -> None:
    """One `gen_ai.evaluation.result` event per monitor that fired in `decision`, on `span`,
    else the current span (the convention's: the span of the operation evaluated, the step the
    decision answers). Never raises."""
    try:
        if _QUIET.get():
            return
        data = _data(decision)
        monitors = data.get("monitors") if data is not None else None
        if data is None or not isinstance(monitors, Mapping):
            return
        fired = monitors.get("fired")
        if not isinstance(fired, list) or not fired:
            return
        target = _recording(span)
        if target is None:
            return
        step = data.get("step")
        scores = monitors.get("scores")
        scores = scores if isinstance(scores, Mapping) else {}
        explanation = _steering_text(data)
        for name in fired:
            said = _text(name, TOOL_MAX)
            if said is None:
                continue
            event: dict[str, Any] = {
                "gen_ai.evaluation.name": said,
                "gen_ai.evaluation.score.label": "fired",
            }
            score = _number(scores.get(name))
            if score is not None:
                event["gen_ai.evaluation.score.value"] = score
            if explanation is not None:
                event["gen_ai.evaluation.explanation"] = explanation
            if type(step) is int:
                event["rb.step"] = step
            target.add_event(EVALUATION_EVENT, event)
    except Exception as exc:  # a broken tracer never stops the agent
        _failed_once("decision", exc)


def record_steering(
    decision: Any,
    span: Any = None,
    *,
    late: bool = False,
    requested_model: str | None = None,
    guardrail: bool = False,
    tracer: Any = None,
) -> None:
    """The `rb.` attributes of how `decision` steers the next call (None: none came; `late`:
    it missed its deadline), on `span`, else the current span; `guardrail`: and a
    `run_guardrail` child span (`_guardrail_span`, made with `tracer`). Never raises."""
    try:
        if _QUIET.get():
            return
        target = _recording(span)
        if target is None:
            return
        attrs: dict[str, Any] = {}
        asked = _text(requested_model, TOOL_MAX)
        if asked is not None:
            attrs["rb.model.requested"] = asked
        if late:
            attrs["rb.decision.late"] = True
        data = _data(decision)
        if data is not None:
            step = data.get("step")
            if type(step) is int:
                attrs["rb.step"] = step
            for key, name in (("fsm_state", "rb.fsm.state"), ("model", "rb.model.routed"), ("arm", "rb.arm")):
                value = _text(data.get(key), TOOL_MAX)
                if value is not None:
                    attrs[name] = value
            if "rb.model.routed" not in attrs and "rb.model.requested" in attrs:
                attrs["rb.model.routed"] = attrs["rb.model.requested"]  # not routed: the call's own model
            difficulty = _number(data.get("difficulty"))
            if difficulty is not None:
                attrs["rb.difficulty"] = difficulty
            action = data.get("action")
            attrs["rb.action"] = action if action in ("continue", "nudge", "escalate", "stop") else "continue"
            said_text = _steering_text(data)
            if said_text is not None:  # the text this call is given, and where it came from
                attrs["rb.steering.text"] = said_text
                sources = _sources(data.get("injections"))
                if sources:
                    attrs["rb.steering.sources"] = sources
            reason = data.get("action_reason")
            said = _text(reason.get("text"), TEXT_MAX) if isinstance(reason, Mapping) else None
            if said is not None:
                attrs["rb.action.reason"] = said
        if attrs:
            target.set_attributes(attrs)
        if guardrail and data is not None:
            _guardrail_span(target, "llm_input", *_verdict(data, attrs), attrs, tracer)
    except Exception as exc:  # a broken tracer never stops the agent
        _failed_once("decision", exc)


def _sources(injections: object) -> list[str]:
    """The distinct sources of a decision's injections (`monitor`, an E-trace's id), in order."""
    if not isinstance(injections, list):
        return []
    out: list[str] = []
    for i in injections[:64]:
        source = _text(i.get("source"), TOOL_MAX) if isinstance(i, Mapping) else None
        if source is not None and source not in out:
            out.append(source)
    return out[:16]


def _verdict(data: Mapping[str, Any], attrs: Mapping[str, Any]) -> tuple[str, str]:
    """The guardrail verdict of a decision and the action the agent side enforces: a stop
    blocks the run; a text or a routed model modifies the call; a monitor that fired with
    nothing said is a warning the call goes on with; else allow."""
    action = attrs.get("rb.action", "continue")
    if action == "stop":
        return "deny", "block"
    if action == "escalate" or "rb.steering.text" in attrs:
        return "warn", "modify"
    monitors = data.get("monitors")
    fired = monitors.get("fired") if isinstance(monitors, Mapping) else None
    return ("warn" if isinstance(fired, list) and fired else "allow"), "allow"


def _guardrail_span(
    target: Any, target_type: str, verdict: str, action: str, attrs: Mapping[str, Any], tracer: Any
) -> None:
    """The proposed GenAI guardrail shape: a `run_guardrail rb-streams` span, a child of
    `target` (the operation guarded), ended at once (the verdict was taken by the worker, it
    is applied now), made with `tracer`, else the application's global tracer provider's."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return
    global _tracer
    if tracer is None:
        if _tracer is None:  # the API's proxy until a provider is set, then the provider's
            _tracer = trace.get_tracer(SCOPE)
        tracer = _tracer
    span = tracer.start_span(
        f"{GUARDRAIL_OP} {GUARDRAIL_NAME}",
        context=trace.set_span_in_context(target),
        attributes={
            "gen_ai.operation.name": GUARDRAIL_OP,
            "gen_ai.security.guardrail.name": GUARDRAIL_NAME,
            "gen_ai.security.target.type": target_type,
            "gen_ai.security.verdict.type": verdict,
            "gen_ai.security.action.type": action,
            **{k: v for k, v in attrs.items() if k in _GUARDRAIL_COPIED},
        },
    )
    span.end()


_GUARDRAIL_COPIED = frozenset({"rb.step", "rb.action", "rb.action.reason", "rb.tool.name", "rb.gate.reason"})


def record_refusal(
    tool: object, reason: object, span: Any = None, *, source_step: object = None, guardrail: bool = False
) -> None:
    """Write the pre-call gate's refusal of a call to `tool` on `span`, else the current span:
    an `rb.gate.refused` event with the tool's name and the gate's reason (its own text, which
    names the tool and the source step, never the value or a tool's output); `guardrail`: and
    a `run_guardrail` child span (verdict deny, action block). Never raises."""
    try:
        target = _recording(span)
        if target is None:
            return
        event: dict[str, Any] = {"rb.tool.name": _text(str(tool), TOOL_MAX) or "?"}
        said = _text(reason, REASON_MAX)
        if said is not None:
            event["rb.gate.reason"] = said
        if type(source_step) is int:
            event["rb.gate.source_step"] = source_step
        target.add_event(REFUSAL_EVENT, event)
        if guardrail:
            _guardrail_span(target, "tool_call", "deny", "block", event, None)
    except Exception as exc:
        _failed_once("gate's refusal", exc)
