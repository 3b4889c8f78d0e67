"""The core's per-step CPU on the real dev runs, here against other commits, taking turns.

    .venv/bin/python -m bench.replay_cost --ref aa16bfd [--source openhands_swe] [--rounds 5]

`bench.cost_compare` times the synthetic coding fleet; real runs carry longer and more varied
results (a 4,000-char test log, a chat message with a code block), which is where per-text work
shows. Each commit is checked out in a throwaway worktree; a child process of that tree loads
the models and replays one source file of `../shared/data/real-dev/` once through
`streams.replay.Replayer` (the worker's pipeline over states kept in memory: cold, each step
applied once, as in the worker), timing every event on the thread CPU clock. Figure: the
events' total CPU over the file's step events, in us a step. The commits take turns, round
after round, so a busy minute hits every commit alike. Cells: median of the rounds (min to
max); ratio = median over the first `--ref`'s median.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.common import machine
from bench.revisions import MeasureError, RevisionError, checked_out, measure_in, print_table

HERE = Path(__file__).resolve().parents[1]
REAL_DEV = HERE.parent / "shared" / "data" / "real-dev"
SOURCES = ("openhands_swe", "captainagent")
CHILD = r"""
import json, sys, time
import orjson
from streams.embeddings.models import load_models
from streams.replay import Replayer
lines = [ln.rstrip(b"\r\n") for ln in open(sys.argv[1], "rb") if ln.strip()]
sem = load_models().semantics()
rp = Replayer(clock=lambda: 1_767_225_600.0, sem=sem)
total, steps = 0, 0
for ln in lines:
    t0 = time.thread_time_ns()
    rp.feed(ln)
    total += time.thread_time_ns() - t0
    steps += orjson.loads(ln).get("type") == "step"
print("RESULT " + json.dumps({"us": total / 1000.0 / max(steps, 1), "steps": steps}))
"""


def measure(tree: Path, path: Path) -> float:
    """us a step of one replay of `path` by the commit checked out at `tree`."""
    return float(measure_in(tree, CHILD, str(path), what="replay")["us"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", action="append", required=True, help="a commit to compare with (repeatable)")
    ap.add_argument(
        "--source", action="append", help=f"a file of real-dev without .jsonl (default: {SOURCES})"
    )
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data", type=Path, default=REAL_DEV, help="the real-dev folder")
    args = ap.parse_args(argv)
    sources = args.source or list(SOURCES)
    paths = {s: args.data / f"{s}.jsonl" for s in sources}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        print(f"replay_cost: not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        with checked_out(args.ref) as trees:
            got_all: dict[str, dict[str, list[float]]] = {name: {s: [] for s in sources} for name in trees}
            for r in range(args.rounds):
                for src, path in paths.items():
                    for name, tree in trees.items():
                        got_all[name][src].append(measure(tree, path))
                print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    except RevisionError as e:
        print(f"replay_cost: {e}", file=sys.stderr)
        return 2
    except MeasureError as e:
        print(f"replay_cost: {e}", file=sys.stderr)
        return 1
    print(f"\nmachine: {machine()}  clock: thread CPU  rounds: {args.rounds}")
    print_table(got_all, sources)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
