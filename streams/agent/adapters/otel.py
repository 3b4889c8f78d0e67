"""OpenTelemetry ingestion, observe-only: any framework instrumented with OpenInference or the
OpenTelemetry GenAI semantic conventions is monitored without a code change.

    provider = TracerProvider()
    provider.add_span_processor(SteeringSpanProcessor(client, on_decision=print))
    SmolagentsInstrumentor().instrument(tracer_provider=provider)   # or CrewAI, LlamaIndex, ...

`SteeringSpanProcessor` reads the spans the instrumentation already makes and publishes them as
run events in the wire format; the worker's decisions (monitors fired, failure type, the
steering text it would inject) reach its metrics, dashboards and alerts, and the optional
`on_decision` callback. Nothing is handed back to the framework: observe-only. Each step's
decision is also written in the trace (`streams.agent.tracing`): the step's model call has
ended by the time it comes, so a short `rb.steering.decision` span, a child of that call's span,
carries its evaluation events and `rb.` attributes (made with `tracer_provider`, default the
global one; `trace_decisions=False`: none).

Runs. A trace is a run (`otel-<trace id>`; a part of a distributed trace whose parent span is in
another process: `otel-<trace id>-<span id>`): it starts when its first agent span starts (or,
in a trace without agent spans, with its first step) and finishes when the trace's local root
span ends, `success` unless that span's status is ERROR (`failure: <exception type>`). A trace
that never makes a step (an HTTP request without a model call) publishes nothing. An
instrumentation that never ends its agent span when the agent raises (OpenInference's smolagents
instrumentation, 0.1.43, does not) leaves that run open: start the agent inside a span of your
own (`with tracer.start_as_current_span("task"):`), which ends, records the exception and is then
the run's root.

Steps. One step per model call (an LLM span), as the wire format defines a step: its output
text is the thought, the tool calls it asked for (and the TOOL / RETRIEVER spans that ran after
it, in the same agent, until that agent's next model call) are the action, their results the
observation (a tool whose span ended in ERROR: the exception, `observation_is_error`), the
call's token usage the step's `tokens` and the model it reports `model_id`. A step is published
when it is complete: at the agent's next model call, when the agent delegates to a sub-agent
(the delegation step, before the sub-agent's own steps) or when the agent's span ends. A tool
span with no model call before it is a step of its own; a failed model call is no step (the
framework retries it or the run fails); a model call or tool inside a tool (a tool that
summarises with an LLM) belongs to that tool, not to the agent's trajectory.

Agents. The nearest enclosing AGENT span (OpenInference `openinference.span.kind=AGENT`, GenAI
`gen_ai.operation.name=invoke_agent`) names the step's agent (`"agent.name"`,
`gen_ai.agent.name`, else its span name without `.run` / `invoke_agent `). `agent` is set
when the run is multi-agent: its root agent lists managed agents (smolagents), an agent span
started inside another, or `multi_agent=True`. A single agent's steps carry none (the monitors
treat a named speaker as a multi-agent chat).

Never in the way. `on_start` / `on_end` only update a few dicts under a lock and hand the event
to the client's background loop (`call_soon_threadsafe`); the loop publishes it and waits for
its decision there, in order per run. At most `max_pending` events are in flight: past that a
new run is dropped whole and a step is dropped (`dropped`). Any error is counted (`errors`)
and logged once per kind; the instrumented application never sees one. Give the client a long
`deadline_ms` (seconds): nothing waits for a decision here, and a decision that misses the
deadline reaches the callback as None (`late`).

Needs the `otel` extra (`pip install './[otel]'` from a checkout, or the wheel with `[otel]`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

try:
    from openinference.semconv.trace import (
        DocumentAttributes,
        MessageAttributes,
        MessageContentAttributes,
        SpanAttributes,
        ToolCallAttributes,
    )
    from opentelemetry import trace as otel_trace
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
    from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, TracerProvider
except ImportError as exc:  # one line that says what to install, not a bare module name
    raise ImportError(
        "streams.agent.adapters.otel needs the OpenTelemetry SDK and OpenInference's conventions: "
        f"pip install './[otel]' from a checkout, or the wheel with [otel] ({exc})"
    ) from exc

from ..client import Decision, SyncSteeringClient, step_event
from ..tracing import SCOPE, record_decision
from ..usage import from_otel as usage_of
from ..validation import check_run_field_names, validate_run_fields

__all__ = ["ObservedStep", "SpanMapper", "SteeringSpanProcessor"]

log = logging.getLogger(__name__)

TEXT_CHARS = 16_000  # of a thought, an observation, a task, a tool input's JSON (the worker cuts further)
# The bytes of events waiting for the client (published or queued behind their run's previous
# one) at most: past it, new events are dropped as past `max_pending`. With every text cut to
# TEXT_CHARS an event is at most ~64 KB, so a worker that never answers costs this much memory.
MAX_PENDING_BYTES = 32 * 1024 * 1024
DOC_CHARS = 500  # of each retrieved document kept in a retrieval's observation
DOCS_KEPT = 5
MAX_LIVE_SPANS = 100_000  # spans tracked at once (one that never ends must not grow memory)
# A run none of whose spans started or ended for this long is finished (`ABANDONED`): a trace
# whose root never ends (a hung app, an instrumentation that leaves a span open) must not hold
# its spans until the cap. Looked for at most once a minute, on the next span.
IDLE_S = 3600.0
SWEEP_EVERY_S = 60.0
ABANDONED = "failure: trace_not_ended"

# OpenInference (https://github.com/Arize-ai/openinference, semantic conventions)
OI_KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
OI_INPUT = SpanAttributes.INPUT_VALUE
OI_OUTPUT = SpanAttributes.OUTPUT_VALUE
OI_MODEL = SpanAttributes.LLM_MODEL_NAME
OI_TOKENS = SpanAttributes.LLM_TOKEN_COUNT_TOTAL
OI_PROMPT_TOKENS = SpanAttributes.LLM_TOKEN_COUNT_PROMPT
OI_COMPLETION_TOKENS = SpanAttributes.LLM_TOKEN_COUNT_COMPLETION
OI_TOOL_NAME = SpanAttributes.TOOL_NAME
OI_AGENT_NAME = SpanAttributes.AGENT_NAME
OI_TOOL_ARGS = ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON
OI_OUT_MESSAGES = SpanAttributes.LLM_OUTPUT_MESSAGES
OI_DOCS = SpanAttributes.RETRIEVAL_DOCUMENTS
# llm.output_messages.<i>.message.content | .message.contents.<j>.message_content.text
OI_TEXT = re.compile(
    rf"^{re.escape(OI_OUT_MESSAGES)}\.(\d+)\.(?:{re.escape(MessageAttributes.MESSAGE_CONTENT)}"
    rf"|{re.escape(MessageAttributes.MESSAGE_CONTENTS)}\.(\d+)\.{re.escape(MessageContentAttributes.MESSAGE_CONTENT_TEXT)})$"
)
# llm.output_messages.<i>.message.tool_calls.<j>.tool_call.(id|function.name|function.arguments)
OI_CALL = re.compile(
    rf"^{re.escape(OI_OUT_MESSAGES)}\.(\d+)\.{re.escape(MessageAttributes.MESSAGE_TOOL_CALLS)}\.(\d+)\."
    r"tool_call\.(id|function\.name|function\.arguments)$"
)
OI_DOC = re.compile(rf"^{re.escape(OI_DOCS)}\.(\d+)\.{re.escape(DocumentAttributes.DOCUMENT_CONTENT)}$")

# OpenTelemetry GenAI semantic conventions (gen_ai.*), and their deprecated token names
GENAI_OP = "gen_ai.operation.name"
GENAI_LLM_OPS = frozenset({"chat", "text_completion", "generate_content"})
GENAI_TOOL_OP = "execute_tool"
GENAI_AGENT_OP = "invoke_agent"
GENAI_INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
GENAI_OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
GENAI_MODELS = ("gen_ai.response.model", "gen_ai.request.model")
GENAI_OUT_MESSAGES = "gen_ai.output.messages"
GENAI_TOOL_NAME = "gen_ai.tool.name"
GENAI_TOOL_ID = "gen_ai.tool.call.id"
GENAI_TOOL_ARGS = ("gen_ai.tool.call.arguments", "tool_arguments")  # the second: pydantic-ai
GENAI_TOOL_RESULT = ("gen_ai.tool.call.result", "tool_response")
GENAI_AGENT_NAME = "gen_ai.agent.name"
GENAI_ERROR = "error.type"
# gen_ai.completion.<i>.content | .tool_calls.<j>.(id|name|arguments): the older flat form
GENAI_TEXT = re.compile(r"^gen_ai\.completion\.(\d+)\.content$")
GENAI_CALL = re.compile(r"^gen_ai\.completion\.(\d+)\.tool_calls\.(\d+)\.(id|name|arguments)$")

SMOLAGENTS_MANAGED = "smolagents.managed_agents.0.name"
TASK_KEYS = ("task", "input", "query", "question", "prompt", "message", "user_input")

Attrs = Mapping[str, Any]


# -- reading one span ---------------------------------------------------------------------
def span_kind(attrs: Attrs) -> str:
    """`agent`, `llm`, `tool`, `retriever` or `other`, from either convention."""
    oi = attrs.get(OI_KIND)
    if isinstance(oi, str):
        return {"AGENT": "agent", "LLM": "llm", "TOOL": "tool", "RETRIEVER": "retriever"}.get(
            oi.upper(), "other"
        )
    op = attrs.get(GENAI_OP)
    if op in GENAI_LLM_OPS:
        return "llm"
    if op == GENAI_TOOL_OP:
        return "tool"
    if op == GENAI_AGENT_OP:
        return "agent"
    return "other"


def agent_name(attrs: Attrs, span_name: str) -> str:
    for key in (OI_AGENT_NAME, GENAI_AGENT_NAME):
        v = attrs.get(key)
        if isinstance(v, str) and v.strip():
            return v.strip()[:256]
    name = span_name.strip()
    name = name.removeprefix(f"{GENAI_AGENT_OP} ").removesuffix(".run").removesuffix(".invoke")
    return (name or "agent")[:256]


def _cut(text: str | None, limit: int = TEXT_CHARS) -> str | None:
    return text[:limit] if text else None


def _int(v: Any) -> int | None:
    return v if type(v) is int and v >= 0 else None


def parse_args(value: Any) -> Any:
    """A tool input as the model gave it: JSON text parsed (objects and arrays), else the text.
    A wrapper's dump of its bound arguments ({"args": [], "kwargs": {...}}, as OpenInference's
    smolagents instrumentation records a tool's input) is unwrapped to the keyword arguments.
    Cut before anything keeps it: an input whose JSON is longer than TEXT_CHARS becomes that
    text's head (a span's 1 MB input is never held while its event waits for the client)."""
    return _fit_input(_parse_args(value))


def _fit_input(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value[:TEXT_CHARS]
    text = _text(value) or ""
    return value if len(text) <= TEXT_CHARS else text[:TEXT_CHARS]


def _parse_args(value: Any) -> Any:
    if isinstance(value, str) and len(value) > 4 * TEXT_CHARS:
        return value[:TEXT_CHARS]  # far too long to keep whole: not parsed at all
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value[:TEXT_CHARS]
        if not isinstance(parsed, dict | list):
            return value[:TEXT_CHARS]
        value = parsed
    if isinstance(value, dict) and isinstance(value.get("kwargs"), dict):
        extra = set(value) - {"args", "kwargs", "sanitize_inputs_outputs"}
        if not extra:
            args = value.get("args") or []
            return {**value["kwargs"], "args": args} if args else value["kwargs"]
    return value


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _error_text(span: ReadableSpan) -> str:
    """What went wrong: the last recorded exception (`Type: message`), else the status
    description or the GenAI `error.type`."""
    for event in reversed(span.events or ()):
        if event.name == "exception":
            a = event.attributes or {}
            kind = str(a.get("exception.type") or "Exception").rsplit(".", 1)[-1]
            message = str(a.get("exception.message") or "").strip()
            return f"{kind}: {message}" if message else kind
    desc = span.status.description
    if desc:
        return desc
    return str((span.attributes or {}).get(GENAI_ERROR) or "error")


def _exception_type(span: ReadableSpan) -> str | None:
    for event in reversed(span.events or ()):
        if event.name == "exception":
            t = (event.attributes or {}).get("exception.type")
            if t:
                return str(t).rsplit(".", 1)[-1]
    t = (span.attributes or {}).get(GENAI_ERROR)
    return str(t) if t else None


def _failed(span: ReadableSpan) -> bool:
    return span.status.status_code == StatusCode.ERROR or bool((span.attributes or {}).get(GENAI_ERROR))


@dataclass
class Call:
    """A tool call the model asked for."""

    name: str
    args: Any = None
    id: str | None = None


@dataclass
class Result:
    """A tool (or retrieval) that ran: what it was called with and what came back."""

    name: str
    input: Any
    output: str | None
    error: bool
    id: str | None = None
    context: SpanContext | None = None  # the tool span's (where its step's decision is written)


def _genai_messages(attrs: Attrs) -> tuple[list[str], list[Call]]:
    """Text and tool calls of `gen_ai.output.messages` (JSON: [{role, parts: [...]}])."""
    raw = attrs.get(GENAI_OUT_MESSAGES)
    texts: list[str] = []
    calls: list[Call] = []
    try:
        messages = json.loads(raw) if isinstance(raw, str) else []
    except ValueError:
        return texts, calls
    for m in messages if isinstance(messages, list) else []:
        for part in (m.get("parts") or []) if isinstance(m, dict) else []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text" and isinstance(part.get("content"), str):
                texts.append(part["content"])
            elif part.get("type") == "tool_call" and part.get("name"):
                calls.append(Call(str(part["name"]), parse_args(part.get("arguments")), part.get("id")))
    return texts, calls


def _indexed(attrs: Attrs, text: re.Pattern[str], call: re.Pattern[str]) -> tuple[list[str], list[Call]]:
    """Text and tool calls of flattened message attributes (`...<i>...content`, `...<j>.name`)."""
    found_text: dict[tuple[int, int], str] = {}
    found_calls: dict[tuple[int, int], dict[str, Any]] = {}
    for key, value in attrs.items():
        m = text.match(key)
        if m and isinstance(value, str):
            g = m.groups()
            found_text[(int(g[0]), int(g[1]) if len(g) > 1 and g[1] else -1)] = value
            continue
        m = call.match(key)
        if m:
            slot = found_calls.setdefault((int(m.group(1)), int(m.group(2))), {})
            slot[m.group(3).rsplit(".", 1)[-1]] = value
    texts = [found_text[k] for k in sorted(found_text) if found_text[k].strip()]
    calls = [
        Call(str(c["name"]), parse_args(c.get("arguments")), c.get("id"))
        for _, c in sorted(found_calls.items())
        if c.get("name")
    ]
    return texts, calls


@dataclass
class ModelCall:
    """One finished model call: the start of a step."""

    thought: str | None
    calls: list[Call]
    tokens: int | None
    model: str | None
    results: list[Result] = field(default_factory=list)
    usage: dict[str, Any] | None = None  # the wire `usage` (streams.agent.usage.from_otel)
    served_model: str | None = None  # gen_ai.response.model, else OpenInference's model name
    context: SpanContext | None = None  # the call's span (where its step's decision is written)


def model_call(span: ReadableSpan) -> ModelCall:
    attrs = span.attributes or {}
    texts, calls = _indexed(attrs, OI_TEXT, OI_CALL)
    if not texts and not calls:
        texts, calls = _genai_messages(attrs)
    if not texts and not calls:
        texts, calls = _indexed(attrs, GENAI_TEXT, GENAI_CALL)
    tokens = _int(attrs.get(OI_TOKENS))
    if tokens is None:
        parts = [_int(attrs.get(k)) for k in (OI_PROMPT_TOKENS, OI_COMPLETION_TOKENS)]
        if all(p is None for p in parts):
            parts = [
                next((v for k in keys if (v := _int(attrs.get(k))) is not None), None)
                for keys in (GENAI_INPUT_TOKENS, GENAI_OUTPUT_TOKENS)
            ]
        if any(p is not None for p in parts):
            tokens = sum(p or 0 for p in parts)
    model = attrs.get(OI_MODEL) or next((attrs[k] for k in GENAI_MODELS if attrs.get(k)), None)
    served = attrs.get(GENAI_MODELS[0]) or attrs.get(OI_MODEL)
    return ModelCall(
        thought=_cut("\n".join(texts).strip()),
        calls=calls,
        tokens=tokens,
        model=str(model)[:256] if model else None,
        usage=usage_of(attrs),
        served_model=str(served)[:256] if served else None,
        context=span.context,
    )


def tool_result(span: ReadableSpan, kind: str) -> Result:
    attrs = span.attributes or {}
    name = attrs.get(OI_TOOL_NAME) or attrs.get(GENAI_TOOL_NAME)
    if not name:
        name = span.name.removeprefix(f"{GENAI_TOOL_OP} ") if kind == "tool" else "retrieve"
    raw_input = next(
        (attrs[k] for k in (OI_INPUT, OI_TOOL_ARGS, *GENAI_TOOL_ARGS) if attrs.get(k) is not None), None
    )
    error = _failed(span)
    if error:
        output: str | None = _error_text(span)
    elif kind == "retriever" and (docs := _documents(attrs)):
        output = docs
    else:
        value = next((attrs[k] for k in (OI_OUTPUT, *GENAI_TOOL_RESULT) if attrs.get(k) is not None), None)
        output = _text(value)
    tool_id = attrs.get(GENAI_TOOL_ID)
    return Result(
        str(name)[:1024],
        parse_args(raw_input),
        _cut(output),
        error,
        str(tool_id) if tool_id else None,
        span.context,
    )


def _documents(attrs: Attrs) -> str | None:
    docs = sorted(
        (int(m.group(1)), v) for k, v in attrs.items() if (m := OI_DOC.match(k)) and isinstance(v, str)
    )
    return "\n".join(v[:DOC_CHARS] for _, v in docs[:DOCS_KEPT]) or None


def run_task(attrs: Attrs) -> str | None:
    """The task of a run, from its root agent's input (a JSON object's task-like field)."""
    value = attrs.get("smolagents.task") or attrs.get(OI_INPUT)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return _cut(value.strip())
    if isinstance(parsed, str):
        return _cut(parsed.strip())
    if isinstance(parsed, dict):
        for key in TASK_KEYS:
            v = parsed.get(key)
            if isinstance(v, str) and v.strip():
                return _cut(v.strip())
    return _cut(value.strip())


def step_fields(call: ModelCall | None, results: list[Result]) -> dict[str, Any]:
    """The step event's fields: the call's thought, the tools that ran (matched to the calls
    the model asked for: its own arguments win over a wrapper's dump), their results."""
    fields: dict[str, Any] = {}
    asked = list(call.calls) if call else []
    if call is not None:
        fields.update(thought=call.thought, tokens=call.tokens, model_id=call.model)
        if call.usage is not None:
            fields["usage"] = call.usage
        if call.served_model:
            fields["served_model"] = call.served_model
    acts: list[tuple[str, Any]] = []
    for r in results:
        match = next((c for c in asked if r.id and c.id == r.id), None) or next(
            (c for c in asked if c.name == r.name), None
        )
        if match is not None:
            asked.remove(match)
        args = match.args if match is not None and match.args is not None else r.input
        acts.append((r.name, args))
    if not results:
        acts = [(c.name, c.args) for c in asked]
    if len(acts) == 1:
        fields["action"], fields["action_input"] = acts[0][0][:1024], acts[0][1]
    elif acts:
        fields["action"] = "+".join(n for n, _ in acts)[:1024]
        fields["action_input"] = _fit_input([{"name": n, "args": a} for n, a in acts])
    outputs = [r.output for r in results if r.output]
    if outputs:
        fields["observation"] = _cut("\n".join(outputs))
    if any(r.error for r in results):
        fields["observation_is_error"] = True
    return {k: v for k, v in fields.items() if v is not None}


def _size(o: Out) -> int:
    """About what an event holds in memory: its texts and its input's JSON (all cut already)."""
    n = 256
    for v in o.fields.values():
        n += len(v) if isinstance(v, str) else len(_text(v) or "") if isinstance(v, dict | list) else 16
    return n


# -- spans to runs and steps ---------------------------------------------------------------
@dataclass
class Out:
    """One run event to publish: `kind` is run_start, step or run_finish."""

    kind: str
    run_id: str
    step: int = 0
    fields: dict[str, Any] = field(default_factory=dict)
    context: SpanContext | None = None  # a step's: its model call's span (else its first tool's)


@dataclass
class _Run:
    run_id: str
    root: int  # span id of the trace's local root
    started: bool = False
    steps: int = 0
    multi: bool = False
    top_agent: str | None = None
    task: str | None = None
    framework: str | None = None
    scopes: dict[int, None] = field(default_factory=dict)  # its agents' span ids, in start order
    spans: set[int] = field(default_factory=set)  # its spans that have not ended
    seen: float = 0.0  # when one of its spans last started or ended (the mapper's clock)


@dataclass
class _Scope:
    """An agent (or the run itself outside any agent): its model call awaiting its tools."""

    agent: str | None
    pending: ModelCall | None = None


@dataclass
class _Node:
    kind: str
    run: _Run
    scope: int  # span id of the nearest agent span (the run's root outside any agent)
    inside: bool  # within a model call or a tool (of the same agent): not the agent's own step


class SpanMapper:
    """Spans in, run events out; no I/O, not thread-safe (the processor holds a lock)."""

    def __init__(
        self,
        run_fields: Mapping[str, Any] | None = None,
        *,
        run_id_prefix: str = "otel",
        multi_agent: bool | None = None,
        idle_s: float = IDLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run_fields = dict(run_fields or {})
        self.run_id_prefix = run_id_prefix
        self.multi_agent = multi_agent
        self.idle_s = idle_s
        self._clock = clock
        self._nodes: dict[int, _Node] = {}
        self._scopes: dict[int, _Scope] = {}
        self._runs: dict[int, _Run] = {}  # live runs by their root's span id
        self._swept = clock()
        self.untracked = 0  # spans not followed (too many live at once)
        self.abandoned = 0  # runs finished because none of their spans moved for `idle_s`

    @property
    def live_spans(self) -> int:
        return len(self._nodes)

    def start(self, span: ReadableSpan) -> list[Out]:
        ctx = span.context
        if ctx is None:
            return []
        out = self._sweep()
        if len(self._nodes) >= MAX_LIVE_SPANS:
            self.untracked += 1
            return out
        attrs = span.attributes or {}
        kind = span_kind(attrs)
        parent = self._nodes.get(span.parent.span_id) if span.parent is not None else None
        if parent is None:
            run_id = f"{self.run_id_prefix}-{ctx.trace_id:032x}"
            if span.parent is not None:  # a remote (or unseen) parent: one trace, maybe several runs here
                run_id += f"-{ctx.span_id:016x}"
            run = self._runs[ctx.span_id] = _Run(run_id, ctx.span_id)
            if self.multi_agent is not None:
                run.multi = self.multi_agent
            scope, inside = ctx.span_id, False
            self._scopes[scope] = _Scope(None)
            run.scopes[scope] = None
        else:
            run, scope = parent.run, parent.scope
            inside = parent.inside or parent.kind in ("llm", "tool", "retriever")
        if kind == "agent":
            name = agent_name(attrs, span.name)
            if self.multi_agent is None:
                above = self._scopes.get(scope)
                nested = parent is not None and above is not None and above.agent is not None
                if nested or SMOLAGENTS_MANAGED in attrs or (run.top_agent not in (None, name)):
                    run.multi = True
            # the agent above delegates now: its step goes out before the sub-agent's steps
            out += self._flush(run, scope)
            if run.top_agent is None:
                run.top_agent = name
                run.task = run_task(attrs)
                run.framework = _framework(span)
            scope, inside = ctx.span_id, False
            self._scopes[scope] = _Scope(name)
            run.scopes[scope] = None
            out += self._open(run)
        elif kind == "llm" and not inside:
            out += self._flush(run, scope)  # the previous call's tools have all run
        self._nodes[ctx.span_id] = _Node(kind, run, scope, inside)
        run.spans.add(ctx.span_id)
        run.seen = self._clock()
        return out

    def end(self, span: ReadableSpan) -> list[Out]:
        ctx = span.context
        out = self._sweep()
        node = self._nodes.pop(ctx.span_id, None) if ctx is not None else None
        if node is None or ctx is None:
            return out
        run = node.run
        run.spans.discard(ctx.span_id)
        run.seen = self._clock()
        kind = node.kind if node.kind != "other" else span_kind(span.attributes or {})
        if kind == "llm" and not node.inside and not _failed(span):
            out += self._flush(run, node.scope)
            scope = self._scopes.get(node.scope)
            if scope is not None:
                scope.pending = model_call(span)
        elif kind in ("tool", "retriever") and not node.inside:
            result = tool_result(span, kind)
            scope = self._scopes.get(node.scope)
            if scope is not None and scope.pending is not None:
                scope.pending.results.append(result)
            elif scope is not None:  # a tool no model call asked for (or asked for earlier)
                out += self._step(run, scope, None, [result])
        elif kind == "agent" and node.kind == "agent":
            out += self._flush(run, ctx.span_id)
            self._scopes.pop(ctx.span_id, None)
            run.scopes.pop(ctx.span_id, None)
        if ctx.span_id == run.root:
            out += self._close(run, _outcome(span))
        return out

    def _close(self, run: _Run, outcome: str) -> list[Out]:
        """The run's last steps, then its end; everything it held is forgotten."""
        out: list[Out] = []
        for sid in reversed(list(run.scopes)):  # the innermost first
            out += self._flush(run, sid)
            self._scopes.pop(sid, None)
        for sid in run.spans:  # spans an instrumentation never ended: forgotten with their run
            self._nodes.pop(sid, None)
        self._runs.pop(run.root, None)
        if run.started:
            out.append(Out("run_finish", run.run_id, fields={"outcome": outcome}))
        return out

    def _sweep(self) -> list[Out]:
        """Finish the runs none of whose spans moved for `idle_s` (at most once a minute)."""
        now = self._clock()
        if now - self._swept < SWEEP_EVERY_S:
            return []
        self._swept = now
        out: list[Out] = []
        for run in [r for r in self._runs.values() if now - r.seen > self.idle_s]:
            self.abandoned += 1
            out += self._close(run, ABANDONED)
        return out

    def _open(self, run: _Run) -> list[Out]:
        if run.started:
            return []
        run.started = True
        fields: dict[str, Any] = {
            "task": run.task,
            "agent_name": run.top_agent,
            "framework": run.framework,
            **self.run_fields,
        }
        return [Out("run_start", run.run_id, fields={k: v for k, v in fields.items() if v is not None})]

    def _flush(self, run: _Run, scope_id: int) -> list[Out]:
        scope = self._scopes.get(scope_id)
        if scope is None or scope.pending is None:
            return []
        call, scope.pending = scope.pending, None
        return self._step(run, scope, call, call.results)

    def _step(self, run: _Run, scope: _Scope, call: ModelCall | None, results: list[Result]) -> list[Out]:
        out = self._open(run)
        run.steps += 1
        fields = step_fields(call, results)
        if run.multi and scope.agent:
            fields["agent"] = scope.agent
        where = call.context if call is not None else results[0].context if results else None
        out.append(Out("step", run.run_id, run.steps, fields, where))
        return out


def _ours(span: ReadableSpan) -> bool:
    """A span this module (or `streams.agent.tracing`) made: never a step of the agent."""
    scope = span.instrumentation_scope
    return scope is not None and scope.name == SCOPE


def _framework(span: ReadableSpan) -> str | None:
    scope = span.instrumentation_scope
    name = scope.name if scope is not None else ""
    for prefix in ("openinference.instrumentation.", "opentelemetry.instrumentation."):
        if name.startswith(prefix):
            return name[len(prefix) :].split(".", 1)[0][:256] or None
    return name[:256] or None


def _outcome(span: ReadableSpan) -> str:
    if span.status.status_code != StatusCode.ERROR:
        return "success"
    kind = _exception_type(span)
    return f"failure: {kind}" if kind else "failure"


# -- the processor -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ObservedStep:
    """What the callback receives: the event published (`step` 0: the run_start) and the
    worker's decision for it (None when it missed the client's deadline)."""

    run_id: str
    step: int
    event: dict[str, Any]
    decision: Decision | None


OnDecision = Callable[[ObservedStep], None]


class _Once:
    """Counts errors and logs the first of each kind: a broken broker must not flood the log
    of the application being observed."""

    def __init__(self) -> None:
        self.count = 0
        self._seen: set[str] = set()

    def __call__(self, where: str, exc: BaseException) -> None:
        self.count += 1
        kind = f"{where}:{type(exc).__name__}"
        if kind in self._seen or len(self._seen) >= 64:
            return
        self._seen.add(kind)
        log.warning(
            "rb-streams otel: %s failed (%s: %s); counted from now on, not logged",
            where,
            type(exc).__name__,
            exc,
        )


OPTIONS = (
    "on_decision",
    "max_pending",
    "max_pending_bytes",
    "run_id_prefix",
    "multi_agent",
    "tracer_provider",
    "trace_decisions",
)
DECISION_SPAN = "rb.steering.decision"


class SteeringSpanProcessor(SpanProcessor):
    """Observe-only steering for any OpenTelemetry-instrumented agent; see the module docstring.

    `client`: a started `SyncSteeringClient` (or use `connect(settings)`, which owns one);
    `on_decision`: called with an `ObservedStep` for run_start and every step, on the client's
    thread (keep it quick); `run_fields`: run_start fields for every run (`org_id`,
    `project_id`, `task_profile`, `monitors_off`, ...). `trace_decisions`: write each step's
    decision in the trace, on a `rb.steering.decision` span under the step's model call
    (`tracer_provider`'s, default the global one; with the client's `trace_guardrail`, the
    proposed `run_guardrail` span under it too, by the same provider)."""

    def __init__(
        self,
        client: SyncSteeringClient,
        *,
        on_decision: OnDecision | None = None,
        max_pending: int = 10_000,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        run_id_prefix: str = "otel",
        multi_agent: bool | None = None,
        idle_s: float = IDLE_S,
        tracer_provider: TracerProvider | None = None,
        trace_decisions: bool = True,
        **run_fields: Any,
    ) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending!r}")
        if max_pending_bytes < 1:
            raise ValueError(f"max_pending_bytes must be >= 1, got {max_pending_bytes!r}")
        check_run_field_names("SteeringSpanProcessor", run_fields, OPTIONS)
        validate_run_fields(run_fields, tuple(getattr(client, "extra_names", ()) or ()))
        self.client = client
        self.on_decision = on_decision
        self.max_pending = max_pending
        self.mapper = SpanMapper(
            run_fields, run_id_prefix=run_id_prefix, multi_agent=multi_agent, idle_s=idle_s
        )
        self._owns_client = False
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._pending_bytes = 0  # of the events in flight (`pending_bytes`)
        self.max_pending_bytes = max_pending_bytes
        self._dropped_runs: set[str] = set()
        self._tails: dict[str, asyncio.Future[Any]] = {}  # the client's loop only
        self._errors = _Once()
        self._closed = False
        self.published = 0  # events the client published
        self.decisions = 0  # decisions received
        self.late = 0  # steps whose decision missed the client's deadline
        self.dropped = 0  # events not published: too many in flight, or their run was dropped
        self.trace_decisions = trace_decisions
        self._tracer_provider = tracer_provider
        self._tracer: Any = None  # its tracer, made at the first decision written

    @classmethod
    def connect(cls, settings: Any = None, **kwargs: Any) -> SteeringSpanProcessor:
        """A processor with its own client (started now, stopped by `shutdown()`, which the
        tracer provider calls at exit). `settings`: `ClientSettings`/`Settings` (default: env)."""
        client = SyncSteeringClient(settings, deadline_ms=kwargs.pop("deadline_ms", 30_000))
        client.start()
        proc = cls(client, **kwargs)
        proc._owns_client = True
        return proc

    @property
    def errors(self) -> int:
        """Span handling, publishing and callback errors (each kind logged once)."""
        return self._errors.count

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def pending_bytes(self) -> int:
        """The size of the events in flight (their texts and inputs): at most
        `max_pending_bytes` plus one event."""
        return self._pending_bytes

    @property
    def abandoned(self) -> int:
        """Runs finished `failure: trace_not_ended`: none of their spans moved for `idle_s`."""
        return self.mapper.abandoned

    # -- SpanProcessor ----------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if _ours(span):
            return
        try:
            with self._lock:
                if not self._closed:
                    self._submit(self.mapper.start(span))
        except Exception as exc:
            self._errors("on_start", exc)

    def on_end(self, span: ReadableSpan) -> None:
        if _ours(span):
            return
        try:
            with self._lock:
                if not self._closed:
                    self._submit(self.mapper.end(span))
        except Exception as exc:
            self._errors("on_end", exc)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait until every event handed over is published and its decision came (or missed
        its deadline)."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        with self._idle:
            while self._pending > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def shutdown(self) -> None:
        if self.client.loop.is_running():
            self.force_flush(10_000)
        with self._lock:
            self._closed = True
        if self._owns_client:
            with contextlib.suppress(Exception):
                self.client.stop()

    # -- handing events to the client's loop ------------------------------------------
    def _submit(self, outs: list[Out]) -> None:
        """Under the lock, so a run's events reach the loop in the order they were made."""
        for o in outs:
            if o.run_id in self._dropped_runs:
                self.dropped += 1
                if o.kind == "run_finish":
                    self._dropped_runs.discard(o.run_id)
                continue
            size = _size(o)
            full = self._pending >= self.max_pending or self._pending_bytes >= self.max_pending_bytes
            if full and o.kind != "run_finish":
                self.dropped += 1
                if o.kind == "run_start":
                    self._dropped_runs.add(o.run_id)
                if self.dropped == 1:
                    log.warning(
                        "rb-streams otel: %d events (%d bytes) in flight (max_pending, max_pending_bytes): "
                        "dropping new ones",
                        self._pending,
                        self._pending_bytes,
                    )
                continue
            if not self.client.loop.is_running():
                self._errors("publish", RuntimeError("the steering client is stopped"))
                continue
            self._pending += 1
            self._pending_bytes += size
            try:
                self.client.loop.call_soon_threadsafe(self._chain, o, size)
            except RuntimeError as exc:  # the client's loop is closed
                self._pending -= 1
                self._pending_bytes -= size
                self._errors("publish", exc)

    def _chain(self, o: Out, size: int = 0) -> None:
        """On the loop: publish after the run's previous event (each waits for its decision)."""
        prev = self._tails.get(o.run_id)
        task = asyncio.ensure_future(self._publish(prev, o, size))
        self._tails[o.run_id] = task

        def done(t: asyncio.Future[Any]) -> None:
            if self._tails.get(o.run_id) is t:
                del self._tails[o.run_id]

        task.add_done_callback(done)

    def _trace(self, o: Out, decision: Decision | None) -> None:
        """The step's decision in the trace: a `rb.steering.decision` span under the step's
        model call (ended by now: a span can no longer be written on once it ended), with its
        evaluation events and `rb.` attributes (`streams.agent.tracing`). Never raises."""
        if o.context is None:
            return
        try:
            if self._tracer is None:
                provider = self._tracer_provider or otel_trace.get_tracer_provider()
                self._tracer = provider.get_tracer(SCOPE)
            parent = otel_trace.set_span_in_context(NonRecordingSpan(o.context))
            span = self._tracer.start_span(
                DECISION_SPAN, context=parent, attributes={"rb.run_id": o.run_id[:256]}
            )
            model = o.fields.get("model_id")
            record_decision(
                decision,
                span,
                late=decision is None,
                requested_model=model if isinstance(model, str) else None,
                guardrail=getattr(self.client, "trace_guardrail", False) is True,
                tracer=self._tracer,
            )
            span.end()
        except Exception as exc:
            self._errors("tracing the decision", exc)

    async def _publish(self, prev: asyncio.Future[Any] | None, o: Out, size: int = 0) -> None:
        if prev is not None and not prev.done():
            await asyncio.wait([prev])
        client = self.client.async_client
        try:
            decision: Decision | None = None
            event: dict[str, Any] = {"type": o.kind, "run_id": o.run_id, **o.fields}
            if o.kind == "run_start":
                decision = await client.start_run(o.run_id, **o.fields)
            elif o.kind == "step":
                event = step_event(o.run_id, o.step, **o.fields)
                decision = await client.step(o.run_id, o.step, **o.fields)
            else:
                await client.finish_run(o.run_id, o.fields.get("outcome", "success"))
                client.forget(o.run_id)
            self.published += 1
            if o.kind != "run_finish":
                if decision is None:
                    self.late += 1
                else:
                    self.decisions += 1
                if o.kind == "step" and self.trace_decisions:
                    self._trace(o, decision)
                if self.on_decision is not None:
                    try:
                        self.on_decision(ObservedStep(o.run_id, o.step, event, decision))
                    except Exception as exc:
                        self._errors("on_decision callback", exc)
        except Exception as exc:
            self._errors(f"publishing {o.kind}", exc)
        finally:
            with self._idle:
                self._pending -= 1
                self._pending_bytes -= size
                if self._pending == 0:
                    self._idle.notify_all()
