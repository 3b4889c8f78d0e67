"""The client steers only with answers to steps it sent: a steering record naming one of its
runs for a step it never published, or keyed otherwise than by the run id, is ignored."""

from __future__ import annotations

import asyncio

from streams.agent.client import SteeringClient, _Run
from streams.settings import ClientSettings


def client() -> SteeringClient:
    return SteeringClient(ClientSettings.from_env({}))


def decision(run_id: str, step: int) -> dict:
    return {"type": "decision", "run_id": run_id, "step": step, "injection_text": "[REASONBLOCKS] x"}


async def test_a_decision_for_a_step_this_client_never_sent_is_ignored():
    c = client()
    run = _Run("r", 0)
    run.last_published = 1
    c._runs["r"] = run
    fut = asyncio.get_running_loop().create_future()
    c._waiters[("r", 1)] = fut
    c._deliver(decision("r", 5), 0.0, b"r")  # someone else's step 5 of our run
    assert c.unasked_decisions == 1 and run.last_delivered == -1 and not fut.done()
    c._deliver(decision("r", 1), 0.0, b"other-key")  # not keyed by the run: not the worker's
    assert c.unasked_decisions == 2 and not fut.done()
    c._deliver(decision("r", 1), 0.0, b"r")
    assert fut.done() and fut.result().step == 1


async def test_runs_it_did_not_start_are_not_delivered():
    c = client()
    c._deliver(decision("not-mine", 0), 0.0, b"not-mine")
    assert c.unasked_decisions == 0 and c.late_decisions == 0


def test_a_tenant_client_uses_its_tenants_topics():
    c = SteeringClient(ClientSettings.from_env({"RB_TENANT": "acme", "RB_TOPIC_PREFIX": "p"}))
    assert (c.steps_topic, c.steering_topic) == ("p.acme.steps", "p.acme.steering")
    assert SteeringClient(ClientSettings.from_env({})).steps_topic == "rb.steps"
