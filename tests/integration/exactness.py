"""The checks a fault test makes after the fault: read back what went in and what came out,
and hold it against an offline replay of the same input (starter pattern library)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

from streams.etraces.pattern_store import QdrantPatternStore
from streams.etraces.patterns import read_file
from streams.etraces.retrieval import Retriever
from streams.local.worker_process import WorkerProcess
from streams.replay import Replayer
from streams.settings import Settings
from tests.integration.helpers import STARTER
from tests.integration.kafka_io import read_all
from tests.models import models, semantics

WIRE_ONLY = ("key", "partition", "offset")
SUMMARY = (
    "state",
    "step",
    "tokens_used",
    "budget_used",
    "scored_steps",
    "monitor_injections",
    "injections_by_source",
    "e_trace_calls",
    "finished",
    "outcome",
)


def strip(d: dict[str, Any]) -> bytes:
    """A decision without wall-clock time and wire position, comparable across runs."""
    return orjson.dumps(
        {k: v for k, v in d.items() if k not in ("processed_ts", *WIRE_ONLY)}, option=orjson.OPT_SORT_KEYS
    )


def history(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The step log without wall-clock times: step, FSM state, difficulty, model, injections."""
    return [{k: v for k, v in e.items() if k != "processed_ts"} for e in entries]


def http_json(w: WorkerProcess, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{w.settings.web_port}{path}", timeout=10) as r:
        return dict(json.loads(r.read()))


def read_back(s: Settings, prefix: str, n_inputs: int, n_decisions: int) -> tuple[list[dict], list[dict]]:
    """(inputs, decisions) of the runs named `prefix*`, as a read_committed consumer sees them:
    read again until `n_decisions` distinct (run, step) have a decision (re-sent copies count
    once: a worker still working through a backlog after a crash has sent some twice) or 120 s
    have passed."""
    inputs = [
        e
        for e in asyncio.run(read_all(s.bootstrap_servers, s.steps_topic, idle_s=2.0))
        if e["run_id"].startswith(prefix)
    ]
    assert len(inputs) == n_inputs
    deadline = time.monotonic() + 120
    while True:
        left = max(1.0, deadline - time.monotonic())
        live = [
            d
            for d in asyncio.run(
                read_all(s.bootstrap_servers, s.steering_topic, expect=n_decisions, timeout_s=left)
            )
            if d["run_id"].startswith(prefix)
        ]
        if len({(d["run_id"], d["step"]) for d in live}) >= n_decisions or time.monotonic() >= deadline:
            return inputs, live
        time.sleep(1.0)


def check_against_replay(inputs: list[dict], live: list[dict], patterns: Path | None = STARTER) -> Replayer:
    """Every step has a decision, re-sent copies are identical, and the first copies equal a
    replay of the input (E-traces from `patterns`, as the worker was seeded; None: an empty
    store, a worker without RB_PATTERNS_SEED). Returns the replayer, whose states the caller compares."""
    copies: dict[tuple[str, int], set[bytes]] = {}
    for d in live:
        copies.setdefault((d["run_id"], d["step"]), set()).add(strip(d))
    wanted = {(e["run_id"], e.get("step", 0)) for e in inputs if e["type"] != "run_finish"}
    missing = wanted - set(copies)
    assert not missing, f"{len(missing)} steps without a decision, e.g. {sorted(missing)[:5]}"
    # A decision whose state write had not reached the changelog when a worker died (or the
    # broker went away) is computed again from the same state: an identical copy.
    differing = [k for k, v in copies.items() if len(v) > 1]
    assert not differing, f"re-sent decisions that differ: {differing[:5]}"
    print(f"identical re-sent decisions: {len(live) - len(copies)}")

    store = QdrantPatternStore(models().full)
    if patterns is not None:
        store.upsert(read_file(patterns)[0])
    lines = [orjson.dumps({k: v for k, v in e.items() if k not in WIRE_ONLY}) for e in inputs]
    rp = Replayer(sem=semantics(), retriever=Retriever(store))
    offline = [d for d, _ in rp.run(lines) if d]
    first = {(d["run_id"], d["step"]): strip(d) for d in reversed(live)}
    # replay re-sends what the worker re-sends for a copy of an input: first copies compared
    want = {(d["run_id"], d["step"]): strip(d) for d in reversed(offline)}
    differ = sorted(k for k in first.keys() | want.keys() if first.get(k) != want.get(k))
    assert not differ, (
        f"{len(differ)} differ from replay, e.g. {differ[0]}:\n{first.get(differ[0])!r}\n{want.get(differ[0])!r}"
    )
    return rp


def check_states(w: WorkerProcess, rp: Replayer, run_ids: list[str]) -> None:
    """Each run's summary and step log on the worker (routed to the owner) equal the replay's."""
    for rid in run_ids:
        got = http_json(w, f"/runs/{rid}")
        want = rp.states[rid].summary()
        assert {k: got[k] for k in SUMMARY} == {k: want[k] for k in SUMMARY}, rid
        steps = http_json(w, f"/runs/{rid}/steps")["steps"]
        assert history(steps) == history(rp.states[rid].step_log_entries()), rid
