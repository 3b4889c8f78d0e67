"""MAST's "no verification" on the dev chats (issue 41: unverified answers in chats >= 50%, false
<= 10%), a proxy: there is no such label in the dev data.

- unverified: CaptainAgent chats whose annotated decisive mistake (Who&When's `mistake_reason`)
  says nothing was verified (UNVERIFIED below); caught = a `verification_skip` fire in the chat.
- checked: chats in which code the team ran succeeded (`exitcode: 0`) within the 3 messages before
  the first TERMINATE; false = a `verification_skip` fire in the chat.

    PYTHONPATH=$PWD HF_HUB_OFFLINE=1 .venv/bin/python -m bench.chat_verification
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import orjson

from bench.captainagent_convert import convert_lines, runs_of, step_numbers
from bench.common import load_labels
from bench.quality import RunRecord, _renumbered, replay_runs
from streams.local.broker import REPO

UNVERIFIED = re.compile(
    r"fabricat|hallucin|not verif|without (further )?verif|did not (perform any )?verif|does not (actually )?verif",
    re.IGNORECASE,
)
SKIP = "verification_skip"


def checked_chats(raw: list[bytes]) -> set[str]:
    """Chats whose code ran successfully within the 3 messages before the first TERMINATE."""
    out: set[str] = set()
    for run in runs_of(raw):
        steps = [e for e in run if e.get("type") == "step"]
        for i, ev in enumerate(steps):
            if "TERMINATE" in (ev.get("thought") or "")[-40:]:
                if any(
                    e.get("action") == "Computer_terminal"
                    and (e.get("thought") or "").startswith("exitcode: 0")
                    for e in steps[max(0, i - 3) : i]
                ):
                    out.add(str(run[0].get("run_id")))
                break
    return out


def figures(recs: list[RunRecord], checked: set[str]) -> dict[str, object]:
    fired = {r.run_id for r in recs if any(SKIP in s.fired for s in r.steps)}
    unverified = [r.run_id for r in recs if UNVERIFIED.search(str(r.label.get("mistake_reason", "")))]
    return {
        "unverified": len(unverified),
        "unverified_caught": sorted(set(unverified) & fired),
        "checked": len(checked),
        "checked_fired": sorted(checked & fired),
        "chats_fired": len(fired),
        "chats": len(recs),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "real-dev")
    args = ap.parse_args(argv)
    path = args.data / "captainagent.jsonl"
    if not path.is_file():
        print(f"chat_verification: no {path}")
        return 2
    labels = load_labels(args.data)
    raw = path.read_bytes().splitlines()
    renumbered = _renumbered(labels, {run[0].get("run_id"): step_numbers(run) for run in runs_of(raw)})
    checked = checked_chats(raw)
    for form, recs in (
        ("with agent", replay_runs("captainagent", list(convert_lines(raw)), renumbered)),
        ("as recorded", replay_runs("captainagent", raw, labels)),
    ):
        f = figures(recs, checked)
        print(f"captainagent ({form}): {orjson.dumps(f).decode()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
