"""Which E-trace guidance the demo fleet gets, and on which decision (quality, not speed).

    .venv/bin/python -m bench.etrace_hits [--seeds 5] [--steps 40]

The demo's synthetic agents (every behaviour, `--seeds` seeds each, the demo's run config:
org acme, Claude models) are replayed through the worker's core with the starter library in a
local Qdrant store, as `rb-streams replay` does. Printed: per tier, the injections and the
distinct patterns, and per run the (step, tier, pattern) of every E-trace injection, so two
versions of the code can be compared line by line (`--list`).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import orjson

from bench.common import STARTER, machine
from streams.embeddings.models import load_models
from streams.etraces.pattern_store import QdrantPatternStore
from streams.etraces.patterns import read_file
from streams.etraces.retrieval import Retriever
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.replay import Replayer

ROUTING = {"FAST": "claude-haiku-4-5", "SLOW": "claude-sonnet-4-6", "SKIP": "claude-sonnet-4-6"}


def fleet(seeds: int, steps: int) -> list[bytes]:
    ts = 1_767_225_600.0
    out: list[bytes] = []
    for behaviour in BEHAVIOURS:
        for seed in range(seeds):
            rid = f"demo-{behaviour}-{seed}"
            task, script = trajectory(behaviour, steps, seed)
            start = {
                "type": "run_start",
                "schema_version": 1,
                "run_id": rid,
                "task": task,
                "model": "claude-sonnet-4-6",
                "model_routing": ROUTING,
                "org_id": "acme",
                "ts": ts,
            }
            out.append(orjson.dumps(start))
            for k, payload in enumerate(script, start=1):
                ts += 2.0
                ev = {"type": "step", "schema_version": 1, "run_id": rid, "step": k, "ts": ts, **payload}
                out.append(orjson.dumps(ev))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--list", action="store_true", help="print every E-trace injection")
    args = ap.parse_args()
    models = load_models()
    tmp = Path(tempfile.mkdtemp(prefix="rb-etrace-hits-"))
    try:
        store = QdrantPatternStore(models.full, path=tmp / "store")
        store.upsert(read_file(STARTER)[0])
        rp = Replayer(sem=models.semantics(), retriever=Retriever(store), clock=lambda: 1_767_225_600.0)
        injections: list[tuple[str, int, str, str]] = []
        for decision, _ in rp.run(fleet(args.seeds, args.steps)):
            if decision is None:
                continue
            for inj in decision["injections"]:
                if inj["source"] != "monitor":
                    injections.append(
                        (decision["run_id"], decision["step"], inj["source"], str(inj["pattern_id"]))
                    )
        store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    runs = len(BEHAVIOURS) * args.seeds
    print(f"\nmachine: {machine()}  date: {time.strftime('%Y-%m-%d')}  runs: {runs} x {args.steps} steps")
    print("| tier | injections | runs with one | distinct patterns |")
    print("|---|---:|---:|---:|")
    by_tier = Counter(t for _, _, t, _ in injections)
    for tier in ("e1", "e2", "e3"):
        rows = [i for i in injections if i[2] == tier]
        print(
            f"| {tier} | {by_tier[tier]} | {len({r for r, _, _, _ in rows})} | {len({p for _, _, _, p in rows})} |"
        )
    if args.list:
        for rid, step, tier, pid in injections:
            if tier != "e3":
                print(f"{rid} step {step} {tier} {pid}")
    print(
        f"SUMMARY etrace_hits: E1 {by_tier['e1']}, E2 {by_tier['e2']}, E3 {by_tier['e3']} injections "
        f"over {runs} demo runs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
