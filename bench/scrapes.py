"""A control run's decision latency while many clients scrape /metrics at once.

    RB_BENCH_KAFKA_PORT=29392 .venv/bin/python -m bench.scrapes --scrapers 50 --steps 300

The worker's web server shares the event loop with event processing, so every /metrics
render is time the loop does not spend on steps. One control run sends its steps one after
another (like an agent: the next step after the previous decision) with no scrapes, then
again while `--scrapers` clients request /metrics back to back (from a separate process, so
their load does not slow the control run's own client). Prints p50/p95/p99 of both phases
and the scrapes served per second.
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

from bench.common import bench_settings, ensure_broker, log, machine, stop_broker, summary
from streams.agent.client import SteeringClient
from streams.local.worker_process import WorkerProcess
from streams.settings import Settings

THOUGHT = "Read src/auth/session.py to see where the token expiry is checked, then run the failing test."


async def scrape(url: str, clients: int, duration_s: float) -> dict[str, Any]:
    """`clients` concurrent loops of GET url until SIGTERM (or `duration_s`); counts, latencies."""
    import signal

    import aiohttp

    done: list[float] = []
    errors = 0
    t_start = time.perf_counter()
    end = t_start + duration_s

    def stop() -> None:
        nonlocal end
        end = 0.0

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)

    async def one(session: aiohttp.ClientSession) -> None:
        nonlocal errors
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            try:
                async with session.get(url) as r:
                    await r.read()
                    if r.status != 200:
                        errors += 1
                        continue
            except aiohttp.ClientError:
                errors += 1
                continue
            done.append((time.perf_counter() - t0) * 1000)

    conn = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=conn) as session:
        await asyncio.gather(*(one(session) for _ in range(clients)))
    elapsed = time.perf_counter() - t_start
    return {"scrapes": len(done), "errors": errors, "per_s": len(done) / elapsed, "ms": summary(done)}


async def control_run(s: Settings, steps: int) -> list[float]:
    """One run, steps back to back; client-side ms from publish to decision."""
    rid = f"ctl-{uuid.uuid4().hex[:8]}"
    lat: list[float] = []
    async with SteeringClient(s, deadline_ms=30_000) as c:
        await c.start_run(rid, task="Fix the session expiry bug.", e_traces_enabled=False)
        for k in range(1, steps + 1):
            t0 = time.perf_counter()
            d = await c.step(rid, k, thought=THOUGHT, action="read_file", action_input={"path": "a.py"})
            assert d is not None and d.step == k
            lat.append((time.perf_counter() - t0) * 1000)
        await c.finish_run(rid)
    return lat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrapers", type=int, default=50)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--scrape-only", metavar="URL", help=argparse.SUPPRESS)  # the scraper process
    ap.add_argument("--duration", type=float, default=600.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.scrape_only:
        print(json.dumps(asyncio.run(scrape(args.scrape_only, args.scrapers, args.duration))))
        return

    started = ensure_broker()
    s = bench_settings(partitions=4)
    w = WorkerProcess.start(s, s.data_path / "worker.log")
    try:
        asyncio.run(control_run(s, 20))  # warm-up
        quiet = asyncio.run(control_run(s, args.steps))
        log(f"no scrapes: {summary(quiet)}")
        url = f"http://127.0.0.1:{s.web_port}/metrics"
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.scrapes", "--scrape-only", url, "--scrapers", str(args.scrapers)],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(2.0)  # scrapers at full speed before the control run starts
        loaded = asyncio.run(control_run(s, args.steps))
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
        log(f"{args.scrapers} scrapers: {summary(loaded)}")
        report = {
            "machine": machine(),
            "scrapers": args.scrapers,
            "steps": args.steps,
            "control_ms_no_scrapes": summary(quiet),
            "control_ms_under_scrapes": summary(loaded),
            "scraper": json.loads(out) if out.strip() else None,
        }
        print(json.dumps(report, indent=2))
    finally:
        w.stop()
        if started:
            stop_broker()


if __name__ == "__main__":
    main()
