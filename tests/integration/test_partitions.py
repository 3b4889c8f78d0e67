"""A run_start produced to another partition than its key's, through the real broker, is
dead-lettered `wrong_partition` and opens nothing; the same run started on its own partition
is answered as a new run. (Both modes, the cap and evictions: tests/unit/worker/test_partitions.py.)"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from streams.agent.client import SteeringClient
from streams.kafka import wire
from streams.local.worker_process import WorkerProcess
from tests.factories import run_start

pytestmark = pytest.mark.integration


async def deadletter_of(w: WorkerProcess, run_id: str, timeout_s: float = 30.0) -> dict[str, Any] | None:
    """The first dead-letter record for `run_id` (the worker is shared: others are skipped)."""
    s = w.settings
    c = AIOKafkaConsumer(bootstrap_servers=s.bootstrap_servers, group_id=None, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(s.deadletter_topic, p) for p in range(s.partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        end = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < end:
            for recs in (await c.getmany(timeout_ms=300)).values():
                for r in recs:
                    rec = orjson.loads(r.value)
                    if rec.get("run_id") == run_id:
                        return dict(rec)
        return None
    finally:
        await c.stop()


def test_a_run_start_on_the_wrong_partition_is_dead_lettered_and_the_run_opens_on_its_own(
    adapters_worker: WorkerProcess,
) -> None:
    w = adapters_worker
    s = w.settings
    run_id = f"misrouted-{uuid.uuid4().hex[:8]}"
    own = wire.partition_for(run_id, s.partitions)
    wrong = (own + 1) % s.partitions

    async def main() -> tuple[dict[str, Any] | None, Any]:
        p = AIOKafkaProducer(bootstrap_servers=s.bootstrap_servers, enable_idempotence=True)
        await p.start()
        try:
            await p.send_and_wait(
                s.steps_topic, orjson.dumps(run_start(run_id)), key=run_id.encode(), partition=wrong
            )
        finally:
            await p.stop()
        dead = await deadletter_of(w, run_id)
        async with SteeringClient(s, deadline_ms=15_000) as c:
            decision = await c.start_run(run_id)  # keyed, default partitioner: its own partition
        return dead, decision

    dead, decision = asyncio.run(main())
    assert dead is not None, w.tail(60)
    assert dead["reason"] == "wrong_partition" and dead["source"]["partition"] == wrong
    assert f"hashes to partition {own}" in dead["detail"]
    assert decision is not None and decision.step == 0  # a new run: the stray copy opened nothing
    url = f"http://127.0.0.1:{s.web_port}/runs/{run_id}"
    headers = (
        {"Authorization": f"Bearer {s.web_token.get_secret_value()}"}
        if s.web_token.get_secret_value()
        else {}
    )
    try:
        summary = json.loads(
            urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10).read()
        )
    except urllib.error.HTTPError as exc:  # pragma: no cover - the failure message
        raise AssertionError(f"/runs/{run_id}: {exc}") from exc
    assert summary["run_id"] == run_id
