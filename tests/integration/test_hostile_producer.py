"""The red team's outage, against a real broker and worker: three schema-valid events (a
~252 KB file path, 14,000 junk monitor weights) used to make run states the changelog refused
(758 KB, 1.26 MB) and put the worker in a crash loop. Now every event is answered, the worker
keeps running and the next run is steered as usual. (Since issue 30 a `monitor_weights` key that
names no monitor is refused at the door: the 14,000 junk weights are dead-lettered
`invalid_run_start`, and the two steps with the long paths are sent on a run that starts cleanly.)"""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from streams.agent.client import SteeringClient
from streams.local.worker_process import WorkerProcess
from tests.integration.kafka_io import end_offsets, read_all

pytestmark = pytest.mark.integration


def test_the_three_events_that_crashed_the_worker_are_answered_and_it_keeps_running(worker: WorkerProcess):
    s = worker.settings
    path = "/" + "a/" * 125_000  # ~250 KB, under RB_MAX_EVENT_BYTES
    rid = "hostile-1"
    junk = {
        "type": "run_start",
        "schema_version": 1,
        "run_id": "hostile-0",
        "monitor_weights": {f"k{i}": 1.0 for i in range(14_000)},
    }
    events = [
        {"type": "run_start", "schema_version": 1, "run_id": rid},
        {
            "type": "step",
            "schema_version": 1,
            "run_id": rid,
            "step": 1,
            "action": "edit",
            "action_input": {"path": path},
        },
        {
            "type": "step",
            "schema_version": 1,
            "run_id": rid,
            "step": 2,
            "action": "edit",
            "action_input": {"path": path + "b"},
        },
    ]

    async def main() -> tuple[list[dict], list[int]]:
        # the worker is shared: read back only what comes after this point
        decided = await end_offsets(s.bootstrap_servers, s.steering_topic)
        refused = await end_offsets(s.bootstrap_servers, s.deadletter_topic)
        p = AIOKafkaProducer(bootstrap_servers=s.bootstrap_servers, max_request_size=1_048_576)
        await p.start()
        try:
            await p.send_and_wait(s.steps_topic, orjson.dumps(junk), key=b"hostile-0")
            for ev in events:
                await p.send_and_wait(s.steps_topic, orjson.dumps(ev), key=rid.encode())
        finally:
            await p.stop()
        got = await read_all(s.bootstrap_servers, s.steering_topic, expect=3, timeout_s=60, since=decided)
        dead.extend(
            await read_all(s.bootstrap_servers, s.deadletter_topic, expect=1, timeout_s=30, since=refused)
        )
        async with SteeringClient(s, deadline_ms=10_000) as c:  # the next run, as usual
            steps = [(await c.start_run("after-hostile")).step]  # type: ignore[union-attr]
            for k in (1, 2):
                d = await c.step("after-hostile", k, thought="read the file", action="read_file")
                assert d is not None
                steps.append(d.step)
        return got, steps

    dead: list[dict] = []
    decisions, steps = asyncio.run(main())
    refused = [d for d in dead if d.get("run_id") == "hostile-0"]
    assert [d["reason"] for d in refused] == ["invalid_run_start"], dead
    assert "monitor_weights: unknown monitor 'k0'" in refused[0]["detail"]
    assert not [d for d in decisions if d["run_id"] == "hostile-0"]
    mine = sorted(d["step"] for d in decisions if d["run_id"] == rid)
    assert mine == [0, 1, 2]
    assert steps == [0, 1, 2]
    assert worker.proc.poll() is None
    log = worker.log_path.read_text(errors="replace")
    assert "We experienced a crash" not in log and "MessageSizeTooLarge" not in log
