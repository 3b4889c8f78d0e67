"""Decision latency at the agent side vs the raw Kafka floor, at several step rates.

    .venv/bin/python -m bench.latency --rates 50,200,500,1000 --duration 20

Floor 1 (`hop`): aiokafka produce -> consume of the same kind of message on a topic with the
same partitions (one hop, no processing). Floor 2 (`echo`): produce -> a raw aiokafka echo
process -> consume (the same two hops our path has, no Faust, no logic). Ours: SteeringClient
publish -> worker -> decision received, for a fleet of synthetic coding agents
(streams.local.simulate): everything on ("ours": monitors and E-traces from the starter pattern
library in the worker's local Qdrant store), E-traces off ("ours-no-etraces"), and monitors
and E-traces off ("ours-no-monitors": the FSM alone).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import uuid
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.common import (
    STARTER,
    bench_settings,
    ensure_broker,
    log,
    machine,
    paced,
    results_dir,
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="50,200,500,1000")
    ap.add_argument("--runs", type=int, default=50, help="concurrent simulated runs")
    ap.add_argument("--duration", type=float, default=20.0, help="seconds per rate and path")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--plot", action="store_true", help="write bench/results/latency.png")
    args = ap.parse_args()
    rates = [float(x) for x in args.rates.split(",")]

    started = ensure_broker()
    s = bench_settings(partitions=args.partitions, patterns_seed=str(STARTER))
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
            for path in PATHS:
                log(f"rate {rate:g}/s, {runs} runs, path {path} ...")
                if path.startswith("ours"):
                    mon, et = path != "ours-no-monitors", path == "ours"
                    r = asyncio.run(measure_ours(s, rate, runs, args.duration, f"r{int(rate)}", mon, et))
                elif path == "hop":
                    r = asyncio.run(
                        measure_raw(
                            s.bootstrap_servers, hop_t, hop_t, args.partitions, rate, runs, args.duration
                        )
                    )
                else:
                    r = asyncio.run(
                        measure_raw(
                            s.bootstrap_servers, echo_in, echo_out, args.partitions, rate, runs, args.duration
                        )
                    )
                r.update(rate=rate, path=path, runs=runs)
                rows.append(r)
                log(
                    f"  p50 {r['p50']:.2f} ms  p95 {r['p95']:.2f}  p99 {r['p99']:.2f}  max {r['max']:.2f}  achieved {r['achieved']:.0f}/s  misses {r['misses']}"
                )
    finally:
        worker.stop()
        echo.terminate()
        if started:
            stop_broker()

    print(f"\nmachine: {machine()}  date: {time.strftime('%Y-%m-%d')}")
    print(
        "| rate/s | achieved/s | path | p50 ms | p95 ms | p99 ms | max ms | p50 / hop | p99 / hop | p50 / echo | p99 / echo |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rate in rates:
        by = {r["path"]: r for r in rows if r["rate"] == rate}
        for path in PATHS:
            r = by[path]
            print(
                f"| {rate:g} | {r['achieved']:.0f} | {path} | {r['p50']:.2f} | {r['p95']:.2f} | {r['p99']:.2f} | {r['max']:.1f} | "
                f"{r['p50'] / by['hop']['p50']:.2f}x | {r['p99'] / by['hop']['p99']:.2f}x | "
                f"{r['p50'] / by['echo']['p50']:.2f}x | {r['p99'] / by['echo']['p99']:.2f}x |"
            )
    for rate in rates:
        by = {r["path"]: r for r in rows if r["rate"] == rate}
        print(
            f"SUMMARY latency@{rate:g}/s: ours p50 {by['ours']['p50']:.2f} ms ({by['ours']['p50'] / by['hop']['p50']:.2f}x hop), "
            f"p99 {by['ours']['p99']:.2f} ms ({by['ours']['p99'] / by['hop']['p99']:.2f}x hop, {by['ours']['p99'] / by['echo']['p99']:.2f}x echo); "
            f"E-traces on/off: p50 {by['ours']['p50'] / by['ours-no-etraces']['p50']:.2f}x, p99 {by['ours']['p99'] / by['ours-no-etraces']['p99']:.2f}x"
        )
    (results_dir() / "latency.json").write_text(json.dumps(rows, indent=1))
    if args.plot:
        _plot(rows, rates)
    return 0


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
