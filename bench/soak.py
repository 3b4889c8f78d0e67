"""Soak: runs start, step and finish continuously for a long time; the worker's memory and
table must level off instead of growing with the number of runs ever seen.

    .venv/bin/python -m bench.soak --minutes 60 --concurrency 40 --steps 30 --pause 0.2

A fleet of `concurrency` simulated agents (streams.local.simulate behaviours), each starting a new
run when its previous one finishes; one run in ten is abandoned without run_finish, so the
idle timeout has work too. Retention is short (RB_FINISHED_RETENTION_S=60,
RB_IDLE_TIMEOUT_S=120) so eviction reaches a steady state within the soak. Every `--sample`
seconds: RSS of the worker and of its descendants (the E-trace embedding process) separately,
rb_table_entries, evictions, the RocksDB directory size, runs seen, and every cache gauge the
worker exports (rb_cache_entries, rb_rocksdb_memory_bytes, rb_malloc_bytes).
Baseline for the ratio: the RSS when the worker is ready (first sample). The plateau test:
per process, the least-squares slope of RSS over the last `--slope-minutes` (20; the second
half of a shorter soak), in MB/min, printed with the series every `--every` minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import time
import urllib.request
from pathlib import Path
from typing import NamedTuple

from bench.common import bench_settings, ensure_broker, log, machine, results_dir, stop_broker
from streams.agent.client import SteeringClient
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.local.worker_process import WorkerProcess
from streams.settings import Settings


def own_rss_mb(pid: int) -> float:
    """RSS of one process (NaN once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def rss_mb(pid: int) -> float:
    """RSS of the worker and its child processes (the E-trace embedding process)."""
    worker, child = rss_split(pid)
    return worker + child


def rss_split(pid: int) -> tuple[float, float]:
    """(the worker's own RSS, the sum over its descendants: the embedding process and the
    multiprocessing helpers), so a growth can be told to one process or the other."""
    rest = 0.0
    todo = children(pid)
    while todo:
        c = todo.pop()
        r = own_rss_mb(c)
        if r == r:  # gone meanwhile: NaN
            rest += r
        todo.extend(children(c))
    return own_rss_mb(pid), rest


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per minute (NaN under two points)."""
    pts = [(t, y) for t, y in points if y == y]
    if len(pts) < 2:
        return float("nan")
    mt = sum(t for t, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((t - mt) ** 2 for t, _ in pts)
    if den == 0:
        return float("nan")
    return 60.0 * sum((t - mt) * (y - my) for t, y in pts) / den


def tail_window(rows_t: list[float], minutes: float) -> float:
    """Start (seconds) of the window the plateau slope is fitted on: the last `minutes`, or
    the second half of a soak shorter than twice that."""
    end = rows_t[-1] if rows_t else 0.0
    return end - minutes * 60.0 if end >= 2 * minutes * 60.0 else end / 2.0


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6 if path.exists() else 0.0


def metrics(port: int) -> dict[str, float]:
    """The soak's counters, and every `rb_cache_entries{cache}` and
    `rb_rocksdb_memory_bytes{kind}` the worker exports (as `cache:<name>`, `rocksdb:<kind>`)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for name in ("rb_table_entries", "rb_active_runs", "rb_runs_evicted_total", "rb_decisions_emitted_total"):
        total = 0.0
        for m in re.finditer(rf"^{name}(?:\{{[^}}]*\}})? ([0-9.e+-]+)$", text, re.M):
            total += float(m.group(1))
        out[name] = total
    for m in re.finditer(r'^rb_cache_entries\{cache="([^"]+)"\} ([0-9.e+-]+)$', text, re.M):
        out[f"cache:{m.group(1)}"] = float(m.group(2))
    for m in re.finditer(r'^rb_rocksdb_memory_bytes\{kind="([^"]+)"\} ([0-9.e+-]+)$', text, re.M):
        out[f"rocksdb:{m.group(1)}"] = float(m.group(2))
    for m in re.finditer(r'^rb_malloc_bytes\{kind="([^"]+)"\} ([0-9.e+-]+)$', text, re.M):
        out[f"malloc:{m.group(1)}"] = float(m.group(2))
    return out


async def fleet(
    settings: Settings, concurrency: int, steps: int, pause: float, until: float, seen: list[int]
) -> None:
    counter = itertools.count()

    async def agent(c: SteeringClient, slot: int) -> None:
        while time.monotonic() < until:
            n = next(counter)
            rid = f"soak-{n:07d}"
            task, script = trajectory(BEHAVIOURS[n % len(BEHAVIOURS)], steps, seed=n)
            await c.start_run(rid, task=task, org_id=("acme", "globex")[n % 2])
            seen[0] += 1
            for k, payload in enumerate(script, start=1):
                await c.step(rid, k, **payload)
                await asyncio.sleep(pause)  # the agent's "model call"
            if n % 10 != 9:  # one in ten is abandoned: left to the idle timeout
                await c.finish_run(rid, "success")
            c.forget(rid)

    async with SteeringClient(settings, deadline_ms=5000) as c:
        await asyncio.gather(*(agent(c, i) for i in range(concurrency)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--concurrency", type=int, default=40)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--pause", type=float, default=0.2, help="seconds each agent waits between steps")
    ap.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    ap.add_argument("--retention", type=float, default=60.0)
    ap.add_argument("--idle", type=float, default=120.0)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--every", type=float, default=5.0, help="minutes between the per-process rows shown")
    ap.add_argument(
        "--slope-minutes",
        type=float,
        default=20.0,
        help="the plateau slope is fitted over this many final minutes (the second half if shorter)",
    )
    args = ap.parse_args()

    started = ensure_broker()
    s = bench_settings(
        partitions=args.partitions,
        finished_retention_s=args.retention,
        idle_timeout_s=args.idle,
        evict_interval_s=5.0,
        client_deadline_ms=5000,
    )
    out = results_dir() / "soak.log"
    w = WorkerProcess.start(s, out)
    rows: list[Row] = []
    caches: dict[str, float] = {}
    try:
        seen = [0]
        t0 = time.monotonic()
        until = t0 + args.minutes * 60.0

        async def sampler() -> None:
            while True:
                m = metrics(s.web_port)
                worker_mb, child_mb = rss_split(w.proc.pid)
                row = Row(
                    time.monotonic() - t0,
                    worker_mb,
                    child_mb,
                    m["rb_table_entries"],
                    m["rb_runs_evicted_total"],
                    dir_mb(Path(s.data_dir)),
                    m["rb_decisions_emitted_total"],
                    seen[0],
                )
                rows.append(row)
                caches.clear()
                caches.update({k: v for k, v in m.items() if ":" in k})
                extra = " ".join(f"{k.split(':', 1)[1]}={v:.0f}" for k, v in sorted(caches.items()))
                log(
                    f"t={row.t:6.0f}s rss={row.rss:7.1f} MB (worker {row.worker:7.1f}, embedding "
                    f"{row.child:6.1f}) table={row.table:6.0f} evicted={row.evicted:6.0f} "
                    f"rocksdb={row.data_mb:6.1f} MB decisions={row.decisions:8.0f} runs={row.runs} {extra}"
                )
                if time.monotonic() >= until:
                    return
                await asyncio.sleep(min(args.sample, max(0.0, until - time.monotonic())))

        async def both() -> None:
            await asyncio.gather(fleet(s, args.concurrency, args.steps, args.pause, until, seen), sampler())

        asyncio.run(both())
    finally:
        w.stop()
        if started:
            stop_broker()
    report(args, rows, caches)


class Row(NamedTuple):
    t: float  # seconds since the worker was ready
    worker: float  # the worker's own RSS, MB
    child: float  # its descendants' RSS (the embedding process), MB
    table: float
    evicted: float
    data_mb: float
    decisions: float
    runs: int

    @property
    def rss(self) -> float:
        return self.worker + self.child


def report(args: argparse.Namespace, rows: list[Row], caches: dict[str, float]) -> None:
    """The full series, a series every `--every` minutes per process, and per process the
    least-squares slope over the last `--slope-minutes` (the plateau test)."""
    first, last = rows[0], rows[-1]
    half = [r for r in rows if r.t >= last.t / 2]
    peak_rss = max(r.rss for r in rows)
    peak_table = max(r.table for r in rows)
    print(f"machine: {machine()}")
    print(
        f"{'t (s)':>7} {'RSS MB':>8} {'worker':>8} {'embed':>7} {'table':>7} {'evicted':>8} "
        f"{'RocksDB MB':>11} {'decisions':>10} {'runs':>7}"
    )
    for r in rows:
        print(
            f"{r.t:7.0f} {r.rss:8.1f} {r.worker:8.1f} {r.child:7.1f} {r.table:7.0f} {r.evicted:8.0f} "
            f"{r.data_mb:11.1f} {r.decisions:10.0f} {r.runs:7d}"
        )
    every = args.every * 60.0
    print(f"\nper process, every {args.every:g} min (MB):")
    print(f"{'min':>5} {'worker':>8} {'embedding':>10} {'total':>8}")
    mark = 0.0
    for r in rows:
        if r.t + args.sample / 2 >= mark or r is last:
            print(f"{r.t / 60:5.1f} {r.worker:8.1f} {r.child:10.1f} {r.rss:8.1f}")
            while mark <= r.t + args.sample / 2:
                mark += every
    start = tail_window([r.t for r in rows], args.slope_minutes)
    window = [r for r in rows if r.t >= start]
    slopes = {
        "worker": slope([(r.t, r.worker) for r in window]),
        "embedding": slope([(r.t, r.child) for r in window]),
        "total": slope([(r.t, r.rss) for r in window]),
    }
    span = (last.t - start) / 60.0
    elapsed_min = max(last.t / 60.0, 1e-9)
    print(
        f"\nslope over the last {span:.1f} min (least squares, MB/min): "
        + ", ".join(f"{k} {v:+.3f}" for k, v in slopes.items())
    )
    if caches:
        print("cache sizes at the end: " + ", ".join(f"{k}={v:.0f}" for k, v in sorted(caches.items())))
    second_half_growth = max(r.rss for r in half) - min(r.rss for r in half)
    print(
        f"SUMMARY soak: {args.minutes:g} min, {last.runs} runs, {last.decisions:.0f} decisions "
        f"({last.decisions / (elapsed_min * 60.0):.0f}/s); "
        f"RSS {first.rss:.0f} -> {last.rss:.0f} MB (worker {first.worker:.0f} -> {last.worker:.0f}, "
        f"embedding {first.child:.0f} -> {last.child:.0f}; peak {peak_rss:.0f}, x{last.rss / first.rss:.2f} "
        f"of the RSS at start; second-half spread {second_half_growth:.0f} MB); slope over the last "
        f"{span:.0f} min: worker {slopes['worker']:+.2f}, embedding {slopes['embedding']:+.2f} MB/min; "
        f"table peak {peak_table:.0f} entries, final {last.table:.0f} (runs seen {last.runs}), "
        f"evicted {last.evicted:.0f}"
    )


if __name__ == "__main__":
    main()
