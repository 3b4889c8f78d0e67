"""Per-step cost and run-state size as a run grows (core only, and through the worker).

    .venv/bin/python -m bench.flat_cost [--worker] [--steps 5000]

Core: the exact per-event work of the worker minus Kafka: decode + validate + state decode
from the table encoding + FSM + decision + state encode, timed at steps 10, 100, 1000, 5000.
Worker: one long run, agent-side publish->decision latency around those step indices.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson

from bench.common import (
    add_rounds_args,
    bench_settings,
    commit,
    ensure_broker,
    log,
    machine,
    results_dir,
    spread,
    stop_broker,
)
from streams.agent.client import SteeringClient
from streams.core.engine import Engine
from streams.core.events import Limits
from streams.core.results import Refused
from streams.core.state import TraceState
from streams.embeddings.models import load_models
from streams.local.simulate import trajectory
from streams.local.worker_process import WorkerProcess
from streams.settings import Settings
from tests.factories import run_start, step

INDICES = (10, 100, 1000, 5000)
WINDOW = 10  # steps either side of an index whose timings are pooled


def core(n_steps: int, runs: int, monitors: bool, reps: int = 300) -> dict[int, tuple[float, int, float]]:
    """Per index: median cold per-step time (us) around it, run-state size, warm time (us).

    Cold: every step is applied once, new texts pay for their embeddings the way they do in
    the worker. Runs are synthetic coding-agent trajectories (streams.local.simulate), healthy
    ones, so what is measured is the steady cost, not a monitor firing. Warm: the step at
    each index is re-applied to the state before it, round-robin over the indices `reps`
    times, so machine noise hits every index alike (embeddings cached: the monitors' own
    work, state decode/encode and the decision)."""
    limits = Limits()
    sem = load_models().semantics()
    engine = Engine(None, sem, limits)

    def step_once(raw: bytes, lookup: Callable[[str], TraceState | None]) -> TraceState | None:
        """read, look up, step: the state the event leaves (None: refused)."""
        now = time.time()
        read = engine.read(raw, now)
        if isinstance(read, Refused):
            return None
        out = engine.step(lookup(read.run_id), read, now)
        return out.state

    times: dict[int, list[float]] = {k: [] for k in INDICES if k <= n_steps}
    sizes: dict[int, int] = {}
    snapshots: dict[int, tuple[bytes, bytes]] = {}
    for r in range(runs):
        table: dict[str, bytes] = {}

        def lookup(rid: str, table: dict[str, bytes] = table) -> TraceState | None:
            raw = table.get(rid)
            return None if raw is None else TraceState.decode(raw)

        def apply(raw: bytes, table: dict[str, bytes] = table) -> None:
            state = step_once(raw, lookup)
            if state is not None:
                table["r"] = state.encode()

        task, steps = trajectory("healthy", n_steps + 1, seed=1000 + r)
        apply(orjson.dumps(run_start("r", task=task, model_routing={"FAST": "s"}, monitors_enabled=monitors)))
        for k, payload in enumerate(steps, start=1):
            if k > n_steps:
                break
            raw = orjson.dumps(step("r", k, **payload))
            if k in times and r == 0:
                snapshots[k] = (table["r"], raw)
            t0 = time.perf_counter_ns()
            apply(raw)
            dt = (time.perf_counter_ns() - t0) / 1000.0
            for idx in times:
                if abs(k - idx) <= WINDOW:
                    times[idx].append(dt)
            if k in times:
                sizes[k] = len(table["r"])
        log(f"core run {r + 1}/{runs} (monitors {'on' if monitors else 'off'}) done")
    warm: dict[int, list[float]] = {k: [] for k in snapshots}
    for _ in range(reps):
        for k, (before, raw) in snapshots.items():
            table = {"r": before}

            def decoded(rid: str, table: dict[str, bytes] = table) -> TraceState | None:
                return TraceState.decode(table[rid])

            t0 = time.perf_counter_ns()
            state = step_once(raw, decoded)
            assert state is not None
            state.encode()
            warm[k].append((time.perf_counter_ns() - t0) / 1000.0)
    out = {k: (statistics.median(v), sizes[k], statistics.median(warm[k])) for k, v in times.items()}
    for k, (us, size, w) in out.items():
        log(f"core step {k}: {us:.1f} us/step cold, {w:.1f} warm, state {size} bytes")
    return out


DEADLINE_MS = 30_000


def through_worker(n_steps: int) -> dict[int, float]:
    s = bench_settings()
    w = WorkerProcess.start(s, results_dir() / "flat-worker.log")
    try:
        return asyncio.run(_drive(s, n_steps))
    finally:
        w.stop()


async def _drive(s: Settings, n_steps: int) -> dict[int, float]:
    lat: dict[int, float] = {}
    task, steps = trajectory("healthy", n_steps, seed=2)
    # a deadline well past any step's latency: a step the worker has not answered by then is a
    # defect to report, not a latency (three benchmarks share two cores in the smoke test)
    async with SteeringClient(s, deadline_ms=DEADLINE_MS) as c:
        rid = f"long-{uuid.uuid4().hex[:6]}"
        await c.start_run(rid, task=task)
        for k in range(1, n_steps + 1):
            d = await c.step(rid, k, **next(steps))
            if d is None:
                raise SystemExit(f"step {k} of {n_steps} got no decision within {DEADLINE_MS} ms")
            lat[k] = d.latency_ms
            if k % 1000 == 0:
                log(f"worker: step {k}")
    return lat


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3, help="independent runs pooled per index (core)")
    ap.add_argument("--worker", action="store_true", help="also measure through a live worker")
    ap.add_argument("--plot", action="store_true")
    add_rounds_args(ap, "the core measurement (monitors on)")
    args = ap.parse_args()
    off = core(args.steps, args.runs, monitors=False)
    reps = [core(args.steps, args.runs, monitors=True) for _ in range(max(1, args.repeat))]
    res = {
        k: (
            statistics.median(r[k][0] for r in reps),
            reps[0][k][1],
            statistics.median(r[k][2] for r in reps),
        )
        for k in reps[0]
    }
    print(f"\nmachine: {machine()}  date: {time.strftime('%Y-%m-%d')}  commit: {commit()}")
    if len(reps) > 1:
        print(f"(cells: medians of {len(reps)} repetitions of the monitors-on measurement)")
    print(
        "| step | core us/step cold, monitors on | ratio to step 10 | warm (round-robin) | ratio to step 10 "
        "| monitors off, cold | monitor cost, cold | state bytes |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for k in INDICES:
        if k in res:
            print(
                f"| {k} | {res[k][0]:.1f} | {res[k][0] / res[10][0]:.2f}x | {res[k][2]:.1f} | "
                f"{res[k][2] / res[10][2]:.2f}x | {off[k][0]:.1f} | {res[k][0] - off[k][0]:.1f} | {res[k][1]} |"
            )
    wres: dict[int, float] = {}
    if args.worker:
        started = ensure_broker()
        try:
            lat = through_worker(args.steps)
        finally:
            if started:
                stop_broker()
        print("\n| step | worker p50 ms (window of 21 steps) | ratio to step 10 |")
        print("|---|---|---|")
        for k in (k for k in INDICES if k <= args.steps):
            win = [lat[i] for i in range(max(1, k - 10), min(args.steps, k + 10) + 1)]
            wres[k] = statistics.median(win)
            print(f"| {k} | {wres[k]:.2f} | {wres[k] / wres[10]:.2f}x |")
    last = max(k for k in INDICES if k in res)
    mid = 1000 if 1000 in res else last
    print(
        f"SUMMARY flat_cost: core (monitors on) step {mid} = {res[mid][0] / res[10][0]:.2f}x step 10 cold, "
        f"{res[mid][2] / res[10][2]:.2f}x warm; step {last} = {res[last][0] / res[10][0]:.2f}x cold, "
        f"{res[last][2] / res[10][2]:.2f}x warm; monitor cost {res[10][0] - off[10][0]:.0f} us at "
        f"step 10 -> {res[mid][0] - off[mid][0]:.0f} us at step {mid}; state {res[10][1]} -> {res[last][1]} bytes"
        + (f"; worker step {mid} = {wres[mid] / wres[10]:.2f}x step 10" if wres else "")
    )
    if args.json:
        figures: dict[str, dict[str, float]] = {}
        for k in (k for k in INDICES if k in res and k != 10):
            figures[f"step {k} / step 10, cold"] = spread([r[k][0] / r[10][0] for r in reps])
            figures[f"step {k} / step 10, warm"] = spread([r[k][2] / r[10][2] for r in reps])
        figures["core us/step at step 10, cold"] = spread([r[10][0] for r in reps])
        figures[f"state bytes at step {last}"] = spread([float(r[last][1]) for r in reps])
        Path(args.json).write_text(json.dumps({"figures": figures}, indent=1))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        ks = [k for k in INDICES if k in res]
        ax.plot(ks, [res[k][0] for k in ks], "o-", label="core us/step")
        if wres:
            ax.plot(ks, [wres[k] * 1000 for k in ks], "s-", label="worker round trip (us)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("step index")
        ax.legend()
        ax.set_title("per-step cost vs run length")
        fig.tight_layout()
        fig.savefig(results_dir() / "flat_cost.png", dpi=110)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
