"""The broker restarts mid-run: agents never block past their deadline, the worker and the
clients reconnect, and every step still gets its decision with the state of a replay."""

from __future__ import annotations

import asyncio
import time

import pytest

from streams.agent.client import SteeringClient
from streams.local.broker import kafka
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.local.worker_process import WorkerProcess
from tests.integration.exactness import check_against_replay, check_states, read_back
from tests.integration.helpers import STARTER, make_settings

pytestmark = pytest.mark.integration

RUNS, STEPS = 40, 24
DEADLINE_MS = 2000


def test_a_broker_restart_mid_run_loses_nothing_and_never_blocks_an_agent(spare_broker, tmp_path):
    broker, port, data_dir, env = spare_broker
    s = make_settings(
        broker,
        tmp_path,
        partitions=4,
        patterns_seed=str(STARTER),
        etrace_timeout_ms=60_000,  # no E-trace answer dropped for slowness: live == replay
        client_deadline_ms=61_000,
    )
    w = WorkerProcess.start(s, tmp_path / "worker.log")
    progress = [0] * RUNS
    slowest = [0.0]
    outage = {}
    try:

        async def agent(c: SteeringClient, i: int) -> None:
            rid = f"br-{i:02d}"
            task, script = trajectory(BEHAVIOURS[i % len(BEHAVIOURS)], STEPS, seed=i)
            await c.start_run(rid, task=task, org_id="acme")
            for k, payload in enumerate(script, start=1):
                t0 = time.perf_counter()
                await c.step(rid, k, **payload)
                slowest[0] = max(slowest[0], time.perf_counter() - t0)
                progress[i] = k
                await asyncio.sleep(0.05)
            await c.finish_run(rid, "success")

        async def operator() -> None:
            while min(progress) < STEPS // 3:
                await asyncio.sleep(0.05)
            t0 = time.monotonic()
            await asyncio.to_thread(kafka, "stop", port, data_dir, env)
            await asyncio.sleep(2.0)
            await asyncio.to_thread(kafka, "start", port, data_dir, env)
            outage["s"] = time.monotonic() - t0

        async def main() -> int:
            async with SteeringClient(s, deadline_ms=DEADLINE_MS) as c:
                await asyncio.gather(*(agent(c, i) for i in range(RUNS)), operator())
                await asyncio.sleep(5.0)
                return c.failed_sends

        failed = asyncio.run(main())
        print(f"\nbroker away {outage['s']:.1f}s; slowest agent call {slowest[0]:.2f}s")
        assert failed == 0
        # An agent call waits about its deadline, not for the broker (away ~9 s; the producer
        # alone would wait up to 40 s). The slack covers event-loop stalls while the JVM
        # restarts on this 2-core machine (seen: up to 1.3 s past the deadline).
        assert outage["s"] > 2 * DEADLINE_MS / 1000.0
        assert slowest[0] < 2 * DEADLINE_MS / 1000.0

        inputs, live = read_back(s, "br-", RUNS * (STEPS + 2), RUNS * (STEPS + 1))
        rp = check_against_replay(inputs, live)
        check_states(w, rp, [f"br-{i:02d}" for i in range(RUNS)])
    finally:
        w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)
