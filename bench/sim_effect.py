"""The demo's synthetic effect, measured: the simulator's responsive agents (streams/local/respond.py)
closed over the real core (as `rb-streams replay` runs it, no E-traces), each run once as a
treatment run (the agent reads each decision) and once as a control run (it gets an unsteered
decision: no text, no taint), the same seed in both.

    .venv/bin/python -m bench.sim_effect [--seeds 25] [--steps 30]

Printed: per behaviour and in all, success in each arm, the texts the agents weighed and
followed, and the calls the gate refused. The effect is the response model's, chosen, not
measured on agents (docs/experiments.md): this says what the demo's instrument should find.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Mapping
from typing import Any

import orjson

from streams.agent.gate import check
from streams.core.monitors import Semantics
from streams.embeddings.models import load_models
from streams.local.respond import RESPONSIVE, ResponsiveRun, told_by
from streams.replay import Replayer


def closed_loop(sem: Semantics, behaviour: str, steps: int, seed: int, control: bool) -> ResponsiveRun:
    """One run against the core, the agent reading each decision (`control`: none of them)."""
    r = Replayer(sem=sem, clock=lambda: 1_767_225_600.0)
    rid = f"sim-{behaviour}-{seed}"
    run = ResponsiveRun(behaviour, steps, seed)
    start = {"type": "run_start", "schema_version": 1, "run_id": rid, "task": run.task, "ts": 1.0}
    d, _ = r.feed(orjson.dumps(start))
    while True:
        seen: Mapping[str, Any] | None = None if control else d

        def allow(tool: str, args: Any, seen: Mapping[str, Any] | None = seen) -> bool:
            return check(seen, tool, args).allow

        s = run.next_step(told_by(seen), allow)
        if s is None:
            return run
        ev = {"type": "step", "schema_version": 1, "run_id": rid, "step": run.k, "ts": 1.0 + run.k, **s}
        d, _ = r.feed(orjson.dumps(ev))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=25)
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args(argv)
    sem = load_models().semantics()
    total: dict[str, Counter[str]] = {"treatment": Counter(), "control": Counter()}
    print("behaviour     arm        success  texts followed / weighed            refused")
    for b in RESPONSIVE:
        for arm in ("treatment", "control"):
            runs = [closed_loop(sem, b, a.steps, seed, arm == "control") for seed in range(a.seeds)]
            wins = sum(r.outcome() == "success" for r in runs)
            told: Counter[str] = Counter()
            complied: Counter[str] = Counter()
            for r in runs:
                told.update(r.told)
                complied.update(r.complied)
            followed = ", ".join(f"{m} {complied[m]}/{n}" for m, n in sorted(told.items())) or "-"
            refused = sum(r.refused for r in runs)
            total[arm].update({"runs": len(runs), "wins": wins})
            print(f"{b:<13} {arm:<10} {wins:>3}/{len(runs):<4} {followed:<36} {refused}")
    for arm, c in total.items():
        print(f"all           {arm:<10} {c['wins']}/{c['runs']} ({100 * c['wins'] / c['runs']:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
