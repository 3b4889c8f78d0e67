"""The headline benchmarks in one command, one table: `make bench`.

    .venv/bin/python -m bench.headline [--rounds 3]

Runs, each as its own process against one local broker (started here unless one listens):
latency at 200 steps/s (50 runs, every path, `--rounds` rounds), throughput (200 runs x 60
steps, `--rounds` rounds), flat cost (core, steps 10 vs 1,000, `--rounds` repetitions) and
E-trace retrieval (2,000 patterns, `--rounds` rounds of 200 queries). Each figure is the
median of its rounds with min and max, next to its target. Every benchmark's own full output
is kept in bench/results/headline-<name>.txt, its figures in headline-<name>.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.common import commit, ensure_broker, fmt_spread, log, machine, results_dir, stop_broker

Check = Callable[[float], bool]


def _benches(rounds: int, smoke: bool = False) -> list[tuple[str, list[str]]]:
    r = str(rounds)
    if smoke:  # tiny sizes: the test suite checks the whole chain still runs
        return [
            ("latency", ["bench.latency", "--rates", "20", "--runs", "4", "--duration", "2", "--repeat", r]),
            (
                "throughput",
                ["bench.throughput", "--runs", "6", "--steps", "5", "--partitions", "2", "--repeat", r],
            ),
            ("flat_cost", ["bench.flat_cost", "--steps", "120", "--runs", "1", "--repeat", r]),
            (
                "etraces",
                ["bench.etrace_latency", "--patterns", "40", "--orgs", "2", "--queries", "6", "--repeat", r],
            ),
        ]
    return [
        ("latency", ["bench.latency", "--rates", "200", "--duration", "15", "--repeat", r]),
        ("throughput", ["bench.throughput", "--runs", "200", "--steps", "60", "--repeat", r]),
        ("flat_cost", ["bench.flat_cost", "--steps", "1000", "--runs", "2", "--repeat", r]),
        (
            "etraces",
            ["bench.etrace_latency", "--patterns", "2000", "--orgs", "20", "--queries", "200", "--repeat", r],
        ),
    ]


# (bench, figure key path, label, unit, target text, check)
ROWS: list[tuple[str, tuple[str, ...], str, str, str, Check | None]] = [
    (
        "latency",
        ("200", "ours p50 / hop"),
        "latency 200/s, everything on: p50 / raw hop",
        "x",
        "<= 3x",
        lambda v: v <= 3,
    ),
    (
        "latency",
        ("200", "ours p99 / hop"),
        "latency 200/s, everything on: p99 / raw hop",
        "x",
        "<= 5x",
        lambda v: v <= 5,
    ),
    (
        "latency",
        ("200", "ours p99 / no-etraces p99"),
        "latency 200/s: p99 E-traces on / off",
        "x",
        "<= 1.5x",
        lambda v: v <= 1.5,
    ),
    ("latency", ("200", "ours p50 ms"), "latency 200/s, everything on: p50", " ms", "", None),
    ("latency", ("200", "ours p99 ms"), "latency 200/s, everything on: p99", " ms", "", None),
    ("latency", ("200", "hop p99 ms"), "latency 200/s, raw hop: p99", " ms", "", None),
    (
        "latency",
        ("200", "E-trace waits past the deadline"),
        "decisions waiting on E-traces past the deadline",
        "",
        "0",
        lambda v: v == 0,
    ),
    ("latency", ("200", "E-trace waits > 1 ms"), "decisions waiting on E-traces > 1 ms", "", "", None),
    (
        "throughput",
        ("rb-streams worker, monitors + E-traces on / pass-through",),
        "throughput, everything on / pass-through Faust agent",
        "%",
        ">= 50%",
        lambda v: v >= 0.50,
    ),
    (
        "throughput",
        ("rb-streams worker, monitors + E-traces on events/s",),
        "throughput, everything on",
        " ev/s",
        "",
        None,
    ),
    ("throughput", ("pass-through Faust agent events/s",), "throughput, pass-through", " ev/s", "", None),
    (
        "throughput",
        ("rb-streams worker, monitors + E-traces on event-loop CPU us/event",),
        "worker event-loop CPU per event while draining, everything on",
        " us",
        "",
        None,
    ),
    (
        "throughput",
        ("rb-streams worker, monitors and E-traces off event-loop CPU us/event",),
        "worker event-loop CPU per event while draining, FSM alone",
        " us",
        "",
        None,
    ),
    (
        "throughput",
        ("rb-streams worker, monitors + E-traces on event-loop CPU / pass-through",),
        "worker event-loop CPU per event / pass-through's, everything on",
        "x",
        "<= 2.5x",
        lambda v: v <= 2.5,
    ),
    (
        "throughput",
        ("rb-streams worker, monitors and E-traces off event-loop CPU / pass-through",),
        "worker event-loop CPU per event / pass-through's, FSM alone",
        "x",
        "<= 1.6x",
        lambda v: v <= 1.6,
    ),
    (
        "throughput",
        ("rb-streams worker, monitors + E-traces on changelog bytes/event",),
        "changelog bytes per event as the broker stores them, everything on",
        " B",
        "",
        None,
    ),
    (
        "throughput",
        ("pass-through Faust agent event-loop CPU us/event",),
        "pass-through event-loop CPU per event while draining",
        " us",
        "",
        None,
    ),
    (
        "throughput",
        ("pass-through Faust agent busy cores",),
        "busy cores of the machine while the pass-through drains",
        " cores",
        "",
        None,
    ),
    (
        "throughput",
        ("rb-streams worker, monitors + E-traces on busy cores",),
        "busy cores of the machine while the worker drains, everything on",
        " cores",
        "",
        None,
    ),
    (
        "throughput",
        ("rb-streams worker, monitors on, E-traces off / pass-through",),
        "throughput, E-traces off / pass-through",
        "%",
        "",
        None,
    ),
    (
        "flat_cost",
        ("step 1000 / step 10, warm",),
        "core cost per step, step 1,000 / step 10 (warm)",
        "x",
        "<= 1.10x",
        lambda v: v <= 1.10,
    ),
    (
        "flat_cost",
        ("step 1000 / step 10, cold",),
        "core cost per step, step 1,000 / step 10 (cold)",
        "x",
        "",
        None,
    ),
    (
        "flat_cost",
        ("core us/step at step 10, cold",),
        "core cost per step at step 10 (cold)",
        " us",
        "",
        None,
    ),
    (
        "etraces",
        ("e2 answer (embed + search) p50 ms",),
        "E2 retrieval (embed + search): p50",
        " ms",
        "",
        None,
    ),
    (
        "etraces",
        ("e2 answer (embed + search) p99 ms",),
        "E2 retrieval (embed + search): p99",
        " ms",
        "",
        None,
    ),
    (
        "etraces",
        ("e1 answer (embed + search) p50 ms",),
        "E1 retrieval (embed + search): p50",
        " ms",
        "",
        None,
    ),
    ("etraces", ("e3 cached (10 s) p50 ms",), "E3 (cached scroll): p50", " ms", "", None),
]


def _fmt(sp: dict[str, float], unit: str) -> str:
    if unit == "%":
        return f"{sp['median']:.0%} ({sp['min']:.0%} to {sp['max']:.0%})"
    digits = 0 if unit in ("", " ev/s", " B") else 3 if unit == " ms" and sp["median"] < 1 else 2
    return fmt_spread(sp, "" if unit == " ev/s" else unit, digits)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3, help="rounds per benchmark (medians with min-max)")
    ap.add_argument("--only", help="comma-separated subset of: latency, throughput, flat_cost, etraces")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (the test suite's check that it runs)")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    out = results_dir()
    measured_on = commit()
    t_start = time.monotonic()
    started = ensure_broker()
    figures: dict[str, Any] = {}
    took: dict[str, float] = {}
    try:
        for name, cmd in _benches(args.rounds, args.smoke):
            if only is not None and name not in only:
                continue
            log(f"== {name}: python -m {' '.join(cmd)}")
            path = out / f"headline-{name}.json"
            path.unlink(missing_ok=True)
            t0 = time.monotonic()
            with open(out / f"headline-{name}.txt", "wb") as f:
                rc = subprocess.run(
                    [sys.executable, "-m", *cmd, "--json", str(path)], stdout=f, stderr=subprocess.STDOUT
                ).returncode
            took[name] = time.monotonic() - t0
            if rc != 0 or not path.exists():
                log(f"{name} failed (exit {rc}): see {out / f'headline-{name}.txt'}")
                return 1
            figures[name] = json.loads(path.read_text())["figures"]
            log(f"   {name} took {took[name]:.0f} s")
    finally:
        if started:
            stop_broker()

    print(f"\nmachine: {machine()}  date: {time.strftime('%Y-%m-%d')}  commit: {measured_on}")
    print(
        f"Each figure: median of {args.rounds} rounds (min to max), every ratio against a baseline of the same round."
    )
    print("| figure | median (min to max) | target | met |")
    print("|---|---|---|---|")
    missed = 0
    for bench, keys, label, unit, target, check in ROWS:
        if bench not in figures:
            continue
        node: Any = figures[bench]
        for k in keys:
            node = node.get(k) if isinstance(node, dict) else None
        if node is None:  # not measured at these sizes (smoke)
            continue
        met = ""
        if check is not None:
            ok = check(node["median"])
            missed += not ok
            met = "yes" if ok else "**no**"
        print(f"| {label} | {_fmt(node, unit)} | {target} | {met} |")
    total = time.monotonic() - t_start
    print(
        f"SUMMARY headline: {missed} target(s) missed; took {total / 60:.1f} min ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in took.items())
        + ")"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
