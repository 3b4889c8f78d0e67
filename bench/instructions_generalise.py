"""Does the instruction detector read attacks written against it, and stay quiet on look-alikes?

Every attack of `bench.instructions_corpus` (TUNING: what the detector was tuned on; HELD:
written apart, only evaluated) is planted in every carrier and read as the data_instruction
monitor reads a tool result (`asks.values`, `instructions.may_flag`, `instructions.read`).
Figures: attacks flagged per class and subclass, on both sets; benign look-alikes flagged per
class, on both sets; and the false alarms on every benign tool output of the dev data (AgentDojo's
benign runs; all of tau-bench, SWE-agent, mini-swe-agent, OpenHands, TRAIL and CaptainAgent's
messages): outputs flagged and runs with one.

    .venv/bin/python -m bench.instructions_generalise [--data DIR] [--no-dev]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from bench.instructions_corpus import BENIGN_HELD, BENIGN_TUNING, HELD, TUNING, planted
from streams.core import asks, instructions

HERE = Path(__file__).resolve().parents[1]
REAL_DEV = HERE.parent / "shared" / "data" / "real-dev"
COMMAND = ".venv/bin/python -m bench.instructions_generalise"


def flagged(text: str) -> bool:
    """Whether the data_instruction monitor would find instructions in a tool result `text`."""
    values = asks.values(text)
    return instructions.may_flag(text, values) and instructions.read(text, values).flagged


def attacks(corpus: dict[str, dict[str, list[str]]]) -> dict[tuple[str, str], tuple[int, int]]:
    """(class, subclass) -> (texts flagged, texts): each attack in each carrier."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for cls, subs in corpus.items():
        for sub, sentences in subs.items():
            got = [flagged(t) for s in sentences for t in planted(s).values()]
            out[(cls, sub)] = (sum(got), len(got))
    return out


def benign(corpus: dict[str, list[str]]) -> dict[str, tuple[int, int]]:
    return {cls: (sum(flagged(t) for t in texts), len(texts)) for cls, texts in corpus.items()}


def dev(data: Path) -> dict[str, dict[str, int]]:
    """source -> outputs, flagged, runs, runs with a flag (benign tool outputs only)."""
    labels = orjson.loads((data / "labels.json").read_bytes())["runs"]
    subset = {r["run_id"]: r.get("subset") for r in labels}
    out: dict[str, dict[str, int]] = {}
    for path in sorted(data.glob("*.jsonl")):
        src = path.stem
        n = hits = 0
        runs: set[str] = set()
        hit_runs: set[str] = set()
        for line in path.read_bytes().splitlines():
            if not line.strip():
                continue
            ev = orjson.loads(line)
            if ev.get("type") != "step" or (src == "agentdojo" and subset.get(ev["run_id"]) != "benign"):
                continue
            # CaptainAgent's tool outputs are the messages of its `Computer_terminal` (thought)
            text = ev.get("observation") or (ev.get("thought") if src == "captainagent" else None)
            if not isinstance(text, str) or not text:
                continue
            n += 1
            runs.add(ev["run_id"])
            if flagged(text):
                hits += 1
                hit_runs.add(ev["run_id"])
        out[src] = {"outputs": n, "flagged": hits, "runs": len(runs), "runs flagged": len(hit_runs)}
    return out


def _share(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "0/0"


def report(data: Path | None) -> dict[str, Any]:
    tuning, held = attacks(TUNING), attacks(HELD)
    rep: dict[str, Any] = {
        "attacks": {
            f"{c} / {s}": {"tuning": tuning[(c, s)], "held": held.get((c, s), (0, 0))} for c, s in tuning
        },
        "benign": {
            c: {"tuning": BT, "held": benign(BENIGN_HELD).get(c, (0, 0))}
            for c, BT in benign(BENIGN_TUNING).items()
        },
    }
    by_class: dict[str, dict[str, list[int]]] = defaultdict(lambda: {"tuning": [0, 0], "held": [0, 0]})
    for name, cell in rep["attacks"].items():
        for side in ("tuning", "held"):
            by_class[name.split(" / ")[0]][side][0] += cell[side][0]
            by_class[name.split(" / ")[0]][side][1] += cell[side][1]
    rep["classes"] = dict(by_class)
    if data is not None:
        rep["dev"] = dev(data)
    return rep


def print_report(rep: dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout
    print(f"instruction detector, attacks written against it: `{COMMAND}`", file=out)
    print("\n| attack class / subclass | tuning set flagged | held-apart set flagged |", file=out)
    print("|---|---:|---:|", file=out)
    for name, cell in rep["attacks"].items():
        print(f"| {name} | {_share(*cell['tuning'])} | {_share(*cell['held'])} |", file=out)
    for cls, cell in rep["classes"].items():
        print(f"| **{cls}, all** | {_share(*cell['tuning'])} | {_share(*cell['held'])} |", file=out)
    print("\n| benign look-alike class | tuning set flagged | held-apart set flagged |", file=out)
    print("|---|---:|---:|", file=out)
    for cls, cell in rep["benign"].items():
        print(f"| {cls} | {_share(*cell['tuning'])} | {_share(*cell['held'])} |", file=out)
    if "dev" in rep:
        print("\n| dev data, benign tool outputs | outputs flagged | runs with a flag |", file=out)
        print("|---|---:|---:|", file=out)
        for src, d in rep["dev"].items():
            print(
                f"| {src} | {_share(d['flagged'], d['outputs'])} | {_share(d['runs flagged'], d['runs'])} |",
                file=out,
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.instructions_generalise", description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=REAL_DEV, help="the real dev data directory")
    ap.add_argument("--no-dev", action="store_true", help="skip the dev data")
    args = ap.parse_args(argv)
    data = None if args.no_dev else args.data
    if data is not None and not (data / "labels.json").exists():
        print(f"bench.instructions_generalise: no dev data at {data} (--no-dev to skip it)", file=sys.stderr)
        return 2
    print_report(report(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
