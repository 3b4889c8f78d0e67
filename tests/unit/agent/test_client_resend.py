"""The worker re-sends a run's last decision when it reads that step again (a restart on the
same data directory, issue 38): the client delivers the copy only when the first never came,
and drops and counts it otherwise, so the agent sees each step's decision once."""

from __future__ import annotations

import asyncio

from streams.agent.client import SteeringClient, _Run
from streams.kafka.client_settings import ClientSettings


def decision(step: int) -> dict:
    return {"type": "decision", "run_id": "r", "step": step, "processed_ts": 5.0}


async def test_a_resent_copy_of_a_delivered_decision_is_dropped_and_counted():
    c = SteeringClient(ClientSettings.from_env({}))
    run = c._runs["r"] = _Run("r", 0)
    run.last_published = 2
    fut = c._waiters[("r", 2)] = asyncio.get_running_loop().create_future()
    c._deliver(decision(2), 0.0, b"r")
    c._deliver(decision(2), 0.0, b"r")  # the worker's re-send after a restart
    assert fut.result().step == 2 and c.duplicate_decisions == 1 and c.late_decisions == 0


async def test_a_resent_copy_whose_first_copy_was_lost_is_delivered():
    c = SteeringClient(ClientSettings.from_env({}))
    run = c._runs["r"] = _Run("r", 0)
    run.last_published, run.last_delivered = 3, 2
    fut = c._waiters[("r", 3)] = asyncio.get_running_loop().create_future()
    c._deliver(decision(3), 0.0, b"r")  # step 3's first copy died in the worker's buffer
    assert fut.result().step == 3 and c.duplicate_decisions == 0
