"""The core's per-step CPU here against other commits, measured in one run, in turn.

    .venv/bin/python -m bench.cost_compare --ref 325cdad [--ref 7a2e013] [--rounds 5]

Each commit is checked out in a throwaway worktree and measured by its own
`bench.flat_cost.core` (the same method in every commit: the worker's per-event work minus
Kafka, cold and warm, monitors on and off) in a child process; the commits take turns, round
after round, so a busy minute of the machine hits every commit alike. The clock is the child's
thread CPU time (`--clock cpu`, the default): what the core costs, not how long the machine made
it wait (other processes on a 2-core machine stretch wall time, not CPU time). `--clock wall` is
`bench.flat_cost`'s own clock. Cells: median of the rounds (min to max); ratio = median over
the first `--ref`'s median.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.common import machine
from bench.revisions import MeasureError, RevisionError, checked_out, measure_in, print_table

HERE = Path(__file__).resolve().parents[1]
CELLS = (  # (label, monitors, index, 0 = cold / 2 = warm)
    ("monitors on, cold, step 10", True, "10", 0),
    ("monitors on, cold, step 1000", True, "1000", 0),
    ("monitors on, warm, step 1000", True, "1000", 2),
    ("monitors off, cold, step 10", False, "10", 0),
    ("monitors off, cold, step 1000", False, "1000", 0),
)
CHILD = """
import json, sys, time
if sys.argv[1] == "cpu":
    time.perf_counter_ns = time.thread_time_ns
from bench import flat_cost
flat_cost.log = lambda *a, **k: None
res = flat_cost.core(int(sys.argv[2]), int(sys.argv[3]), monitors=sys.argv[4] == "on", reps=int(sys.argv[5]))
print("RESULT " + json.dumps({str(k): v for k, v in res.items()}))
"""


def measure(tree: Path, clock: str, steps: int, runs: int, monitors: bool, reps: int) -> dict[str, Any]:
    """One `flat_cost.core` run of the commit checked out at `tree`."""
    args = (clock, str(steps), str(runs), "on" if monitors else "off", str(reps))
    return measure_in(tree, CHILD, *args, what="flat_cost.core")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", action="append", required=True, help="a commit to compare with (repeatable)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--reps", type=int, default=50, help="warm re-applications per index")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = ap.parse_args(argv)
    try:
        with checked_out(args.ref) as trees:
            got_all: dict[str, dict[str, list[float]]] = {name: {c[0]: [] for c in CELLS} for name in trees}
            for r in range(args.rounds):
                for name, tree in trees.items():
                    for monitors in (True, False):
                        res = measure(tree, args.clock, args.steps, args.runs, monitors, args.reps)
                        for label, mon, idx, col in CELLS:
                            if mon == monitors and idx in res:
                                got_all[name][label].append(float(res[idx][col]))
                print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    except RevisionError as e:
        print(f"cost_compare: {e}", file=sys.stderr)
        return 2
    except MeasureError as e:
        print(f"cost_compare: {e}", file=sys.stderr)
        return 1
    print(
        f"\nmachine: {machine()}  clock: {args.clock}  rounds: {args.rounds}  steps: {args.steps}  runs: {args.runs}"
    )
    print_table(got_all, [c[0] for c in CELLS])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
