"""Recorded runs of every dev source, through a `SteeringSession` with a fake model: the
decisions are the core's (`streams.replay.Replayer`, the worker's code path, fed each recorded
event as it stands), the model calls are the recorded steps, each made inside a span of its own.
Every span must carry exactly what the decisions say, field for field: the evaluation events of
the decision to its step, the `rb.` attributes and the guardrail span of the decision that
steered it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streams.agent.client import Decision
from streams.agent.session import RunStopped, SteeringSession
from tests.fixtures.golden_decisions import REAL_DEV
from tests.unit.agent import trace_check as tc
from tests.unit.agent.trace_check import exported

__all__ = ["exported"]

DEV = REAL_DEV  # ../shared/data/real-dev beside the checkout; skipped without it
SOURCES = sorted(p.stem for p in DEV.glob("*.jsonl")) if DEV.is_dir() else []
RUNS_PER_SOURCE = 2  # the longest two of the source's first eight runs (more steps, more fires)
MAX_STEPS = 40  # of a run, replayed (a 50-turn OpenHands run: its first 40)
META = ("type", "schema_version", "run_id", "step", "ts")

pytestmark = pytest.mark.skipif(not SOURCES, reason="the dev data set is not here")


def runs_of(source: str) -> list[list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {}
    with (DEV / f"{source}.jsonl").open("rb") as f:
        for line in f:
            ev = orjson.loads(line)
            rid = ev["run_id"]
            if rid not in runs:
                if len(runs) == 8:
                    break
                runs[rid] = []
            runs[rid].append(ev)
    longest = sorted(runs.values(), key=lambda r: -len(r))[:RUNS_PER_SOURCE]
    return [[e for e in r if e["type"] != "step" or e["step"] <= MAX_STEPS] for r in longest]


class RecordedClient:
    """Feeds the recorded events to the core, as the worker would (the step the session
    publishes must be the recorded one: checked), and hands back its decisions."""

    trace_guardrail = True

    def __init__(self, run: list[dict[str, Any]]) -> None:
        from streams.replay import Replayer
        from tests.models import semantics

        self.events = {e["step"] if e["type"] == "step" else e["type"]: e for e in run}
        self.replayer = Replayer(sem=semantics(), clock=lambda: 1_767_225_600.0)
        self.decisions: list[dict[str, Any]] = []

    def _feed(self, event: dict[str, Any]) -> Decision:
        data, dead = self.replayer.feed(orjson.dumps(event), key=event["run_id"].encode())
        assert dead is None and data is not None, dead
        self.decisions.append(dict(data))
        return Decision(dict(data), 1.0)

    def start_run(self, run_id: str, **fields: Any) -> Decision:
        """The recorded run_start, with the session's own settings over it (its routing)."""
        return self._feed({**self.events["run_start"], **{k: v for k, v in fields.items() if v is not None}})

    def step(self, run_id: str, step: int, **fields: Any) -> Decision:
        recorded = self.events[step]
        assert fields == {k: v for k, v in recorded.items() if k not in META}
        return self._feed(recorded)

    def finish_run(self, run_id: str, outcome: str = "success") -> None:
        return None

    def step_log(self, run_id: str) -> list[Any]:
        return []


class FakeModel:
    """Answers call k with the recorded step k: its thought, its tool call, its result."""

    def __init__(self, run: list[dict[str, Any]]) -> None:
        self.steps = [e for e in run if e["type"] == "step"]

    def __call__(self, k: int) -> dict[str, Any]:
        return {key: v for key, v in self.steps[k - 1].items() if key not in META}


# the session routes by state, so rb.model.routed and the requested model differ where it does
ROUTING = {"FAST": "small-model", "SLOW": "big-model", "SKIP": "small-model"}


def replay(run: list[dict[str, Any]], tracer: trace.Tracer) -> tuple[RecordedClient, int]:
    start = run[0]
    client = RecordedClient(run)
    model = FakeModel(run)
    session = SteeringSession(
        client,  # type: ignore[arg-type]
        run_id=start["run_id"],
        model=start.get("model") or "the-agents-model",
        model_routing=ROUTING,
    )
    with tracer.start_as_current_span("start"):
        session.start()
    calls = 0
    for k in range(1, len(model.steps) + 1):
        with tracer.start_as_current_span(f"chat {k}"):
            try:
                session.begin_step()
            except RunStopped:
                break
            calls = k
            session.end_step(**model(k))
    return client, calls


@pytest.fixture(scope="module")
def totals() -> Iterator[dict[str, int]]:
    seen = {"decisions": 0, "events": 0, "texts": 0, "calls": 0, "routed": 0, "stops": 0}
    yield seen
    # across the sources the check is not vacuous: monitors fired, and texts were given
    assert min(seen.values()) > 0, seen


@pytest.mark.parametrize("source", SOURCES)
def test_recorded_runs_traces_match_their_decisions(
    source: str, exported: tuple[trace.Tracer, InMemorySpanExporter], totals: dict[str, int]
) -> None:
    tracer, exporter = exported
    for run in runs_of(source):
        exporter.clear()
        client, calls = replay(run, tracer)
        ds = client.decisions
        spans = exporter.get_finished_spans()
        asked = run[0].get("model") or "the-agents-model"
        assert tc.events_of(tc.named(spans, "start")) == tc.evaluations(ds[0])
        for k in range(1, calls + 1):
            (span,) = tc.named(spans, f"chat {k}")
            assert tc.attrs(span) == tc.steering(ds[k - 1], asked), (run[0]["run_id"], k)
            assert tc.events_of([span]) == tc.evaluations(ds[k]), (run[0]["run_id"], k)
            assert tc.guardrails_under(spans, span) == [tc.guardrail(ds[k - 1])]
        if calls < len(ds) - 1:  # the run was stopped: the stop is on the call it refused
            (span,) = tc.named(spans, f"chat {calls + 1}")
            assert tc.attrs(span)["rb.action"] == "stop" == ds[calls]["action"]
        totals["decisions"] += len(ds)
        totals["calls"] += calls
        totals["events"] += len(tc.events_of(spans))
        totals["texts"] += sum(1 for d in ds if tc.explanation(d))
        totals["routed"] += sum(1 for d in ds if d.get("model"))
        totals["stops"] += sum(1 for d in ds if d.get("action") == "stop")
