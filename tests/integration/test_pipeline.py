"""The whole path through a real broker and a real worker process."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict

import orjson
import pytest

from streams.agent.client import SteeringClient
from streams.core.fsm import DifficultyFSM, FSMState
from streams.core.monitors import MONITORS
from streams.core.outcome import encode, outcome_record
from streams.etraces.pattern_store import QdrantPatternStore
from streams.etraces.patterns import read_file
from streams.etraces.retrieval import Retriever
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.replay import Replayer
from tests.factories import b, run_finish, run_start, step
from tests.integration.helpers import STARTER, make_settings, start_worker
from tests.integration.kafka_io import end_offsets, read_all
from tests.models import models, semantics

pytestmark = pytest.mark.integration

ROUTING = {"FAST": "fast-model", "SLOW": "slow-model", "SKIP": "slow-model"}


def scripted(i: int, n: int) -> list[float]:
    rnd = random.Random(i)
    shape = i % 5
    if shape == 0:
        return [0.05] * n  # easy: FAST from step 6
    if shape == 1:
        return [0.9] * n  # hard: SLOW from step 5, SKIP at 35
    if shape == 2:
        return [0.05] * 8 + [0.35] + [0.7] * (n - 9)  # FAST, back to NORMAL, then SLOW
    if shape == 3:
        return [0.7] * 6 + [0.45] + [0.1] * (n - 7)  # SLOW, NORMAL, FAST
    return [rnd.random() for _ in range(n)]


def expected_states(seq: list[float]) -> list[str]:
    fsm, state, out = DifficultyFSM(), FSMState.INIT, []
    for k in range(len(seq)):
        state = fsm.transition(state, seq[: k + 1])
        out.append(state.value)
    return out


def test_fifty_concurrent_runs_get_one_decision_per_step_in_order(worker):
    s = worker.settings
    n_runs, n_steps = 50, 40
    sent: list[bytes] = []  # every event, in publish order, for the replay comparison
    received: dict[str, list[dict]] = defaultdict(list)

    async def agent(c: SteeringClient, i: int) -> None:
        rid = f"run-{i:03d}"
        seq = scripted(i, n_steps)
        ev = run_start(rid, model_routing=ROUTING, task=f"task {i}")
        sent.append(b(ev))
        d = await c.start_run(rid, model_routing=ROUTING, task=f"task {i}", ts=ev["ts"])
        assert d is not None and d.step == 0 and d.fsm_state == "INIT"
        received[rid].append(d.data)
        for k, x in enumerate(seq, start=1):
            d = await c.step(rid, k, thought=f"step {k}", difficulty=x, tokens=10)
            assert d is not None, f"{rid} step {k} missed the deadline"
            received[rid].append(d.data)
        await c.finish_run(rid)

    async def scenario() -> None:
        async with SteeringClient(s, deadline_ms=15_000) as c:
            await asyncio.gather(*(agent(c, i) for i in range(n_runs)))
            assert c.duplicate_decisions == 0

    asyncio.run(scenario())

    for i in range(n_runs):
        rid = f"run-{i:03d}"
        got = received[rid]
        assert [d["step"] for d in got] == list(range(n_steps + 1))
        states = [d["fsm_state"] for d in got[1:]]
        assert states == expected_states(scripted(i, n_steps)), rid
        # issue 39: a FAST decision names the cheap model only when the switch pays under
        # caching (else the home model, None here), and says why in routing_reason
        for d, x in zip(got[1:], states, strict=True):
            assert d["model"] == ROUTING.get(x) or (x == "FAST" and d["model"] is None), rid
            assert d["routing_reason"], rid
    assert any("SKIP" in [d["fsm_state"] for d in v] for v in received.values())

    # The topic itself: exactly one decision per (run, step), in step order per run.
    total = n_runs * (n_steps + 1)
    on_topic = [
        d
        for d in asyncio.run(read_all(s.bootstrap_servers, s.steering_topic, expect=total))
        if d["run_id"].startswith("run-")
    ]
    per_run: dict[str, list[int]] = defaultdict(list)
    for d in on_topic:
        per_run[d["run_id"]].append(d["step"])
    assert len(per_run) == n_runs
    for rid, steps in per_run.items():
        assert steps == list(range(n_steps + 1)), rid


def test_replay_gives_identical_decisions_to_the_worker(broker, tmp_path):
    # Both sides query the same pattern library (the worker's local store and replay's
    # in-memory one, seeded from the same file); the E-trace deadline is generous so no
    # answer is lost to machine noise (a timed-out query is the one allowed difference).
    w = start_worker(
        make_settings(
            broker, tmp_path, patterns_seed=str(STARTER), etrace_timeout_ms=3000, client_deadline_ms=15000
        ),
        tmp_path,
    )
    try:
        _replay_matches_worker(w, tmp_path)
    finally:
        w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)


def _replay_matches_worker(worker, tmp_path):
    s = worker.settings
    rnd = random.Random(3)
    events: list[dict] = []
    for i in range(12):
        rid = f"rp-{i}"
        # realistic coding-agent steps, one behaviour per run: every monitor fires somewhere
        task, steps = trajectory(BEHAVIOURS[i % len(BEHAVIOURS)], 30, seed=i)
        events.append(
            run_start(
                rid,
                task=task,
                model_routing=ROUTING,
                token_budget=5000,
                fsm_thresholds={"fast_window": 4} if i % 3 == 0 else None,
            )
        )
        for k, payload in enumerate(steps, start=1):
            events.append(step(rid, k, **payload))
        events.append(run_finish(rid))
    # interleave runs but keep each run's order
    queues = defaultdict(list)
    for e in events:
        queues[e["run_id"]].append(e)
    mixed: list[dict] = []
    while queues:
        rid = rnd.choice(sorted(queues))
        mixed.append(queues[rid].pop(0))
        if not queues[rid]:
            del queues[rid]
    for e in mixed:
        if e.get("fsm_thresholds") is None:
            e.pop("fsm_thresholds", None)

    async def publish() -> None:
        async with SteeringClient(s) as c:
            for e in mixed:
                await c.send_raw(b(e), key=e["run_id"].encode())

    asyncio.run(publish())
    expect = sum(1 for e in mixed if e["type"] != "run_finish")
    live = [
        d
        for d in asyncio.run(read_all(s.bootstrap_servers, s.steering_topic, expect=expect + 1))
        if d["run_id"].startswith("rp-")
    ]
    assert len(live) == expect

    src = tmp_path / "events.jsonl"
    src.write_bytes(b"\n".join(b(e) for e in mixed) + b"\n")
    store = QdrantPatternStore(models().full)
    store.upsert(read_file(STARTER)[0])
    rp = Replayer(sem=semantics(), retriever=Retriever(store))
    offline = [d for d, _ in rp.run(src.read_bytes().splitlines()) if d]

    def norm(ds):
        return sorted(
            orjson.dumps(
                {k: v for k, v in d.items() if k not in ("processed_ts", "key", "partition", "offset")},
                option=orjson.OPT_SORT_KEYS,
            )
            for d in ds
        )

    assert norm(live) == norm(offline)
    # Each finished run's outcome record is on the outcomes topic, keyed by run_id: the
    # very bytes replay makes from its final state (issue 50).
    records = [
        r
        for r in asyncio.run(read_all(s.bootstrap_servers, s.outcomes_topic, expect=12))
        if r["run_id"].startswith("rp-")
    ]
    assert sorted(r["key"] for r in records) == sorted(f"rp-{i}".encode() for i in range(12))
    got = {r["run_id"]: encode(_without_place(r)) for r in records}
    assert got == {rid: encode(outcome_record(st, "run_finish")) for rid, st in rp.states.items()}
    fired = {m for d in live if d.get("monitors") for m in d["monitors"]["fired"]}
    # the simulated behaviours plant no instructions in results: data_instruction is proven
    # through a worker by tests/integration/test_call_gate.py
    assert fired == set(MONITORS) - {"data_instruction"}
    assert any(i["source"] == "monitor" for d in live for i in d["injections"])
    sources = {i["source"] for d in live for i in d["injections"]}
    assert {"e3", "e2"} <= sources, sources
    assert not any(d["skipped_reason"] and "unavailable" in d["skipped_reason"] for d in live)


def test_bad_input_is_dead_lettered_and_valid_runs_continue(worker):
    s = worker.settings
    since = asyncio.run(end_offsets(s.bootstrap_servers, s.deadletter_topic))  # the worker is shared

    async def scenario() -> list[dict]:
        async with SteeringClient(s, deadline_ms=15_000) as c:
            assert await c.start_run("good") is not None
            bad = [
                (b"{this is not json", b"x1"),
                (
                    orjson.dumps({"type": "step", "schema_version": 1, "run_id": "good", "step": "two"}),
                    b"good",
                ),
                (orjson.dumps({"type": "step", "schema_version": 99, "run_id": "good", "step": 2}), b"good"),
                (b(step("nobody", 1)), b"nobody"),
                (b(run_start("badfsm", fsm_thresholds={"fast_threshold": 0.9})), b"badfsm"),
                (b(step("good", 7)), b"good"),
                (b(run_start("wrongkey")), b"another-key"),
                (b"x" * (s.max_event_bytes + 10), b"big"),
                (b"", None),
            ]
            d1 = await c.step("good", 1, thought="first")
            for value, key in bad:
                await c.send_raw(value, key=key)
            # a copy of step 1, the run's last: its decision re-sent as is, which the client drops
            await c.send_raw(b(step("good", 1)), key=b"good")
            d2 = await c.step("good", 2, thought="second")
            assert d1 is not None and d2 is not None and (d1.step, d2.step) == (1, 2)
            assert c.duplicate_decisions == 1  # read before step 2's, from the same partition
            return bad

    asyncio.run(scenario())
    dead = asyncio.run(read_all(s.bootstrap_servers, s.deadletter_topic, expect=9, since=since))
    reasons = sorted(d["reason"] for d in dead)
    assert reasons == sorted(
        [
            "invalid_json",
            "schema_violation",
            "unsupported_schema_version",
            "unknown_run",
            "invalid_fsm_thresholds",
            "out_of_order",
            "key_mismatch",
            "too_large",
            "invalid_json",
        ]
    )
    for d in dead:
        assert (
            d["detail"] and d["source"]["topic"] == s.steps_topic and isinstance(d["source"]["offset"], int)
        )
    big = next(d for d in dead if d["reason"] == "too_large")
    assert big["truncated"] and big["original_bytes"] == s.max_event_bytes + 10

    decisions = [
        d
        for d in asyncio.run(read_all(s.bootstrap_servers, s.steering_topic, expect=4))
        if d["run_id"] == "good"
    ]
    assert [d["step"] for d in decisions] == [0, 1, 1, 2]
    assert {**decisions[1], "offset": 0} == {**decisions[2], "offset": 0}  # processed_ts too


def _without_place(r: dict) -> dict:
    return {k: v for k, v in r.items() if k not in ("key", "partition", "offset")}


def test_simulate_command_drives_agents_against_the_configured_worker(worker):
    import os
    import subprocess
    import sys

    from streams.settings import Settings

    env = dict(os.environ, **{Settings.env_name(k): str(v) for k, v in worker.settings.as_dict().items()})
    env["RB_CLIENT_DEADLINE_MS"] = "5000"
    p = subprocess.run(
        [sys.executable, "-m", "streams", "simulate", "--runs", "2", "--steps", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    assert sum(" step   3 " in line for line in lines) == 2, p.stdout
    steps = [line for line in lines if " step " in line]
    assert steps and not any("late" in line for line in steps), p.stdout  # every decision in time
    # the per-agent summary closes the output: each agent's 4 calls, none late
    table = {
        line.split()[0]: line.split()[1:3] for line in lines if line.startswith(("healthy-", "looping-"))
    }
    assert table and all(v == ["4", "0"] for v in table.values()), p.stdout
    assert any(line.startswith("cost under prompt caching") and "never switching" in line for line in lines)
