"""What one monitor adds to the core's per-step cost: the same tree with and without it.

    .venv/bin/python -m bench.monitor_ab --monitor data_instruction [--rounds 9] [--steps 200]

`bench.cost_compare` compares commits; a monitor's own cost is better read in one tree, the
suite with and without it (the default `Policy` built without that monitor), so nothing else
differs. Each round runs `bench.flat_cost.core` (synthetic healthy coding runs, monitors on)
in a child process without, then with the monitor, on the child's thread CPU clock; cells are
the medians of the rounds (min to max), cold (every step applied once) and warm (the step at
the index re-applied to the state before it), and the run state's size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

CHILD = r"""
import json, sys, time
time.perf_counter_ns = time.thread_time_ns
name, steps, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if name != "-":
    import streams.core.policy as P
    from streams.core.monitors.builtin import DEFAULT_MONITORS
    suite = tuple(m for m in DEFAULT_MONITORS if m.name != name)
    init = P.Policy.__init__
    def without(self, *a, **k):
        k.setdefault("monitors", suite)
        init(self, *a, **k)
    P.Policy.__init__ = without
from bench import flat_cost
flat_cost.log = lambda *a, **k: None
print("RESULT " + json.dumps({str(k): v for k, v in flat_cost.core(steps, 1, True, reps=reps).items()}))
"""


def child(without: str, steps: int, reps: int) -> dict[str, Any]:
    p = subprocess.run(
        [sys.executable, "-c", CHILD, without, str(steps), str(reps)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        raise SystemExit(
            f"monitor_ab: the child failed: {p.stderr.strip().splitlines()[-1:] or p.returncode}"
        )
    out: dict[str, Any] = json.loads(line[len("RESULT ") :])
    return out


def _cell(xs: list[float]) -> str:
    return f"{statistics.median(xs):.0f} ({min(xs):.0f} to {max(xs):.0f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A monitor's share of the core's per-step cost.")
    ap.add_argument("--monitor", default="data_instruction")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--reps", type=int, default=40)
    a = ap.parse_args(argv)
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    for r in range(a.rounds):
        runs["without"].append(child(a.monitor, a.steps, a.reps))
        runs["with"].append(child("-", a.steps, a.reps))
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    print(f"us per step (thread CPU), median of {a.rounds} rounds (min to max); without -> with {a.monitor}")
    print("| step | cold without | cold with | ratio | warm without | warm with | ratio | state bytes |")
    print("|---|---|---|---|---|---|---|---|")
    for idx in runs["with"][0]:
        cw = [o[idx][0] for o in runs["with"]]
        co = [o[idx][0] for o in runs["without"]]
        ww = [o[idx][2] for o in runs["with"]]
        wo = [o[idx][2] for o in runs["without"]]
        print(
            f"| {idx} | {_cell(co)} | {_cell(cw)} | {statistics.median(cw) / statistics.median(co):.2f}x "
            f"| {_cell(wo)} | {_cell(ww)} | {statistics.median(ww) / statistics.median(wo):.2f}x "
            f"| {runs['without'][0][idx][1]} -> {runs['with'][0][idx][1]} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
