"""Evictions and per-org caps come out the same live (worker, real broker) and offline (replay):
both run `streams.pipeline.Pipeline`, so every decision and every dead-letter matches."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from streams.agent.client import SteeringClient
from streams.core.retention import evict_request
from streams.kafka import wire
from streams.replay import Replayer
from tests.factories import b, run_finish, run_start, step
from tests.integration.conftest import make_settings, start_worker
from tests.integration.kafka_io import read_all
from tests.models import semantics

KEY = "live-offline-key"
PARTITIONS = 2
TS = 1_700_000_000.0


def _on_partition(prefix: str, partition: int, n: int) -> list[str]:
    ids = (f"{prefix}-{i}" for i in range(1000))
    return [rid for rid in ids if wire.partition_for(rid, PARTITIONS) == partition][:n]


def _events() -> list[bytes]:
    a, bb = _on_partition("acme", 0, 2)  # one partition: the cap is counted in its order
    (other,) = _on_partition("acme", 1, 1)
    (g,) = _on_partition("globex", 0, 1)

    def start(rid: str, org: str) -> bytes:
        return b(run_start(rid, org_id=org, e_traces_enabled=False, model_routing={"NORMAL": "m"}))

    def steps(rid: str, first: int, last: int) -> list[bytes]:
        return [b(step(rid, k)) for k in range(first, last + 1)]

    return [
        start(a, "acme"),
        start(bb, "acme"),  # over the cap (1 per partition): too_many_runs
        start(other, "acme"),  # the other partition has its own share
        *steps(a, 1, 3),
        b(run_finish(a)),
        evict_request(a, (3, True, 0, TS), KEY),  # signed for a's finished state: applied
        start(bb, "acme"),  # a left: room again
        b(step(a, 4)),  # a is gone: unknown_run
        *steps(bb, 1, 1),
        evict_request(bb, (0, False, 0, TS), KEY),  # stale: bb moved on since
        evict_request(bb, (1, False, 0, TS)),  # unsigned: refused (invalid_control)
        evict_request(bb, (1, False, 0, TS), "wrong-key"),  # forged: refused
        *steps(bb, 2, 3),
        start(g, "globex"),  # other orgs are not capped by acme's runs
        *steps(g, 1, 2),
        *steps(other, 1, 2),
        b(run_finish(bb)),
    ]


def _norm_decisions(ds: list[dict[str, Any]]) -> list[bytes]:
    return sorted(
        orjson.dumps(
            {k: v for k, v in d.items() if k not in ("processed_ts", "key", "partition", "offset")},
            option=orjson.OPT_SORT_KEYS,
        )
        for d in ds
    )


def _norm_deadletters(ds: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((d["reason"], d["run_id"], d["step"], d["detail"], d["original"]) for d in ds)


def test_evictions_and_a_capped_org_come_out_the_same_live_and_in_replay(broker, tmp_path):
    s = make_settings(broker, tmp_path, partitions=PARTITIONS, max_runs_per_org=2, control_key=KEY)
    events = _events()
    w = start_worker(s, tmp_path)
    try:

        async def publish() -> None:
            async with SteeringClient(s) as c:
                for raw in events:
                    run_id = orjson.loads(raw)["run_id"]
                    await c.send_raw(raw, key=run_id.encode())

        asyncio.run(publish())
        rp = Replayer(sem=semantics(), max_runs_per_org=2, partitions=PARTITIONS, control_key=KEY)
        offline = [rp.feed(raw, key=orjson.loads(raw)["run_id"].encode()) for raw in events]
        want_d = [d for d, _ in offline if d is not None]
        want_dl = [dl for _, dl in offline if dl is not None]
        ours = {orjson.loads(raw)["run_id"] for raw in events}  # not the start-up probe's run
        live_d = asyncio.run(read_all(s.bootstrap_servers, s.steering_topic, expect=len(want_d) + 1))
        live_d = [d for d in live_d if d["run_id"] in ours]
        live_dl = asyncio.run(read_all(s.bootstrap_servers, s.deadletter_topic, expect=len(want_dl)))
    finally:
        w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)
    reasons = sorted(dl["reason"] for dl in want_dl)
    assert reasons == ["invalid_control", "invalid_control", "too_many_runs", "unknown_run"], reasons
    assert len(want_d) == 14  # 4 accepted run_starts + 10 steps
    assert _norm_decisions(live_d) == _norm_decisions(want_d)
    assert _norm_deadletters(live_dl) == _norm_deadletters(want_dl)
