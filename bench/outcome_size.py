"""What the outcome counters add to the run state, and the records on the real dev runs.

    .venv/bin/python -m bench.outcome_size [--data DIR]

Replays every dev source through the core (`Replayer`, as `rb-streams replay`) and, for each
run's stored state after every event, compares its table encoding with the same state
without the outcome counters (the encoding before them: nothing else differs, decisions are
unchanged). Also checks each source's outcome records: one per run, valid against
outcome.schema.json. Prints one JSON object per source and a total.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import orjson
from jsonschema import Draft202012Validator

from streams.embeddings.models import load_models
from streams.replay import Replayer
from streams.shared.contract import load_schema

REAL_DEV = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "real-dev"
COUNTERS = (
    "model_calls",
    "usage",
    "cost_usd",
    "cost_estimated",
    "interventions",
    "escalations",
    "stops",
    "first_fire",
    "next_model",
    "first_ts",
)


def measure(path: Path, rp: Replayer, check: Draft202012Validator) -> dict[str, object]:
    added: list[int] = []
    sizes: list[int] = []
    records: list[dict[str, object]] = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        raw = orjson.loads(line)
        _, _, rec = rp.take(line)
        if rec is not None:
            check.validate(rec)
            records.append(rec)
        st = rp.states.get(str(raw.get("run_id")))
        if st is None:
            continue
        full = st.encode()
        d = orjson.loads(full)
        before = orjson.dumps({k: v for k, v in d.items() if k not in COUNTERS})
        sizes.append(len(full))
        added.append(len(full) - len(before))
    runs = {r["run_id"] for r in records}
    return {
        "source": path.stem,
        "states": len(sizes),
        "state_bytes_median": statistics.median(sizes),
        "added_bytes_median": statistics.median(added),
        "added_bytes_max": max(added),
        "added_share_median": round(statistics.median(a / s for a, s in zip(added, sizes, strict=True)), 4),
        "outcome_records": len(records),
        "runs_with_a_record": len(runs),
        "outcomes": sorted({str(r["outcome"]).split(":")[0] for r in records}),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REAL_DEV)
    args = ap.parse_args()
    sem = load_models().semantics()
    check = Draft202012Validator(load_schema("outcome"))
    for path in sorted(args.data.glob("*.jsonl")):
        rp = Replayer(sem=sem, clock=lambda: 1_767_225_600.0)
        print(orjson.dumps(measure(path, rp, check)).decode(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
