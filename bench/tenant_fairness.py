"""One tenant's flood against another tenant's decision latency (issue 38 item 5).

    RB_BENCH_KAFKA_PORT=19092 .venv/bin/python -m bench.tenant_fairness [--flood 1500] [--flood-kb 120] [--repeat 3]

One multi-tenant worker serves tenants `calm` and `flood`, each on its own topics. `calm` runs
`--runs` agents that step one after another (a short think time between steps, as agents
do); its decision latency is measured alone first (unloaded), then while `flood` has
`--flood` steps of ~`--flood-kb` KB each waiting on its steps topic (produced as fast as the
broker takes them, before calm's first loaded step: a backlog, the worst case for calm).
Only calm's steps sent before the worker answered the flood's last step count as loaded.

Figure: calm's loaded p95 / its unloaded p95 in the same round (target: at most 3), with the
p50s, the flood's drain time and how many calm steps overlapped it. Kafka's quotas (`tenants
add --producer-byte-rate`) are not in play here (plain listener): this measures the worker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.common import (
    add_rounds_args,
    bench_settings,
    commit,
    ensure_broker,
    fmt_spread,
    log,
    machine,
    pct,
    results_dir,
    spread,
    stop_broker,
)
from streams.agent.client import SteeringClient
from streams.local.worker_process import WorkerProcess
from streams.settings import Settings

TENANTS = ("calm", "flood")
INBOUND: list[tuple[float, float]] = []  # (send time, ms from send to the worker's decision)
WORDS = [
    "error",
    "warning",
    "retry",
    "request",
    "response",
    "status",
    "token",
    "session",
    "build",
    "test",
    "module",
    "import",
    "function",
    "return",
    "value",
    "config",
    "cache",
    "index",
    "table",
    "query",
    "latency",
    "buffer",
    "commit",
    "branch",
    "merge",
]


@dataclass
class Round:
    unloaded: list[float]
    loaded: list[float]
    drain_s: float
    flood_steps: int

    def figures(self) -> dict[str, float]:
        u95, l95 = pct(self.unloaded, 95), pct(self.loaded, 95)
        return {
            "unloaded_p50": pct(self.unloaded, 50),
            "unloaded_p95": u95,
            "loaded_p50": pct(self.loaded, 50),
            "loaded_p95": l95,
            "ratio_p95": l95 / u95 if u95 else float("nan"),
            "loaded_n": len(self.loaded),
            "drain_s": self.drain_s,
            "flood_steps": self.flood_steps,
        }


def fairness_settings(base: Settings) -> Settings:
    """The worker's settings: both tenants served (a control key is required with tenants)."""
    extra: dict[str, Any] = {"tenants": ",".join(TENANTS), "control_key": "bench-fairness"}
    if "decision_key" in Settings.model_fields:  # signed decisions, where the settings have them
        extra["decision_key"] = "bench-fairness-decisions"
    return base.with_(**extra)


def tenant(s: Settings, name: str) -> Settings:
    return s.with_(tenant=name, tenants="", control_key="")


