"""Where a py-spy profile's event-loop time goes: `py-spy record --format raw` output, summed by
function (line numbers merged), for the main thread (the worker's event loop) only.

    .venv/bin/python -m bench.stacks bench/results/worker-profile-on.txt [--top 60]

Prints the share of the main thread's samples in each function (inclusive: the function or
anything it called), then the share spent in each function itself (self).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

MAIN = "_run_module_as_main"  # a stack of the main thread starts here (the others: threading)


def summarise(path: Path) -> tuple[int, Counter[str], Counter[str]]:
    """(main-thread samples, inclusive samples by function, self samples by function)."""
    incl: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        if not line.startswith(MAIN):
            continue
        stack, n_text = line.rsplit(" ", 1)
        n = int(n_text)
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        total += n
        for f in set(frames):
            incl[f] += n
        own[frames[-1]] += n
    return total, incl, own


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile", type=Path)
    ap.add_argument("--top", type=int, default=60)
    args = ap.parse_args(argv)
    total, incl, own = summarise(args.profile)
    print(f"main-thread samples: {total}")
    for title, counts in (("inclusive", incl), ("self", own)):
        print(f"\n| {title} share | function |\n|---:|---|")
        for f, n in counts.most_common(args.top):
            print(f"| {100 * n / max(total, 1):.1f}% | {f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
