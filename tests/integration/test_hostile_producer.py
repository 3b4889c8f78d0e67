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
from tests.integration.helpers import run_summary
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


def test_a_run_fed_hostile_numbers_keeps_getting_decisions_and_no_internal_error(worker: WorkerProcess):
    """Issue 48: a number must never poison a run. A routed run whose steps report usage at the
    wire's maximum, jump their clock between -1e308 and 1e308 and give out-of-range difficulty,
    with events in between whose numbers the contract refuses (each dead-lettered with its
    reason): every valid step is decided, the run's view holds only finite numbers, and no
    event of it is an internal_error."""
    s = worker.settings
    rid = "hostile-numbers-1"
    huge = {
        "input_tokens": 2**53,
        "cache_read_tokens": 2**53,
        "cache_write_tokens": 2**53,
        "output_tokens": 2**53,
    }
    start = {
        "type": "run_start",
        "schema_version": 1,
        "run_id": rid,
        "model": "claude-opus-4-5",
        "model_routing": {"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5"},
        "token_budget": 2**53,
        "ts": -1e308,
    }

    def step(n: int, **kw: object) -> dict:
        return {
            "type": "step",
            "schema_version": 1,
            "run_id": rid,
            "step": n,
            "thought": "Run the tests again.",
            "action": "run_tests",
            "action_input": {"n": 1e308},
            "observation": "1 failed",
            "tokens": 2**53,
            "usage": huge,
            "difficulty": [1e308, -1e308, 5e-324][n % 3],
            "ts": 1e308 if n % 2 else -1e308,
            **kw,
        }

    good = [orjson.dumps(step(n)) for n in range(1, 13)]
    # refused by the contract, each with its reason; the run goes on after them
    bad = [
        orjson.dumps(step(13, tokens=2**53 + 1)),  # past the stated maximum
        orjson.dumps(step(13, usage={"output_tokens": -1})),
        orjson.dumps(step(13, ts="NaN")),
        orjson.dumps(step(13, difficulty="Infinity")),
        orjson.dumps(step(13)).replace(b'"tokens":9007199254740992', b'"tokens":1' + b"0" * 400),
    ]
    events = [orjson.dumps(start), *good[:6], *bad, *good[6:]]

    async def main() -> tuple[list[dict], list[dict]]:
        decided = await end_offsets(s.bootstrap_servers, s.steering_topic)
        refused = await end_offsets(s.bootstrap_servers, s.deadletter_topic)
        p = AIOKafkaProducer(bootstrap_servers=s.bootstrap_servers)
        await p.start()
        try:
            for ev in events:
                await p.send_and_wait(s.steps_topic, ev, key=rid.encode())
        finally:
            await p.stop()
        got = await read_all(s.bootstrap_servers, s.steering_topic, expect=13, timeout_s=60, since=decided)
        dead = await read_all(s.bootstrap_servers, s.deadletter_topic, expect=5, timeout_s=30, since=refused)
        return got, dead

    decisions, dead = asyncio.run(main())
    mine = [d for d in decisions if d.get("run_id") == rid]
    assert sorted(d["step"] for d in mine) == list(range(13)), mine
    assert all(d["routing_reason"] for d in mine)
    assert all(d["tokens_used"] <= 2**53 and d["budget_used"] is not None for d in mine[1:])
    ours = [d for d in dead if d.get("run_id") == rid or rid.encode() in d.get("original", "").encode()]
    assert sorted(d["reason"] for d in ours) == ["invalid_json"] + ["schema_violation"] * 4, ours
    assert not [d for d in dead if d["reason"] == "internal_error"], dead
    summary = run_summary(worker, rid, finished=False)
    assert summary["step"] == 12 and summary["tokens_used"] == 2**53
    assert worker.proc.poll() is None
