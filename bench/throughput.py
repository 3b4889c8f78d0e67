"""Sustainable steps/s of one worker vs a pass-through Faust agent, same broker, same run.

    .venv/bin/python -m bench.throughput --runs 200 --steps 150

A backlog of events (runs x steps, real step events) is written to the steps topic first;
then a fresh worker drains it. Throughput = decisions / (last - first decision record
timestamp). The pass-through agent (bench/passthrough.py) drains the same backlog under its
own consumer group, and is timed the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.common import STARTER, bench_settings, ensure_broker, log, machine, results_dir, stop_broker
from streams.kafka.topics import ensure_topics
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.local.worker_process import WorkerProcess, free_port
from streams.settings import Settings
from tests.factories import run_start, step

# (label, monitors, E-traces): everything on first (the figure), then without each layer
CONFIGS = (
    ("monitors + E-traces on", True, True),
    ("monitors on, E-traces off", True, False),
    ("monitors and E-traces off", False, False),
)


async def preload(s: Settings, runs: int, steps: int, monitors: bool = True, etraces: bool = True) -> int:
    await ensure_topics(s)
    p = AIOKafkaProducer(
        bootstrap_servers=s.bootstrap_servers, acks="all", linger_ms=5, max_batch_size=256 * 1024
    )
    await p.start()
    n = 0
    try:
        ids = [f"tp-{i}" for i in range(runs)]
        futs = []
        trajs = []
        for i, rid in enumerate(ids):
            # a fleet of synthetic coding agents, one behaviour each: every monitor has work
            task, gen = trajectory(BEHAVIOURS[i % len(BEHAVIOURS)], steps, seed=i)
            trajs.append(gen)
            start = run_start(
                rid,
                task=task,
                model_routing={"FAST": "s", "SLOW": "b"},
                monitors_enabled=monitors,
                e_traces_enabled=etraces,
            )
            futs.append(await p.send(s.steps_topic, orjson.dumps(start), key=rid.encode()))
        for k in range(1, steps + 1):
            for rid, gen in zip(ids, trajs, strict=True):
                ev = step(rid, k, **next(gen))
                futs.append(await p.send(s.steps_topic, orjson.dumps(ev), key=rid.encode()))
        for f in futs:
            await f
        n = len(futs)
    finally:
        await p.stop()
    return n


async def drain_timing(bootstrap: str, topic: str, expect: int, timeout_s: float) -> tuple[int, float, float]:
    """Wait until `topic` holds `expect` records; return (count, first ts, last ts) in seconds."""
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, isolation_level="read_committed")
    await c.start()
    try:
        parts = None
        for _ in range(100):
            parts = c.partitions_for_topic(topic)
            if parts:
                break
            await c._client.force_metadata_update()
            await asyncio.sleep(0.1)
        assert parts, topic
        tps = [TopicPartition(topic, i) for i in parts]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        n, first, last = 0, float("inf"), 0.0
        deadline = time.monotonic() + timeout_s
        next_log = time.monotonic() + 5
        while n < expect and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=500, max_records=10_000)
            for recs in batch.values():
                for r in recs:
                    n += 1
                    first = min(first, r.timestamp / 1000.0)
                    last = max(last, r.timestamp / 1000.0)
            if time.monotonic() > next_log:
                log(f"  {topic}: {n}/{expect}")
                next_log = time.monotonic() + 5
        return n, first, last
    finally:
        await c.stop()


async def _create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the worker while it drains (bench/results/worker-profile.txt)",
    )
    args = ap.parse_args()

    started = ensure_broker()
    rows: dict[str, dict[str, Any]] = {}
    try:
        for label, monitors, etraces in CONFIGS:
            s = bench_settings(partitions=args.partitions, patterns_seed=str(STARTER))
            log(f"preloading {args.runs} runs x {args.steps} steps ({label}) into {s.steps_topic} ...")
            n = asyncio.run(preload(s, args.runs, args.steps, monitors, etraces))
            log(f"  {n} events")
            if not rows:
                rows["pass-through Faust agent"] = passthrough(s, n, args.partitions)
            rows[f"rb-streams worker, {label}"] = worker(s, n, args.profile and monitors and etraces)
    finally:
        if started:
            stop_broker()

    base = rows["pass-through Faust agent"]["rate"]
    on = rows[f"rb-streams worker, {CONFIGS[0][0]}"]["rate"]
    print(f"\nmachine: {machine()}  date: {time.strftime('%Y-%m-%d')}")
    print("| path | events | seconds | events/s | ratio to pass-through |")
    print("|---|---|---|---|---|")
    for k, r in rows.items():
        print(f"| {k} | {r['n']} | {r['seconds']:.2f} | {r['rate']:.0f} | {r['rate'] / base:.0%} |")
    print(
        f"SUMMARY throughput: worker (everything on) {on:.0f} steps/s = {on / base:.0%} of pass-through "
        f"({base:.0f}/s); E-traces off {rows[f'rb-streams worker, {CONFIGS[1][0]}']['rate']:.0f}/s; "
        f"FSM only {rows[f'rb-streams worker, {CONFIGS[2][0]}']['rate']:.0f}/s"
    )
    return 0


def passthrough(s: Settings, n: int, partitions: int) -> dict[str, Any]:
    pt_out = f"{s.topic_prefix}.pt.out"
    asyncio.run(_create(s.bootstrap_servers, pt_out, partitions))
    log("pass-through Faust agent draining the backlog ...")
    pt = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.passthrough",
            s.bootstrap_servers,
            s.steps_topic,
            pt_out,
            f"pt-{s.topic_prefix}",
            str(s.data_path / "pt"),
            str(partitions),
            str(free_port()),
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(results_dir() / "passthrough.log", "wb"),  # noqa: SIM115
    )
    try:
        cnt, first, last = asyncio.run(drain_timing(s.bootstrap_servers, pt_out, n, 600))
    finally:
        pt.terminate()
        pt.wait(30)
    row = {"n": cnt, "seconds": last - first, "rate": cnt / max(1e-9, last - first)}
    log(f"  pass-through: {cnt} in {last - first:.2f}s = {row['rate']:.0f}/s")
    return row


def worker(s: Settings, n: int, profile: bool) -> dict[str, Any]:
    log("rb-streams worker draining the backlog ...")
    w = WorkerProcess(s, results_dir() / "throughput-worker.log")
    spy = None
    if profile:
        time.sleep(8)
        spy = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("py-spy")),
                "record",
                "--pid",
                str(w.proc.pid),
                "--duration",
                "20",
                "--format",
                "raw",
                "-o",
                str(results_dir() / "worker-profile.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    try:
        # every run_start and step yields a decision
        cnt, first, last = asyncio.run(drain_timing(s.bootstrap_servers, s.steering_topic, n, 900))
    finally:
        if spy:
            spy.wait(60)
        w.stop()
    row = {"n": cnt, "seconds": last - first, "rate": cnt / max(1e-9, last - first)}
    log(f"  worker: {cnt} in {last - first:.2f}s = {row['rate']:.0f}/s")
    return row


if __name__ == "__main__":
    raise SystemExit(main())
