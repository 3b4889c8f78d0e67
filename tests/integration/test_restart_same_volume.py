"""kill -9 the worker at random points under load and restart it on its own data directory,
as compose and Kubernetes restart it (issue 38): every step still gets its decision, and a
step answered twice was answered identically.

The local RocksDB may hold a run's state whose decision and changelog record were still in
the producer's buffer at the kill; the restarted worker then reads the step again, finds it
in the state already, and must re-send the decision it made (`core.engine._resend`). Nor may a
commit pass a state change still in Faust's producer buffer (`worker.producer_guard`), nor the
changelog replay move a run's local state backwards (`worker.recovery_guard`): either lost a
run's state in about one run of this test in three before both were fixed. Nor may a worker
that finds no committed offset (its predecessors all died within Faust's commit interval: the
first kill comes 0.2-2 s after the first answer) go on past the steps it fetched and dropped
during its rebalances (`worker.rewind`).
"""

from __future__ import annotations

import asyncio
import random
import signal
import threading
import time
from typing import Any

import orjson
import pytest

from streams.agent.client import SteeringClient
from streams.core.outcome import encode, outcome_record
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.local.worker_process import WorkerProcess
from tests.integration.exactness import WIRE_ONLY, check_against_replay, check_states, read_back
from tests.integration.helpers import make_settings
from tests.integration.kafka_io import read_all

pytestmark = pytest.mark.integration

AGENTS, STEPS, KILLS, SEED = 24, 6, 5, 38
ROUTING = {"FAST": "fast-model", "SLOW": "slow-model", "SKIP": "slow-model"}


def exact(d: dict[str, Any]) -> bytes:
    """A decision as sent (processed_ts included), without its place on the topic."""
    return orjson.dumps({k: v for k, v in d.items() if k not in WIRE_ONLY})


def check_outcomes(s: Any, rp: Any, runs: list[str]) -> None:
    """Every finished run has its outcome record on the outcomes topic (0 missing); a run's
    copies (re-sent by a restarted worker) are byte-identical, and equal replay's record."""
    records = [
        r
        for r in asyncio.run(read_all(s.bootstrap_servers, s.outcomes_topic, expect=len(runs)))
        if r["run_id"].startswith("rs-")
    ]
    copies: dict[str, set[bytes]] = {}
    for r in records:
        assert r["key"] == r["run_id"].encode()
        copies.setdefault(r["run_id"], set()).add(encode({k: v for k, v in r.items() if k not in WIRE_ONLY}))
    missing = sorted(set(runs) - set(copies))
    assert not missing, f"{len(missing)} finished runs without an outcome record, e.g. {missing[:5]}"
    differing = sorted(rid for rid, v in copies.items() if len(v) > 1)
    assert not differing, f"outcome records re-sent different: {differing[:5]}"
    want = {rid: encode(outcome_record(rp.states[rid], "run_finish")) for rid in runs}
    assert {rid: next(iter(v)) for rid, v in copies.items()} == want
    print(
        f"outcome records: {len(records)} for {len(copies)} runs, {len(records) - len(copies)} identical re-sends"
    )


@pytest.mark.timeout(420)
def test_a_worker_killed_and_restarted_on_its_own_data_directory_loses_no_decision(broker, tmp_path):
    # No pattern library: a start costs less, and E-traces are not what this is about.
    base = make_settings(broker, tmp_path, partitions=4, client_deadline_ms=61_000)
    rng = random.Random(SEED)
    log = tmp_path / "worker.log"
    worker = WorkerProcess.start(base, log)
    stop = threading.Event()
    runs: list[str] = []
    answered, waiting = [0], [0]  # steps answered; agents waiting on a decision now
    result: dict[str, Any] = {}

    async def agent(c: SteeringClient, slot: int) -> None:
        """Runs one after another until the kills are over: load at every kill."""
        n = 0
        while not stop.is_set():
            rid = f"rs-{slot:02d}-{n:03d}"
            task, script = trajectory(BEHAVIOURS[(slot + n) % len(BEHAVIOURS)], STEPS, seed=slot * 100 + n)
            n += 1
            # A deadline past a restart: agents wait for the worker rather than run ahead.
            waiting[0] += 1
            await c.start_run(rid, task=task, model_routing=ROUTING)
            for k, payload in enumerate(script, start=1):
                if await c.step(rid, k, **payload) is not None:
                    answered[0] += 1
            waiting[0] -= 1
            await c.finish_run(rid, "success")
            runs.append(rid)

    async def fleet() -> None:
        async with SteeringClient(base, deadline_ms=45_000) as c:
            await asyncio.gather(*(agent(c, i) for i in range(AGENTS)))
            await asyncio.sleep(2.0)  # re-sent copies still on their way
            result["late"], result["dropped"] = c.late_decisions, c.duplicate_decisions

    agents = threading.Thread(target=lambda: asyncio.run(fleet()), name="agents", daemon=True)
    t0 = time.monotonic()
    agents.start()
    try:
        for i in range(KILLS):
            before, deadline = answered[0], time.monotonic() + 90
            while answered[0] == before and time.monotonic() < deadline:
                time.sleep(0.05)  # steps flow (the fleet started, the worker is back)
            assert answered[0] > before, "no step answered since the restart"
            time.sleep(rng.uniform(0.2, 2.0))  # then a random point under load
            busy = waiting[0]
            worker.proc.send_signal(signal.SIGKILL)
            assert worker.proc.wait(10) == -signal.SIGKILL
            print(f"kill {i + 1} at {time.monotonic() - t0:.1f}s: {busy} agents waiting on a decision")
            assert busy > 0
            worker.stop()
            worker = WorkerProcess.start(base, log)  # the same RB_DATA_DIR
    finally:
        stop.set()
        agents.join(120 if worker.proc.poll() is None else 1)
    if agents.is_alive():
        worker.stop()  # the assertion below ends the test: leave no worker running
    assert not agents.is_alive()
    print(f"agents done in {time.monotonic() - t0:.1f}s: {len(runs)} runs, {result}")
    try:
        inputs, live = read_back(base, "rs-", len(runs) * (STEPS + 2), len(runs) * (STEPS + 1))
        rp = check_against_replay(inputs, live, patterns=None)  # none missing, copies identical, = replay
        copies: dict[tuple[str, int], list[bytes]] = {}
        for d in live:
            copies.setdefault((d["run_id"], d["step"]), []).append(exact(d))
        twice = [v for v in copies.values() if len(v) > 1]
        resent = sum(len(set(v)) == 1 for v in twice)
        print(f"steps answered more than once: {len(twice)}, of them re-sent byte for byte: {resent}")
        check_states(worker, rp, sorted(runs)[:: max(1, len(runs) // 24)])  # a sample: HTTP is slow
        check_outcomes(base, rp, runs)
    finally:
        worker.stop()
