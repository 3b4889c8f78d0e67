"""Decision latency at the agent side vs the raw Kafka floor, at several step rates.

    .venv/bin/python -m bench.latency --rates 50,200,500,1000 --duration 20 [--repeat 3]

Floor 1 (`hop`): aiokafka produce -> consume of the same kind of message on a topic with the
same partitions (one hop, no processing). Floor 2 (`echo`): produce -> a raw aiokafka echo
process -> consume (the same two hops our path has, no Faust, no logic). Ours: SteeringClient
publish -> worker -> decision received, for a fleet of synthetic coding agents
(streams.local.simulate): everything on ("ours": monitors and E-traces from the starter pattern
library in the worker's local Qdrant store), E-traces off ("ours-no-etraces"), and monitors
and E-traces off ("ours-no-monitors": the FSM alone).

`--repeat N` measures every path N times, in rounds (hop, echo, ours, ... then again), so each
ratio compares paths measured minutes apart at most; figures are the medians of the per-round
ratios with min-max. For "ours" the E-trace wait of its decisions is read from the worker's
rb_etrace_wait_seconds histogram before and after the path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.common import (
    STARTER,
    add_rounds_args,
    bench_settings,
    commit,
    ensure_broker,
    fmt_spread,
    log,
    machine,
    paced,
    results_dir,
    scrape,
    spread,
    stop_broker,
    summary,
)
from streams.agent.client import SteeringClient
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.local.worker_process import WorkerProcess
from streams.settings import Settings
from tests.factories import step as step_event

THOUGHT = "Read src/auth/session.py to see where the token expiry is checked, then run the failing test."
# floors, then the worker with everything on ("ours"), without E-traces, and FSM only
PATHS = ("hop", "echo", "ours", "ours-no-etraces", "ours-no-monitors")


async def _topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    finally:
        await admin.close()


class RawPath:
    """Producer to `out_topic`, consumer of `in_topic`; latency keyed by (run, step)."""

    def __init__(self, bootstrap: str, out_topic: str, in_topic: str, partitions: int) -> None:
        self.bootstrap, self.out_topic, self.in_topic, self.partitions = (
            bootstrap,
            out_topic,
            in_topic,
            partitions,
        )
        self.waiters: dict[tuple[int, int], asyncio.Future[float]] = {}

    async def __aenter__(self) -> RawPath:
        self.p = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True, linger_ms=0
        )
        self.c = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            fetch_max_wait_ms=50,
            isolation_level="read_committed",
        )
        await self.p.start()
        await self.c.start()
        tps = [TopicPartition(self.in_topic, i) for i in range(self.partitions)]
        self.c.assign(tps)
        await self.c.seek_to_end(*tps)
        for tp in tps:
            await self.c.position(tp)
        self.task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.task.cancel()
        await self.p.stop()
        await self.c.stop()

    async def _loop(self) -> None:
        while True:
            batch = await self.c.getmany(timeout_ms=20)
            now = time.perf_counter()
            for recs in batch.values():
                for r in recs:
                    d = orjson.loads(r.value)
                    fut = self.waiters.pop((int(d["run_id"][1:]), d["step"]), None)
                    if fut and not fut.done():
                        fut.set_result(now)

    async def one(self, i: int, k: int) -> float | None:
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiters[(i, k)] = fut
        t0 = time.perf_counter()
        ev = step_event(f"r{i}", k, thought=THOUGHT, ts=time.time())
        await self.p.send_and_wait(self.out_topic, orjson.dumps(ev), key=f"r{i}".encode())
        try:
            t1 = await asyncio.wait_for(fut, 5.0)
        except TimeoutError:
            self.waiters.pop((i, k), None)
            return None
        return (t1 - t0) * 1000.0


async def measure_ours(
    s: Settings,
    rate: float,
    runs: int,
    duration: float,
    tag: str,
    monitors: bool = True,
    etraces: bool = True,
) -> dict[str, Any]:
    async with SteeringClient(s, deadline_ms=5000) as c:
        ids = [f"{tag}-{uuid.uuid4().hex[:6]}-{i}" for i in range(runs)]
        # a fleet of synthetic coding agents, one behaviour each (streams.local.simulate)
        trajs = [trajectory(BEHAVIOURS[i % len(BEHAVIOURS)], 100_000, seed=i) for i in range(runs)]
        await asyncio.gather(
            *(
                c.start_run(
                    r,
                    task=trajs[i][0],
                    model_routing={"FAST": "small", "SLOW": "big"},
                    monitors_enabled=monitors,
                    e_traces_enabled=etraces,
                )
                for i, r in enumerate(ids)
            )
        )

        inbound: list[float] = []
        outbound: list[float] = []

        async def one(i: int, k: int) -> float | None:
            t_send = time.time()
            d = await c.step(ids[i], k, **next(trajs[i][1]))
            if d is None:
                return None
            t_recv = time.time()
            inbound.append((d["processed_ts"] - t_send) * 1000)
            outbound.append((t_recv - d["processed_ts"]) * 1000)
            return d.latency_ms

        lat, achieved, misses = await paced(rate, runs, duration, one)
    inb, outb = summary(inbound), summary(outbound)
    log(f"  breakdown p50: agent->worker decided {inb['p50']:.2f} ms, decided->agent {outb['p50']:.2f} ms")
    return {
        "achieved": achieved,
        "misses": misses,
        **summary(lat),
        "in_p50": inb["p50"],
        "out_p50": outb["p50"],
    }


async def measure_raw(
    bootstrap: str, out_t: str, in_t: str, parts: int, rate: float, runs: int, duration: float
) -> dict[str, Any]:
    async with RawPath(bootstrap, out_t, in_t, parts) as rp:
        for k in range(1, 200):  # warm-up: the echo's consumer group may still be joining
            if await rp.one(10_000, k) is not None:
                break
        lat, achieved, misses = await paced(rate, runs, duration, rp.one)
    return {"achieved": achieved, "misses": misses, **summary(lat)}


def etrace_waits(before: dict[str, float], after: dict[str, float], deadline_s: float) -> dict[str, float]:
    """What the decisions of one measured path waited on E-traces (rb_etrace_wait_seconds)."""

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    n = delta("rb_etrace_wait_seconds_count{}")
    buckets = sorted(
        (float(k.split('le="')[1].split('"')[0]), delta(k))
        for k in after
        if k.startswith("rb_etrace_wait_seconds_bucket{")
    )
    within = {le: c for le, c in buckets}
    waited = n - within.get(0.001, n)
    # the deadline's own bucket: a wait that timed out lands just past it
    over = n - max((c for le, c in buckets if le <= deadline_s * 1.34), default=n)
    worst = next((le for le, c in buckets if c >= n), float("inf")) if n else 0.0
    return {"waits": n, "waited_over_1ms": waited, "over_deadline": over, "max_bucket_s": worst}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="50,200,500,1000")
    ap.add_argument("--runs", type=int, default=50, help="concurrent simulated runs")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds per rate and path")
    ap.add_argument("--partitions", type=int, default=8)
    add_rounds_args(ap, "every path, in turn")
    ap.add_argument(
        "--etrace-embedder",
        choices=("process", "thread"),
        default="process",
        help="where the worker embeds E-trace queries (RB_ETRACE_EMBEDDER)",
    )
    ap.add_argument("--plot", action="store_true", help="write bench/results/latency.png")
    args = ap.parse_args()
    rates = [float(x) for x in args.rates.split(",")]

    started = ensure_broker()
    s = bench_settings(
        partitions=args.partitions, patterns_seed=str(STARTER), etrace_embedder=args.etrace_embedder
    )
    deadline_s = s.etrace_timeout_ms / 1000.0
    hop_t, echo_in, echo_out = (
        f"{s.topic_prefix}.hop",
        f"{s.topic_prefix}.echo.in",
        f"{s.topic_prefix}.echo.out",
    )
    asyncio.run(_topics(s.bootstrap_servers, [hop_t, echo_in, echo_out], args.partitions))
    echo = subprocess.Popen([sys.executable, "-m", "bench.echo", s.bootstrap_servers, echo_in, echo_out])
    worker = WorkerProcess.start(s, results_dir() / "latency-worker.log")
    rows: list[dict[str, Any]] = []
    try:
        for rate in rates:
            runs = max(1, min(args.runs, int(rate)))
            log(f"rate {rate:g}/s: warm-up (worker, broker and clients), not measured ...")
            asyncio.run(measure_ours(s, rate, runs, 3.0, f"w{int(rate)}"))
            for rnd in range(args.repeat):
                for path in PATHS:
                    log(f"rate {rate:g}/s, {runs} runs, round {rnd + 1}/{args.repeat}, path {path} ...")
                    if path.startswith("ours"):
                        mon, et = path != "ours-no-monitors", path == "ours"
                        time.sleep(1.1)  # the worker renders /metrics at most once a second
                        before = scrape(s.web_port)
                        r = asyncio.run(
                            measure_ours(s, rate, runs, args.duration, f"r{int(rate)}x{rnd}", mon, et)
                        )
                        time.sleep(1.1)
                        r.update(etrace_waits(before, scrape(s.web_port), deadline_s))
                    elif path == "hop":
                        r = asyncio.run(
                            measure_raw(
                                s.bootstrap_servers, hop_t, hop_t, args.partitions, rate, runs, args.duration
                            )
                        )
                    else:
                        r = asyncio.run(
                            measure_raw(
                                s.bootstrap_servers,
                                echo_in,
                                echo_out,
                                args.partitions,
                                rate,
                                runs,
                                args.duration,
                            )
                        )
                    r.update(rate=rate, path=path, runs=runs, round=rnd)
                    rows.append(r)
                    extra = ""
                    if "waits" in r:
                        extra = (
                            f"  E-trace waits {r['waits']:.0f} (>1 ms {r['waited_over_1ms']:.0f}, "
                            f"past deadline {r['over_deadline']:.0f})"
                        )
                    log(
                        f"  p50 {r['p50']:.2f} ms  p95 {r['p95']:.2f}  p99 {r['p99']:.2f}  max {r['max']:.2f}  "
                        f"achieved {r['achieved']:.0f}/s  misses {r['misses']}{extra}"
                    )
    finally:
        worker.stop()
        echo.terminate()
        if started:
            stop_broker()

    figures = report(rows, rates, args.repeat)
    (results_dir() / "latency.json").write_text(json.dumps(rows, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "figures": figures}, indent=1))
    if args.plot:
        _plot(rows, rates)
    return 0


def report(rows: list[dict[str, Any]], rates: list[float], repeat: int) -> dict[str, Any]:
    """Print the per-round table and the medians; return the headline figures per rate."""
    print(f"\nmachine: {machine()}  date: {time.strftime('%Y-%m-%d')}  commit: {commit()}")
    print(
        "| rate/s | round | achieved/s | path | p50 ms | p95 ms | p99 ms | max ms | p50 / hop | p99 / hop | p50 / echo | p99 / echo |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    figures: dict[str, Any] = {}
    for rate in rates:
        ratios: dict[str, list[float]] = {}
        for rnd in range(repeat):
            by = {r["path"]: r for r in rows if r["rate"] == rate and r["round"] == rnd}
            for path in PATHS:
                r = by[path]
                print(
                    f"| {rate:g} | {rnd + 1} | {r['achieved']:.0f} | {path} | {r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} | {r['max']:.1f} | "
                    f"{r['p50'] / by['hop']['p50']:.2f}x | {r['p99'] / by['hop']['p99']:.2f}x | "
                    f"{r['p50'] / by['echo']['p50']:.2f}x | {r['p99'] / by['echo']['p99']:.2f}x |"
                )
                for q in ("p50", "p99"):
                    ratios.setdefault(f"{path} {q} ms", []).append(r[q])
                    ratios.setdefault(f"{path} {q} / hop", []).append(r[q] / by["hop"][q])
            ours, off = by["ours"], by["ours-no-etraces"]
            ratios.setdefault("ours p99 / no-etraces p99", []).append(ours["p99"] / off["p99"])
            ratios.setdefault("ours p50 / no-etraces p50", []).append(ours["p50"] / off["p50"])
            ratios.setdefault("E-trace waits", []).append(ours["waits"])
            ratios.setdefault("E-trace waits > 1 ms", []).append(ours["waited_over_1ms"])
            ratios.setdefault("E-trace waits past the deadline", []).append(ours["over_deadline"])
        figures[f"{rate:g}"] = {k: spread(v) for k, v in ratios.items()}
    if repeat > 1:
        print(f"\nMedians of {repeat} rounds (min-max):")
        print("| rate/s | figure | median (min-max) |")
        print("|---|---|---|")
        for rate in rates:
            for k, sp in figures[f"{rate:g}"].items():
                unit = "x" if "/" in k else ""
                print(f"| {rate:g} | {k} | {fmt_spread(sp, unit, 0 if 'waits' in k else 2)} |")
    for rate in rates:
        f = figures[f"{rate:g}"]
        print(
            f"SUMMARY latency@{rate:g}/s: ours p50 {f['ours p50 ms']['median']:.2f} ms ({f['ours p50 / hop']['median']:.2f}x hop), "
            f"p99 {f['ours p99 ms']['median']:.2f} ms ({f['ours p99 / hop']['median']:.2f}x hop); "
            f"E-traces on/off p99 {f['ours p99 / no-etraces p99']['median']:.2f}x; "
            f"decisions waiting on E-traces past the deadline: {f['E-trace waits past the deadline']['max']:.0f} "
            f"of {f['E-trace waits']['median']:.0f} (worst round)"
            + (f" [median of {repeat} rounds]" if repeat > 1 else "")
        )
    return figures


def _plot(rows: list[dict[str, Any]], rates: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for path, style in (
        ("hop", ":"),
        ("echo", "--"),
        ("ours", "-"),
        ("ours-no-etraces", (0, (5, 1))),
        ("ours-no-monitors", "-."),
    ):
        for q, marker in (("p50", "o"), ("p99", "^")):
            ys = [next(r[q] for r in rows if r["rate"] == rate and r["path"] == path) for rate in rates]
            ax.plot(rates, ys, linestyle=style, marker=marker, label=f"{path} {q}")
    ax.set_xscale("log")
    ax.set_xlabel("steps/s")
    ax.set_ylabel("latency (ms)")
    ax.set_title("publish -> decision latency vs raw Kafka floors")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(results_dir() / "latency.png", dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
