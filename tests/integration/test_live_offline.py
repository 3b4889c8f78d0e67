"""Evictions, the per-org cap and the overall cap come out the same live (worker, real broker)
and offline (replay): both run `streams.pipeline.Pipeline`, so every decision and every
dead-letter matches."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from streams.agent.client import SteeringClient
from streams.core.retention import evict_request
from streams.kafka import wire
from streams.replay import Replayer
from tests.factories import b, run_finish, run_start, step
from tests.integration.helpers import make_settings, start_worker
from tests.integration.kafka_io import read_all
from tests.models import semantics

KEY = "live-offline-key"
PARTITIONS = 2
MAX_RUNS = 6  # 3 per partition, for every org together
FLOOD = 4  # run_starts of distinct orgs per partition, after everything else
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
        # one run per org passes any per-org cap; the overall cap (3 a partition) stops them
        *(start(rid, f"org-{rid}") for p in range(PARTITIONS) for rid in _on_partition("flood", p, FLOOD)),
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


def test_evictions_a_capped_org_and_a_flood_of_orgs_come_out_the_same_live_and_in_replay(broker, tmp_path):
    s = make_settings(
        broker, tmp_path, partitions=PARTITIONS, max_runs_per_org=2, max_runs=MAX_RUNS, control_key=KEY
    )
    events = _events()
    ours = {orjson.loads(raw)["run_id"] for raw in events}
    w = start_worker(s, tmp_path)
    try:

        async def publish() -> None:
            async with SteeringClient(s) as c:
                for raw in events:
                    run_id = orjson.loads(raw)["run_id"]
                    await c.send_raw(raw, key=run_id.encode())

        asyncio.run(publish())
        live_d = asyncio.run(read_all(s.bootstrap_servers, s.steering_topic))
        # the start-up probes' runs (before ours) are held too: replay opens them first
        probes = sorted({d["run_id"] for d in live_d} - ours)
        rp = Replayer(
            sem=semantics(), max_runs_per_org=2, partitions=PARTITIONS, control_key=KEY, max_runs=MAX_RUNS
        )
        for probe in probes:
            assert rp.feed(b(run_start(probe)), key=probe.encode())[0] is not None
        offline = [rp.feed(raw, key=orjson.loads(raw)["run_id"].encode()) for raw in events]
        want_d = [d for d, _ in offline if d is not None]
        want_dl = [dl for _, dl in offline if dl is not None]
        live_dl = asyncio.run(read_all(s.bootstrap_servers, s.deadletter_topic, expect=len(want_dl)))
    finally:
        w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)
    live_d = [d for d in live_d if d["run_id"] in ours]
    reasons = sorted(dl["reason"] for dl in want_dl)
    full = reasons.count("table_full")
    assert [r for r in reasons if r != "table_full"] == [
        "invalid_control",
        "invalid_control",
        "too_many_runs",
        "unknown_run",
    ], reasons
    # held before the flood: bb and g on partition 0, `other` on 1, and the probes
    room = sum(max(0, MAX_RUNS // PARTITIONS - held) for held in _held_before_flood(probes))
    assert full == PARTITIONS * FLOOD - room and full >= FLOOD, (reasons, probes)
    assert len(want_d) == 14 + room  # 4 accepted run_starts + 10 steps + the floods let in
    assert _norm_decisions(live_d) == _norm_decisions(want_d)
    assert _norm_deadletters(live_dl) == _norm_deadletters(want_dl)
    assert all("RB_MAX_RUNS" in dl["detail"] for dl in live_dl if dl["reason"] == "table_full")


def _held_before_flood(probes: list[str]) -> list[int]:
    held = [2, 1]
    for probe in probes:
        held[wire.partition_for(probe, PARTITIONS)] += 1
    return held
