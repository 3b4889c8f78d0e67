"""3,000 mixed events, most of them bad (12 kinds, each about 200 times), interleaved with
valid runs: the worker keeps going, every bad event is dead-lettered with a reason, every valid
step is answered."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import orjson
import pytest

from streams.agent.client import SteeringClient
from streams.replay import Replayer
from tests.factories import run_start, step
from tests.integration.kafka_io import end_offsets, read_all
from tests.models import semantics

pytestmark = pytest.mark.integration

TOTAL = 3_000
RUNS, STEPS = 30, 20
UNICODE = [
    "zero\u200bwidth",
    "right\u202eto\u202cleft",
    "emoji 🧪🔥👩‍💻",
    "nul \u0000 inside",
    "combining e\u0301\u0301\u0301",
    "\ufeffbom first",
    "\U0001d518\U0001d52b\U0001d526 astral plane",
    "中文 العربية עברית",
]


def bad_event(rng: random.Random, valid_ids: list[str], max_bytes: int) -> tuple[bytes, bytes | None, str]:
    """One invalid input, its key, and the reason the pure core gives it."""
    rid = rng.choice(valid_ids)
    kind = rng.randrange(12)
    ev: dict[str, Any]
    if kind == 0:  # malformed JSON
        raw = rng.choice([b"{", b"[1,2", b'{"type":"step",', bytes(rng.randrange(256) for _ in range(40))])
        return raw, rid.encode(), "invalid_json"
    if kind == 1:  # NaN / Infinity are not JSON
        raw = orjson.dumps(step(rid, 999))[:-1] + b',"difficulty":NaN}'
        return raw, rid.encode(), "invalid_json"
    if kind == 2:  # wrong types
        ev = step(rid, 999)
        field, value = rng.choice(
            [("step", "two"), ("tokens", "many"), ("thought", 42), ("observation_is_error", "yes")]
        )
        ev[field] = value
        return orjson.dumps(ev), rid.encode(), "schema_violation"
    if kind == 3:  # a required field missing
        ev = step(rid, 999)
        del ev[rng.choice(["run_id", "step", "type"])]
        return orjson.dumps(ev), rid.encode(), "schema_violation"
    if kind == 4:  # past the size limit
        ev = step(rid, 999, thought="x" * (max_bytes + rng.randrange(1, 5000)))
        return orjson.dumps(ev), rid.encode(), "too_large"
    if kind == 5:  # unknown schema version
        ev = step(rid, 999, schema_version=rng.choice([0, 2, 99]))
        return orjson.dumps(ev), rid.encode(), "unsupported_schema_version"
    if kind == 6:  # a step of a run nobody started
        other = f"ghost-{rng.randrange(10**6)}"
        return orjson.dumps(step(other, rng.randrange(1, 50))), other.encode(), "unknown_run"
    if kind == 7:  # negative step numbers
        return orjson.dumps(step(rid, -rng.randrange(1, 100))), rid.encode(), "schema_violation"
    if kind == 8:  # an event type nobody knows (an out-of-range difficulty is valid: clamped)
        ev = step(rid, 999, type=rng.choice(["stpe", "run_end", "", "STEP"]))
        return orjson.dumps(ev), rid.encode(), "schema_violation"
    if kind == 9:  # invalid fsm_thresholds on a new run
        other = f"badfsm-{rng.randrange(10**6)}"
        ev = run_start(other, fsm_thresholds={"fast_threshold": 0.9, "slow_threshold": 0.1})
        return orjson.dumps(ev), other.encode(), "invalid_fsm_thresholds"
    if kind == 10:  # JSON that is not an object
        return rng.choice([b"[]", b"42", b'"step"', b"null"]), rid.encode(), "not_an_object"
    # lone surrogates cannot be UTF-8
    raw = orjson.dumps(step(rid, 999))[:-1] + b',"thought":"\xed\xa0\x80"}'
    return raw, rid.encode(), "invalid_json"


def test_three_thousand_mixed_events_are_all_accounted_for(worker):
    s = worker.settings
    rng = random.Random(7)
    ids = [f"fz-{i:02d}" for i in range(RUNS)]
    n_valid = RUNS * (STEPS + 2)
    bad = [bad_event(rng, ids, s.max_event_bytes) for _ in range(TOTAL - n_valid)]

    # What the pure core says of each bad input on its own (the worker must agree).
    rp = Replayer(sem=semantics())
    for raw, _, want in bad:
        decision, dead = rp.feed(raw)
        assert decision is None and dead is not None, (want, raw[:200])
        assert dead["reason"] == want, (dead["reason"], want, raw[:200])

    async def valid_run(c: SteeringClient, i: int) -> list[int]:
        rid = ids[i]
        got = []
        d = await c.start_run(rid, task=UNICODE[i % len(UNICODE)])
        got.append(-1 if d is None else d.step)
        for k in range(1, STEPS + 1):
            d = await c.step(rid, k, thought=f"{UNICODE[(i + k) % len(UNICODE)]} step {k}")
            got.append(-1 if d is None else d.step)
        await c.finish_run(rid)
        return got

    async def noise(c: SteeringClient) -> None:
        for n, (raw, key, _) in enumerate(bad):
            await c.send_raw(raw, key=key)
            if n % 50 == 0:
                await asyncio.sleep(0.01)  # interleave with the valid runs

    # the worker is shared: read back only what comes after this point
    since = asyncio.run(end_offsets(s.bootstrap_servers, s.deadletter_topic))

    async def main() -> list[list[int]]:
        # Every valid step must be answered; how fast is the latency benchmarks' business. On a
        # busy 2-core CI machine a valid step can queue behind hundreds of oversize events for
        # more than 20 s (seen before and after the poison-event work), so the wait is generous.
        async with SteeringClient(s, deadline_ms=60_000) as c:
            # valid runs start first: their bad events need a known run to be judged like above
            await asyncio.gather(*(c.start_run(f"warm-{i}") for i in range(2)))
            results = await asyncio.gather(*(valid_run(c, i) for i in range(RUNS)), noise(c))
            return list(results[:RUNS])

    answered = asyncio.run(main())
    assert answered == [list(range(STEPS + 1))] * RUNS
    assert worker.proc.poll() is None, "the worker died"

    dead = asyncio.run(
        read_all(s.bootstrap_servers, s.deadletter_topic, expect=len(bad), timeout_s=120, since=since)
    )
    assert Counter(d["reason"] for d in dead) == Counter(want for _, _, want in bad)
    assert all(d["detail"] for d in dead)
    decisions = [
        d
        for d in asyncio.run(read_all(s.bootstrap_servers, s.steering_topic, expect=n_valid))
        if d["run_id"].startswith("fz-")
    ]
    assert Counter(d["run_id"] for d in decisions) == dict.fromkeys(ids, STEPS + 1)
