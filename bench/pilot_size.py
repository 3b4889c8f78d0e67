"""How many runs a pilot needs: the table of docs/experiments.md ("Running a pilot on a real fleet").

For a two-sided test of two proportions at level alpha with power 1 - beta (the normal
approximation, pooled variance under the null), the runs needed to detect a difference `d` in
success rate from a base rate `p`, with a share `h` of the runs held out as control:

    N = (z_a * sqrt(pbar * (1 - pbar) * (1/h + 1/(1-h)))
         + z_b * sqrt(p0 * (1 - p0) / h + p1 * (1 - p1) / (1 - h)))**2 / d**2

(total runs; h = 0.5 gives N/2 per arm, the textbook formula). This is a fixed-horizon test,
looked at once; an anytime-valid test (the report's, safe to look at after every run) pays for
that with more runs: read these as the lower bound.

    .venv/bin/python -m bench.pilot_size
"""

from __future__ import annotations

import argparse
import math
from statistics import NormalDist

BASES = (0.30, 0.50, 0.70)
DIFFS = (0.05, 0.10, 0.15)
HOLDOUTS = (0.5, 0.2, 0.1)


def total_runs(p0: float, d: float, holdout: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Runs (both arms) for power `power` at `alpha` (two-sided) to detect p0 -> p0 + d."""
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be between 0 and 1, got {holdout}")
    p1 = p0 + d
    if not (0 < p0 < 1 and 0 < p1 < 1 and d != 0):
        raise ValueError(f"rates must be in (0, 1) and differ: {p0} -> {p1}")
    z_a = NormalDist().inv_cdf(1 - alpha / 2)
    z_b = NormalDist().inv_cdf(power)
    h, t = holdout, 1 - holdout
    pbar = h * p0 + t * p1
    null = z_a * math.sqrt(pbar * (1 - pbar) * (1 / h + 1 / t))
    alt = z_b * math.sqrt(p0 * (1 - p0) / h + p1 * (1 - p1) / t)
    return math.ceil((null + alt) ** 2 / d**2)


def table(alpha: float = 0.05, power: float = 0.8) -> str:
    """A Markdown table: per base rate and difference, runs per arm at holdout 0.5 and the
    fleet's total runs at each holdout."""
    head = ["base rate", "difference", "runs per arm (holdout 0.5)"]
    head += [f"total runs, holdout {h}" for h in HOLDOUTS]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in BASES:
        for d in DIFFS:
            per_arm = math.ceil(total_runs(p, d, 0.5, alpha, power) / 2)
            cells = [f"{p:.0%}", f"+{d * 100:.0f} points", f"{per_arm:,}"]
            cells += [f"{total_runs(p, d, h, alpha, power):,}" for h in HOLDOUTS]
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--power", type=float, default=0.8)
    a = ap.parse_args(argv)
    print(table(a.alpha, a.power))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
