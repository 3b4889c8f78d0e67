"""CPU per event as a step's texts grow: a 2 KB step against a ~120 KB one (a big tool output).

    .venv/bin/python -m bench.step_cost [--repeat 5] [--runs 10]

The worker's per-event work without Kafka: decode + validate, the run's state read from its
table bytes, every monitor, the decision, seal (state and decision encoded), store; the
events are bench.tenant_fairness's flood steps (runs of 30 steps, thought at its 20,000-char cut, the
rest observation), once at ~2 KB and once at ~120 KB. Figure per round: the median CPU time
(`time.process_time`) of a step at each size, and their ratio; over rounds, medians with
min-max. Why it matters: the worker takes tenants' events one at a time under one interpreter
lock, so one large step is what another tenant's event waits behind (BENCHMARKS.md section 10).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from bench.common import add_rounds_args, commit, fmt_spread, log, machine, spread
from bench.tenant_fairness import flood_events
from streams.core.engine import Engine
from streams.core.etrace_rules import Answer
from streams.core.events import Limits
from streams.core.results import Decided
from streams.embeddings.models import load_models
from streams.kafka import wire
from streams.pipeline import Evicted, Pipeline
from streams.worker.run_table import RunTable

PARTITIONS = 4


def per_step_ms(pipeline: Pipeline, events: list[tuple[bytes, bytes]]) -> list[float]:
    """CPU ms of each step event (run_starts are applied, not counted)."""
    out: list[float] = []
    for i, (key, raw) in enumerate(events):
        t0 = time.process_time()
        taken = pipeline.take(raw, 1_700_000_000.0 + i, key=key)
        assert not isinstance(taken, Evicted)
        plan = taken.effects.answer_now if isinstance(taken, Decided) else None
        sealed = pipeline.seal(taken, [Answer(q.tier) for q in plan.queries] if plan else [])
        pipeline.store(sealed)
        dt = (time.process_time() - t0) * 1000.0
        if sealed.rejection is not None:
            raise SystemExit(f"event {i} refused: {sealed.rejection}")
        if b'"type":"step"' in raw:
            out.append(dt)
    return out


def one_round(engine: Engine, runs: int, seed: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    for kb in (2.0, 120.0):
        table: dict[bytes, bytes] = {}

        def partition_of(run_id: str) -> int:
            return wire.partition_for(run_id, PARTITIONS)

        pipeline = Pipeline(engine, RunTable(table, 0, partition_of, PARTITIONS))
        ms = per_step_ms(pipeline, flood_events(runs * 30, kb, seed))
        figures[f"{kb:g}kb_ms"] = statistics.median(ms)
    figures["ratio"] = figures["120kb_ms"] / figures["2kb_ms"]
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="runs of 30 steps at each size, per round")
    add_rounds_args(ap, "both sizes")
    args = ap.parse_args()
    engine = Engine(None, load_models().semantics(), Limits())
    rounds = []
    for r in range(args.repeat):
        f = one_round(engine, args.runs, seed=r)
        rounds.append(f)
        log(
            f"round {r + 1}/{args.repeat}: 2 KB {f['2kb_ms']:.2f} ms, 120 KB {f['120kb_ms']:.2f} ms ({f['ratio']:.2f}x)"
        )
    out = {k: spread([f[k] for f in rounds]) for k in rounds[0]}
    print(f"commit {commit()}; {machine()}")
    print(f"CPU per 2 KB step:   {fmt_spread(out['2kb_ms'], ' ms')}")
    print(f"CPU per 120 KB step: {fmt_spread(out['120kb_ms'], ' ms')}")
    print(f"120 KB / 2 KB:       {fmt_spread(out['ratio'], 'x')}")
    print(
        f"SUMMARY step_cost: CPU per step {fmt_spread(out['2kb_ms'], ' ms')} at 2 KB, "
        f"{fmt_spread(out['120kb_ms'], ' ms')} at 120 KB ({out['ratio']['median']:.2f}x)"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
