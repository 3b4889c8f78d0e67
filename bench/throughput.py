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
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.common import (
    STARTER,
    CpuSampler,
    add_rounds_args,
    bench_settings,
    broker_dir,
    broker_pid,
    commit,
    ensure_broker,
    fmt_spread,
    log,
    machine,
    results_dir,
    spread,
    stop_broker,
)
from streams.admin.topics import ensure_topics
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


async def preload(
    s: Settings, runs: int, steps: int, monitors: bool = True, etraces: bool = True, prefix: str = "tp"
) -> int:
    """Write `runs` x `steps` step events (and each run's start) to the steps topic; run ids
    `<prefix>-<i>` (another prefix: another fleet on the same topics)."""
    await ensure_topics(s)
    p = AIOKafkaProducer(
        bootstrap_servers=s.bootstrap_servers, acks="all", linger_ms=5, max_batch_size=256 * 1024
    )
    await p.start()
    n = 0
    try:
        ids = [f"{prefix}-{i}" for i in range(runs)]
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


async def drain_timing(
    bootstrap: str, topic: str, expect: int, timeout_s: float, on_first: Callable[[], None] | None = None
) -> tuple[int, float, float]:
    """Wait until `topic` holds `expect` records; return (count, first ts, last ts) in seconds.
    `on_first`: called once the first record is read (the drain has begun)."""
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
            if on_first is not None and batch:
                on_first()
                on_first = None
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
    add_rounds_args(ap, "pass-through + each configuration")
    ap.add_argument(
        "--compression",
        default="zstd",
        choices=("none", "gzip", "lz4", "zstd"),
        help="the worker's RB_PRODUCER_COMPRESSION (its changelog and decisions; default zstd)",
    )
    ap.add_argument(
        "--state-codec",
        default="zstd",
        help="the worker's RB_STATE_CODEC (zstd, json); a comma list (zstd,json) runs each in every "
        "round, the first one's rows unmarked, the others' marked with their codec",
    )
    ap.add_argument(
        "--state-layout",
        default="parts",
        help="the worker's RB_STATE_LAYOUT (parts, whole); a comma list (parts,whole) runs each in "
        "every round, as --state-codec does (both lists: every pair)",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the worker while it drains, from its first decision on, in each configuration "
        "of the first round (bench/results/worker-profile-<on|etraces-off|fsm>.txt: collapsed stacks)",
    )
    args = ap.parse_args()
    codecs = [c.strip() for c in args.state_codec.split(",") if c.strip()]
    if not codecs or not set(codecs) <= {"zstd", "json"}:
        ap.error(f"--state-codec: zstd, json or both, not {args.state_codec!r}")
    layouts = [c.strip() for c in args.state_layout.split(",") if c.strip()]
    if not layouts or not set(layouts) <= {"parts", "whole"}:
        ap.error(f"--state-layout: parts, whole or both, not {args.state_layout!r}")
    variants = [(c, lay) for c in codecs for lay in layouts]

    started = ensure_broker()
    rounds: list[dict[str, dict[str, Any]]] = []
    try:
        for rnd in range(args.repeat):
            rows: dict[str, dict[str, Any]] = {}
            for (codec, layout), (label, monitors, etraces) in (
                (v, cfg) for v in variants for cfg in CONFIGS
            ):
                s = bench_settings(
                    partitions=args.partitions,
                    patterns_seed=str(STARTER),
                    producer_compression=args.compression,
                    state_codec=codec,
                    state_layout=layout,
                )
                log(
                    f"round {rnd + 1}/{args.repeat}: preloading {args.runs} runs x {args.steps} steps "
                    f"({label}) into {s.steps_topic} ..."
                )
                n = asyncio.run(preload(s, args.runs, args.steps, monitors, etraces))
                log(f"  {n} events")
                if not rows:
                    rows[PASS] = passthrough(s, n, args.partitions)
                tag = "on" if etraces else "etraces-off" if monitors else "fsm"
                profile = results_dir() / f"worker-profile-{tag}.txt" if args.profile and rnd == 0 else None
                mark = _mark(variants[0], (codec, layout))
                rows[f"rb-streams worker, {label}{mark}"] = worker(s, n, profile if not mark else None)
            rounds.append(rows)
    finally:
        if started:
            stop_broker()

    figures = report(rounds)
    if args.json:
        Path(args.json).write_text(json.dumps({"rounds": rounds, "figures": figures}, indent=1))
    return 0


