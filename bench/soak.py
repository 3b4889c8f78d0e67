"""Soak: runs start, step and finish continuously for a long time; the worker's memory and
table must level off instead of growing with the number of runs ever seen.

    .venv/bin/python -m bench.soak --minutes 20 --concurrency 40 --steps 30 --pause 0.2

A fleet of `concurrency` simulated agents (streams.local.simulate behaviours), each starting a new
run when its previous one finishes; one run in ten is abandoned without run_finish, so the
idle timeout has work too. Retention is short (RB_FINISHED_RETENTION_S=60,
RB_IDLE_TIMEOUT_S=120) so eviction reaches a steady state within the soak. Every `--sample`
seconds: worker RSS (with its E-trace embedding process), rb_table_entries, evictions, the RocksDB directory size, runs seen.
Baseline for the ratio: the RSS when the worker is ready (first sample).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import time
import urllib.request
from pathlib import Path

from bench.common import bench_settings, ensure_broker, log, machine, results_dir, stop_broker
from streams.agent.client import SteeringClient
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.local.worker_process import WorkerProcess
from streams.settings import Settings


def rss_mb(pid: int) -> float:
    """RSS of the worker and its child processes (the E-trace embedding process)."""
    total = 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024.0
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return total or float("nan")
    return total + sum(rss_mb(int(c)) for c in children)


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6 if path.exists() else 0.0


def metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for name in ("rb_table_entries", "rb_active_runs", "rb_runs_evicted_total", "rb_decisions_emitted_total"):
        total = 0.0
        for m in re.finditer(rf"^{name}(?:\{{[^}}]*\}})? ([0-9.e+-]+)$", text, re.M):
            total += float(m.group(1))
        out[name] = total
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
    rows: list[tuple[float, float, float, float, float, float, int]] = []
    try:
        seen = [0]
        t0 = time.monotonic()
        until = t0 + args.minutes * 60.0

        async def sampler() -> None:
            while True:
                m = metrics(s.web_port)
                row = (
                    time.monotonic() - t0,
                    rss_mb(w.proc.pid),
                    m["rb_table_entries"],
                    m["rb_runs_evicted_total"],
                    dir_mb(Path(s.data_dir)),
                    m["rb_decisions_emitted_total"],
                    seen[0],
                )
                rows.append(row)
                log(
                    f"t={row[0]:6.0f}s rss={row[1]:7.1f} MB table={row[2]:6.0f} evicted={row[3]:6.0f} "
                    f"rocksdb={row[4]:6.1f} MB decisions={row[5]:8.0f} runs={row[6]}"
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

    first, last = rows[0], rows[-1]
    half = [r for r in rows if r[0] >= rows[-1][0] / 2]
    peak_rss = max(r[1] for r in rows)
    peak_table = max(r[2] for r in rows)
    print(f"machine: {machine()}")
    print(
        f"{'t (s)':>7} {'RSS MB':>8} {'table':>7} {'evicted':>8} {'RocksDB MB':>11} {'decisions':>10} {'runs':>7}"
    )
    for r in rows:
        print(f"{r[0]:7.0f} {r[1]:8.1f} {r[2]:7.0f} {r[3]:8.0f} {r[4]:11.1f} {r[5]:10.0f} {r[6]:7d}")
    second_half_growth = max(r[1] for r in half) - min(r[1] for r in half)
    print(
        f"SUMMARY soak: {args.minutes:g} min, {last[6]} runs, {last[5]:.0f} decisions; "
        f"RSS {first[1]:.0f} -> {last[1]:.0f} MB (peak {peak_rss:.0f}, x{last[1] / first[1]:.2f} of the "
        f"RSS at start; second-half spread {second_half_growth:.0f} MB); table peak {peak_table:.0f} "
        f"entries, final {last[2]:.0f} (runs seen {last[6]}), evicted {last[3]:.0f}"
    )


if __name__ == "__main__":
    main()
