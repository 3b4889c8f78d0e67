"""Compliance baseline (issue 50 item 3): on the real dev runs replayed as control runs, how
often the behaviour a monitor would have steered stopped by itself.

    .venv/bin/python -m bench.compliance [--source agentdojo ...] [--data DIR]

Every run of every source is put in one experiment whose holdout is 1 (every run control: a
value only a bench may build; the settings cap it at 0.5), replayed through
`streams.replay.Replayer` (the worker's pipeline). The runs' own agents never saw a text, so a
would-be intervention's check (`core.compliance`: within WATCH_STEPS steps, did the flagged
behaviour stop?) measures what the agent did unprompted: the baseline a live treatment arm's
"stopped when told" must beat. Also checked on the way: every sent decision is unsteered (no
text, the run's own model, no taint, no stop); a steered one makes the bench fail (exit 1).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from streams.core import compliance
from streams.core.holdout import Experiment, Experiments
from streams.core.policy import Policy

HERE = Path(__file__).resolve().parents[1]
REAL_DEV = HERE.parent / "shared" / "data" / "real-dev"
SOURCES = (
    "swe_agent_java",
    "mini_swe_agent",
    "tau_retail",
    "captainagent",
    "openhands_swe",
    "trail_gaia",
    "agentdojo",
)
ALL_CONTROL = Experiments(Experiment("compliance-baseline", 1.0, "bench"))


def steered(d: dict[str, Any], own: str | None) -> str | None:
    """What in a sent decision would steer the agent (None: nothing)."""
    if d.get("arm") != "control":
        return "no control arm"
    if d["inject"] or d["injection_text"] is not None or d["injections"]:
        return "a text"
    if d["model"] != own:
        return f"model {d['model']!r}"
    if d.get("taint") or d.get("sanctioned"):
        return "a taint list"
    if d["action"] != "continue" or d["action_reason"] is not None:
        return f"action {d['action']}"
    return None


def replay_source(path: Path, sem: Any) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """(compliance summed over the source's runs, counts: runs, decisions, would-be texts)."""
    from streams.replay import Replayer

    rp = Replayer(sem=sem, policy=Policy().with_experiments(ALL_CONTROL), clock=lambda: 1_767_225_600.0)
    n = {"runs": 0, "decisions": 0, "would_be_texts": 0, "steered": 0}
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        d, _ = rp.feed(line)
        if d is None:
            continue
        n["decisions"] += 1
        st = rp.states[d["run_id"]]
        if steered(dict(d), st.config.model) is not None:
            n["steered"] += 1
    total: dict[str, dict[str, int]] = {}
    for st in rp.states.values():
        n["runs"] += 1
        n["would_be_texts"] += st.injections_by_source.get("monitor", 0)
        total = compliance.merge(total, compliance.summary(st))
    return total, n


def rate(c: dict[str, int]) -> str:
    decided = c["complied"] + c["ignored"]
    return f"{100.0 * c['complied'] / decided:.0f}%" if decided else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--source", action="append", help=f"a file of real-dev without .jsonl (default: all {len(SOURCES)})"
    )
    ap.add_argument("--data", type=Path, default=REAL_DEV, help="the real-dev folder")
    args = ap.parse_args(argv)
    sources = args.source or list(SOURCES)
    paths = {s: args.data / f"{s}.jsonl" for s in sources}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        print(f"compliance: not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    from tests.models import semantics

    sem = semantics()
    fleet: dict[str, dict[str, int]] = {}
    rows = []
    bad = 0
    t0 = time.perf_counter()
    for src, path in paths.items():
        total, n = replay_source(path, sem)
        bad += n["steered"]
        fleet = compliance.merge(fleet, total)
        rows.append((src, total, n))
    argv_shown = " ".join(f"--source {s}" for s in args.source or [])
    print(f"command: .venv/bin/python -m bench.compliance {argv_shown}".rstrip())
    print(f"({time.perf_counter() - t0:.0f} s; window: {compliance.WATCH_STEPS} steps)\n")
    print("| source | runs | decisions | would-be monitor texts | sent steered |")
    print("|---|---:|---:|---:|---:|")
    for src, _, n in rows:
        print(f"| {src} | {n['runs']} | {n['decisions']} | {n['would_be_texts']} | {n['steered']} |")
    print(
        "\n| monitor | would-be interventions checked | stopped by itself | went on | pending at the end | stopped by itself (of decided) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name in compliance.TESTED:
        c = fleet.get(name, {"complied": 0, "ignored": 0, "pending": 0})
        checked = c["complied"] + c["ignored"] + c["pending"]
        print(f"| {name} | {checked} | {c['complied']} | {c['ignored']} | {c['pending']} | {rate(c)} |")
    for name in compliance.UNTESTED:
        print(f"| {name} | no natural test: not counted | | | | |")
    print("\nper source (stopped by itself / decided):")
    for src, total, _ in rows:
        cells = [f"{n}: {c['complied']}/{c['complied'] + c['ignored']}" for n, c in total.items()]
        print(f"  {src}: {', '.join(cells) or 'no would-be intervention checked'}")
    if bad:
        print(f"\nFAIL: {bad} sent control decisions carried steering", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
