"""Whether this tree's decisions are byte-identical to another commit's on the real dev runs.

    .venv/bin/python -m bench.replay_same --ref main [--source openhands_swe]

Each source file of `../shared/data/real-dev/` (default: all of them) is replayed once through
`streams.replay.Replayer` at `--ref` (a throwaway worktree) and here, in a child process each;
the child prints the SHA-256 of the decisions' bytes (one per line, as `replay` writes them),
their count and the dead-letters' count. `--decode`: every state is read back from the bytes
it was stored as before the run's next event (as a worker whose decoded-state cache misses),
not passed along decoded. Exit 0 when every source's decisions match, 1 when one differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.revisions import MeasureError, RevisionError, checked_out, measure_in

HERE = Path(__file__).resolve().parents[1]
REAL_DEV = HERE.parent / "shared" / "data" / "real-dev"
CHILD = r"""
import hashlib, json, sys
from streams.embeddings.models import load_models
from streams.kafka import wire
from streams.replay import Replayer
lines = [ln.rstrip(b"\r\n") for ln in open(sys.argv[1], "rb") if ln.strip()]
rp = Replayer(clock=lambda: 1_767_225_600.0, sem=load_models().semantics())
if sys.argv[2] == "decode":  # every state read back from its bytes (a worker's cache miss)
    keep = rp.runs.store
    rp.runs.store = lambda run_id, raw, prior, new: keep(run_id, raw, prior, None)
h, n, dl = hashlib.sha256(), 0, 0
for ln in lines:
    d, x = rp.feed(ln)
    if d is not None:
        h.update(wire.dumps(d) + b"\n")
        n += 1
    dl += x is not None
print("RESULT " + json.dumps({"sha": h.hexdigest(), "decisions": n, "deadletters": dl}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", required=True, help="the commit to compare with")
    ap.add_argument("--source", action="append", help="a file of real-dev without .jsonl (default: all)")
    ap.add_argument("--data", type=Path, default=REAL_DEV, help="the real-dev folder")
    ap.add_argument("--decode", action="store_true", help="read every state back from its bytes")
    args = ap.parse_args(argv)
    sources = args.source or sorted(p.stem for p in args.data.glob("*.jsonl"))
    differ = 0
    try:
        with checked_out([args.ref]) as trees:
            for src in sources:
                got = {
                    name: measure_in(
                        tree,
                        CHILD,
                        str(args.data / f"{src}.jsonl"),
                        "decode" if args.decode else "",
                        what="replay",
                    )
                    for name, tree in trees.items()
                }
                a, b = got.values()
                same = a == b
                differ += not same
                print(
                    f"{src}: {'same' if same else 'DIFFERENT'} "
                    f"({b['decisions']} decisions, {b['deadletters']} dead-letters)"
                    + ("" if same else f": {a} vs {b}"),
                    flush=True,
                )
    except (RevisionError, MeasureError) as e:
        print(f"replay_same: {e}", file=sys.stderr)
        return 2
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
