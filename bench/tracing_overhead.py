"""Agent-side cost of writing each applied decision in the user's OpenTelemetry trace
(`streams.agent.tracing`): per decision, with OpenTelemetry on and off.

    .venv/bin/python -m bench.tracing_overhead [--steps 2000] [--repeat 7] [--json FILE]

A `SteeringSession` runs `--steps` steps on a client that answers at once (no broker, no
worker: only the agent side is timed), every decision one in which two monitors fired, with a
steering text, a routed model and the ladder's reason (the most the tracing writes). Each step
is a model call: `begin_step()` (the steering attributes) and `end_step()` (the two evaluation
events). Configurations, interleaved in every round:

* on: the SDK's `TracerProvider` (the global one), its spans exported by a no-op exporter
  behind a `BatchSpanProcessor` (what an application uses; the export runs on its thread), and
  the application's span around each model call;
* on, guardrail: the same with the proposed `run_guardrail` span too (`RB_CLIENT_TRACE_GUARDRAIL`);
* off: no span current (OpenTelemetry not in use: the tracing only looks it up);

each against the same loop with the tracing calls replaced by no-ops (the base). The overhead
per decision is (loop - its base) / steps: the time the tracing adds, the application's own
spans left out, in CPU time of the agent's thread (the headline: other processes on a shared
machine do not inflate it) and wall-clock. Figures: the median of `--repeat` rounds, with min
and max.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bench.common import commit, fmt_spread, log, machine, spread
from streams.agent import tracing
from streams.agent.client import Decision
from streams.agent.session import SteeringSession

TEXT = "[REASONBLOCKS]\nYou ran the same search three times with the same query: try another query."
TARGET_US = 50.0


def decision(step: int) -> dict[str, Any]:
    return {
        "run_id": "bench",
        "step": step,
        "fsm_state": "SLOW",
        "difficulty": 0.8,
        "model": "claude-opus-4-5",
        "inject": True,
        "injection_text": TEXT,
        "action": "nudge",
        "action_reason": {"text": "Warned at step 2, the same search again at step 3."},
        "monitors": {
            "scores": {"semantic_loop": 0.91, "tool_repetition": 0.7},
            "fired": ["semantic_loop", "tool_repetition"],
            "failure_type": "loop",
        },
    }


class InstantClient:
    """Answers every event at once with `decision(step)` (the agent side alone is timed)."""

    def __init__(self, guardrail: bool = False) -> None:
        self.trace_guardrail = guardrail

    def start_run(self, run_id: str, **fields: Any) -> Decision:
        return Decision(decision(0), 1.0)

    def step(self, run_id: str, step: int, **fields: Any) -> Decision:
        return Decision(decision(step), 1.0)

    def finish_run(self, run_id: str, outcome: str = "success") -> None:
        return None

    def step_log(self, run_id: str) -> list[Any]:
        return []


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """The session's tracing calls as no-ops: the base each configuration is compared with."""
    names = ("record_evaluation", "record_steering", "record_refusal", "quiet")
    saved = {n: getattr(tracing, n) for n in names}
    for n in names[:3]:
        setattr(tracing, n, lambda *a, **k: None)
    tracing.quiet = contextlib.nullcontext  # type: ignore[assignment]
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(tracing, n, f)


def loop(steps: int, span: Callable[[], Any] | None, guardrail: bool = False) -> tuple[float, float]:
    """Seconds for `steps` model calls of one session (`span`: the application's span per call):
    wall-clock, and the CPU time of this thread (what the agent's thread spends, whatever else
    the machine runs; the batch processor's export thread is not in it)."""
    s = SteeringSession(InstantClient(guardrail), run_id="bench", model="claude-sonnet-4-5")  # type: ignore[arg-type]
    s.start()
    fields = {
        "thought": "search again",
        "action": "search",
        "action_input": {"q": "x"},
        "observation": "none",
    }
    t0, c0 = time.perf_counter(), time.thread_time()
    if span is None:
        for _ in range(steps):
            s.begin_step()
            s.end_step(**fields)
    else:
        for _ in range(steps):
            with span():
                s.begin_step()
                s.end_step(**fields)
    return time.perf_counter() - t0, time.thread_time() - c0


def provider() -> tuple[Any, Callable[[], Any]]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class NoOp(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    p = TracerProvider()
    p.add_span_processor(BatchSpanProcessor(NoOp(), max_queue_size=65_536, schedule_delay_millis=200))
    trace.set_tracer_provider(p)
    tracer = trace.get_tracer("bench.app")
    return p, lambda: tracer.start_as_current_span("chat claude-sonnet-4-5")


def load() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2000, help="model calls per configuration and round")
    ap.add_argument("--repeat", type=int, default=7, help="rounds; medians with min-max")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    prov, span = provider()
    loop(200, span)  # warm-up: imports, caches
    loop(200, None)
    us: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        with untraced():
            base_on = loop(args.steps, span)
            base_off = loop(args.steps, None)
        runs = {
            "on": (loop(args.steps, span), base_on),
            "on, guardrail": (loop(args.steps, span, guardrail=True), base_on),
            "off": (loop(args.steps, None), base_off),
        }
        us.setdefault("base: one step, the application's span, no tracing (cpu)", []).append(
            base_on[1] / args.steps * 1e6
        )
        for name, (got, base) in runs.items():
            for i, clock in enumerate(("wall", "cpu")):
                us.setdefault(f"{name} ({clock})", []).append((got[i] - base[i]) / args.steps * 1e6)
    prov.shutdown()
    figures = {k: spread(v) for k, v in us.items()}
    log(f"machine: {machine()}; load {load()}; commit {commit()}; cpus {os.cpu_count()}")
    log(f"{args.steps} decisions per configuration, {args.repeat} rounds; BatchSpanProcessor, no-op exporter")
    for k, sp in figures.items():
        what = k if k.startswith("base") else f"tracing overhead per decision, OpenTelemetry {k}"
        log(f"  {what}: {fmt_spread(sp, ' µs', 1)}")
    ok = figures["on (cpu)"]["median"] <= TARGET_US
    log(
        f"target: at most {TARGET_US:.0f} µs per decision with OpenTelemetry on: {'met' if ok else 'NOT met'}"
    )
    out = {"steps": args.steps, "rounds": args.repeat, "us_per_decision": figures, "commit": commit()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return out


if __name__ == "__main__":
    main()