PASS = "pass-through Faust agent"


def _mark(first: tuple[str, str], v: tuple[str, str]) -> str:
    """A row's label suffix: the settings in which its variant differs from the first one."""
    diff = [
        f"{name}={x}"
        for name, x, y in zip(("RB_STATE_CODEC", "RB_STATE_LAYOUT"), v, first, strict=True)
        if x != y
    ]
    return f" ({', '.join(diff)})" if diff else ""


def report(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Print each round's table and the medians; return the figures (rates and ratios)."""
    print(f"\nmachine: {machine()}  date: {time.strftime('%Y-%m-%d')}  commit: {commit()}")
    print(
        "| round | path | events | seconds | events/s | ratio to pass-through | "
        "event-loop CPU us/event | process CPU us/event (with children) | broker CPU us/event | "
        f"busy cores (of {os.cpu_count()}) | changelog / decision bytes per event |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    series: dict[str, list[float]] = {}
    for i, rows in enumerate(rounds, 1):
        base = rows[PASS]["rate"]
        base_cpu = rows[PASS].get("main_cpu_us")
        for k, r in rows.items():
            main, tot = r.get("main_cpu_us"), r.get("cpu_us")
            brk, cores = r.get("broker_cpu_us"), r.get("machine_cores")
            print(
                f"| {i} | {k} | {r['n']} | {r['seconds']:.2f} | {r['rate']:.0f} | {r['rate'] / base:.0%} | "
                f"{'-' if main is None else f'{main:.0f}'} | {'-' if tot is None else f'{tot:.0f}'} | "
                f"{'-' if not brk else f'{brk:.0f}'} | {'-' if cores is None else f'{cores:.2f}'} | "
                f"{_bytes(r)} |"
            )
            if "changelog_bytes" in r:
                series.setdefault(f"{k} changelog bytes/event", []).append(r["changelog_bytes"])
                series.setdefault(f"{k} decision bytes/event", []).append(r["decision_bytes"])
            if k != PASS and main is not None and base_cpu:
                series.setdefault(f"{k} event-loop CPU / pass-through", []).append(main / base_cpu)
            series.setdefault(f"{k} events/s", []).append(r["rate"])
            if main is not None and tot is not None:
                series.setdefault(f"{k} event-loop CPU us/event", []).append(main)
                series.setdefault(f"{k} process CPU us/event", []).append(tot)
            if brk:
                series.setdefault(f"{k} broker CPU us/event", []).append(brk)
            if cores is not None:
                series.setdefault(f"{k} busy cores", []).append(cores)
            if k != PASS:
                series.setdefault(f"{k} / pass-through", []).append(r["rate"] / base)
    figures = {k: spread(v) for k, v in series.items()}
    if len(rounds) > 1:
        print(f"\nMedians of {len(rounds)} rounds (min to max):")
        print("| figure | median (min to max) |")
        print("|---|---|")
        for k, sp in figures.items():
            shown = (
                fmt_spread(sp, "", 2)
                if "cores" in k or "CPU /" in k
                else fmt_spread(sp, "", 0)
                if ("events/s" in k or "CPU" in k or "bytes" in k)
                else _pct(sp)
            )
            print(f"| {k} | {shown} |")
    on = f"rb-streams worker, {CONFIGS[0][0]}"
    print(
        f"SUMMARY throughput: worker (everything on) {figures[on + ' events/s']['median']:.0f} steps/s = "
        f"{figures[on + ' / pass-through']['median']:.0%} of pass-through "
        f"({figures[PASS + ' events/s']['median']:.0f}/s); "
        f"E-traces off {figures[f'rb-streams worker, {CONFIGS[1][0]} / pass-through']['median']:.0%}; "
        f"FSM only {figures[f'rb-streams worker, {CONFIGS[2][0]} / pass-through']['median']:.0%}"
        + (f" [median of {len(rounds)} rounds]" if len(rounds) > 1 else "")
    )
    return figures


def _pct(sp: dict[str, float]) -> str:
    return f"{sp['median']:.0%} ({sp['min']:.0%} to {sp['max']:.0%})"


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
    cpu = CpuSampler(pt.pid, broker=broker_pid())
    try:
        cnt, first, last = asyncio.run(drain_timing(s.bootstrap_servers, pt_out, n, 600))
    finally:
        cpu.stop()
        pt.terminate()
        pt.wait(30)
    row = {
        "n": cnt,
        "seconds": last - first,
        "rate": cnt / max(1e-9, last - first),
        **_cpu(cpu, first, last, cnt),
    }
    log(f"  pass-through: {cnt} in {last - first:.2f}s = {row['rate']:.0f}/s")
    return row


def worker(s: Settings, n: int, profile: Path | None) -> dict[str, Any]:
    log("rb-streams worker draining the backlog ...")
    w = WorkerProcess(s, results_dir() / "throughput-worker.log")
    spies: list[subprocess.Popen[bytes]] = []

    def spy() -> None:  # from the first decision on: the drain, not the worker's start
        if profile is None:
            return
        cmd = [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(w.proc.pid)]
        cmd += ["--duration", "15", "--format", "raw", "-o", str(profile)]
        spies.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    cpu = CpuSampler(w.proc.pid, broker=broker_pid())
    try:
        # every run_start and step yields a decision
        cnt, first, last = asyncio.run(drain_timing(s.bootstrap_servers, s.steering_topic, n, 900, spy))
    finally:
        cpu.stop()
        for p in spies:
            p.wait(60)
        w.stop()
    row = {
        "n": cnt,
        "seconds": last - first,
        "rate": cnt / max(1e-9, last - first),
        **_cpu(cpu, first, last, cnt),
    }
    row.update(topic_bytes(s, cnt))
    log(f"  worker: {cnt} in {last - first:.2f}s = {row['rate']:.0f}/s")
    return row


def topic_bytes(s: Settings, n: int) -> dict[str, float]:
    """Bytes per event the broker holds of the run table's changelog and of the decisions
    (their log segments, compressed batches as the producer sent them: before any compaction,
    so every state written counts). Empty when the broker's data dir is not this machine's
    benchmark broker's."""
    data = broker_dir() / "data"
    if n <= 0 or not data.is_dir():
        return {}

    def size(topic: str) -> int:
        return sum(f.stat().st_size for d in data.glob(f"{topic}-[0-9]*") for f in d.glob("*.log"))

    changelog = size(f"{s.app_id}-runs-changelog")
    return (
        {"changelog_bytes": changelog / n, "decision_bytes": size(s.steering_topic) / n} if changelog else {}
    )


def _bytes(r: dict[str, Any]) -> str:
    if "changelog_bytes" not in r:
        return "-"
    return f"{r['changelog_bytes']:,.0f} / {r['decision_bytes']:,.0f}"


def _cpu(cpu: CpuSampler, first: float, last: float, n: int) -> dict[str, float]:
    """CPU per event while draining: the main thread (the event loop), the whole process
    with its children and the broker; and how many of the machine's cores were busy. Empty
    where /proc is not available."""
    got = cpu.between(first, last)
    if got is None or n <= 0 or last <= first:
        return {}
    return {
        "main_cpu_us": got["main_cpu_s"] / n * 1e6,
        "cpu_us": got["cpu_s"] / n * 1e6,
        "broker_cpu_us": got["broker_cpu_s"] / n * 1e6,
        "machine_cores": got["machine_busy_s"] / (last - first),
    }


if __name__ == "__main__":
    raise SystemExit(main())