def text(rng: random.Random, n_bytes: int) -> str:
    out: list[str] = []
    size = 0
    while size < n_bytes:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def flood_events(n_steps: int, kb: float, seed: int) -> list[tuple[bytes, bytes]]:
    """run_starts then steps of ~`kb` KB (thought at its 20,000-char cut, the rest in the
    observation), runs of 30 steps interleaved, each run's steps in order."""
    rng = random.Random(seed)
    per_run = 30
    runs = [f"flood-{seed}-{uuid.uuid4().hex[:6]}-{i}" for i in range(max(1, -(-n_steps // per_run)))]
    thought = text(rng, min(19_000, int(kb * 1024 * 0.2)))
    observations = [text(rng, max(100, int(kb * 1024) - len(thought) - 300)) for _ in range(8)]
    out = [
        (
            r.encode(),
            orjson.dumps({"type": "run_start", "schema_version": 1, "run_id": r, "task": "bulk job"}),
        )
        for r in runs
    ]
    sent = 0
    for k in range(1, per_run + 1):
        for i, r in enumerate(runs):
            if sent >= n_steps:
                break
            ev = {
                "type": "step",
                "schema_version": 1,
                "run_id": r,
                "step": k,
                "thought": thought,
                "action": "bash",
                "action_input": {"command": f"process --batch {k}"},
                "observation": observations[(i + k) % len(observations)],
                "tokens": 4000,
            }
            out.append((r.encode(), orjson.dumps(ev)))
            sent += 1
    return out


async def calm_steps(
    c: SteeringClient, runs: list[str], first: list[int], until: float, stop: asyncio.Event, think_s: float
) -> list[tuple[float, float]]:
    """Each run steps one after another until `until` or `stop`: (send time, latency ms)."""
    out: list[tuple[float, float]] = []

    async def agent(i: int) -> None:
        await asyncio.sleep(think_s * i / len(runs))  # spread the phases
        while time.monotonic() < until and not stop.is_set():
            first[i] += 1
            t, wall = time.monotonic(), time.time()
            d = await c.step(
                runs[i], first[i], thought=f"check step {first[i]}", action="read_file", tokens=50
            )
            if d is not None:
                out.append((t, float(d.latency_ms)))
                INBOUND.append((t, (d["processed_ts"] - wall) * 1000))
            await asyncio.sleep(think_s)

    await asyncio.gather(*(agent(i) for i in range(len(runs))))
    return out


async def flood_drained(s: Settings, want: int, started: asyncio.Event, timeout_s: float) -> float:
    """Seconds from `started` until `want` decisions are on the flood tenant's steering topic."""
    c = AIOKafkaConsumer(bootstrap_servers=s.bootstrap_servers, group_id=None, enable_auto_commit=False)
    await c.start()
    try:
        topic = s.tenant_topic("flood", "steering")
        tps = [TopicPartition(topic, p) for p in range(s.partitions)]
        c.assign(tps)
        await c.seek_to_end(*tps)
        await started.wait()
        t0 = time.monotonic()
        n = 0
        while n < want and time.monotonic() - t0 < timeout_s:
            for recs in (await c.getmany(timeout_ms=200, max_records=2000)).values():
                n += len(recs)
        return time.monotonic() - t0
    finally:
        await c.stop()


async def one_round(
    s: Settings, n_runs: int, unloaded_s: float, flood: int, kb: float, seed: int, think_s: float
) -> Round:
    calm = tenant(s, "calm")
    runs = [f"calm-{seed}-{uuid.uuid4().hex[:6]}-{i}" for i in range(n_runs)]
    events = flood_events(flood, kb, seed)
    steps = [0] * n_runs
    async with SteeringClient(calm, deadline_ms=60_000) as c:
        for r in runs:
            assert await c.start_run(r, task="fix the login bug") is not None
        quiet = asyncio.Event()
        await calm_steps(c, runs, steps, time.monotonic() + 1.0, quiet, think_s)  # warm-up
        unloaded = [
            ms for _, ms in await calm_steps(c, runs, steps, time.monotonic() + unloaded_s, quiet, think_s)
        ]
        started, drained = asyncio.Event(), asyncio.Event()
        watch = asyncio.create_task(flood_drained(s, len(events), started, timeout_s=600))
        p = AIOKafkaProducer(
            bootstrap_servers=s.bootstrap_servers, linger_ms=5, max_batch_size=1024 * 1024, acks=1
        )
        await p.start()
        try:
            topic = s.tenant_topic("flood", "steps")
            await asyncio.sleep(0.5)  # the watcher is at the end of the steering topic
            t_flood = time.monotonic()
            started.set()
            futs = [await p.send(topic, v, key=k) for k, v in events]
            await asyncio.gather(*futs)
        finally:
            await p.stop()
        log(
            f"  flood of {len(events)} records ({flood} steps of ~{kb:g} KB) produced in {time.monotonic() - t_flood:.1f} s"
        )

        async def mark() -> float:
            d = await watch
            drained.set()
            return d

        marker = asyncio.create_task(mark())
        loaded_all = await calm_steps(c, runs, steps, time.monotonic() + 600, drained, think_s)
        drain_s = await marker
    t_end = t_flood + drain_s
    loaded = [ms for t, ms in loaded_all if t < t_end]
    inb = [ms for t, ms in INBOUND if t_flood <= t < t_end]
    log(
        f"  loaded: send -> decided p50 {pct(inb, 50):.1f} ms, p95 {pct(inb, 95):.1f} ms (the rest: decided -> agent)"
    )
    return Round(unloaded, loaded, drain_s, flood)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flood", type=int, default=1500, help="steps the flooding tenant sends")
    ap.add_argument("--flood-kb", type=float, default=120.0, help="size of each flood step, KB")
    ap.add_argument("--runs", type=int, default=4, help="the calm tenant's concurrent runs")
    ap.add_argument("--think", type=float, default=0.05, help="seconds between a calm run's steps")
    ap.add_argument("--unloaded", type=float, default=10.0, help="seconds of unloaded measurement")
    ap.add_argument("--partitions", type=int, default=4)
    add_rounds_args(ap, "unloaded then flooded")
    args = ap.parse_args()

    started = ensure_broker()
    s = fairness_settings(bench_settings(partitions=args.partitions))
    worker = WorkerProcess.start(s, results_dir() / "fairness-worker.log")
    rows: list[dict[str, float]] = []
    try:
        for rnd in range(args.repeat):
            log(
                f"round {rnd + 1}/{args.repeat}: {args.runs} calm runs, flood {args.flood} x {args.flood_kb:g} KB"
            )
            r = asyncio.run(
                one_round(s, args.runs, args.unloaded, args.flood, args.flood_kb, rnd, args.think)
            )
            f = r.figures()
            rows.append(f)
            log(
                f"  calm p50 {f['unloaded_p50']:.1f} -> {f['loaded_p50']:.1f} ms, p95 {f['unloaded_p95']:.1f} -> "
                f"{f['loaded_p95']:.1f} ms (x{f['ratio_p95']:.2f}), {f['loaded_n']} calm steps during the "
                f"flood's {f['drain_s']:.1f} s drain"
            )
    finally:
        worker.stop()
        if started:
            stop_broker()
    figures = {
        k: spread([row[k] for row in rows])
        for k in (
            "unloaded_p50",
            "unloaded_p95",
            "loaded_p50",
            "loaded_p95",
            "ratio_p95",
            "drain_s",
            "loaded_n",
        )
    }
    print(f"# fairness: {machine()}, commit {commit()}, {args.repeat} rounds (median, min to max)")
    print(
        f"calm unloaded p50 {fmt_spread(figures['unloaded_p50'], ' ms', 1)}, p95 {fmt_spread(figures['unloaded_p95'], ' ms', 1)}"
    )
    print(
        f"calm flooded  p50 {fmt_spread(figures['loaded_p50'], ' ms', 1)}, p95 {fmt_spread(figures['loaded_p95'], ' ms', 1)}"
    )
    print(f"p95 flooded / unloaded: {fmt_spread(figures['ratio_p95'], 'x')}")
    print(
        f"flood drain {fmt_spread(figures['drain_s'], ' s', 1)}, calm steps during it {fmt_spread(figures['loaded_n'], '', 0)}"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "figures": figures, "args": vars(args)}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
