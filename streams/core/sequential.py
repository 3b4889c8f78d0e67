"""An anytime-valid test of "treatment succeeds less (or more) often than control".

Why this test. A user watches an experiment and looks after every run, and the guard acts on
the first look that crosses the line: a fixed-n test checked that way rejects a true null far
more often than its alpha. The statistic here is a test martingale, so Ville's inequality
bounds the chance that it *ever* reaches 1/alpha under the null by alpha, however often it is
looked at and whenever the looking stops.

How. Runs are paired in arrival order within each arm: the i-th treatment run with the i-th
control run (FIFO). Arm assignment does not depend on outcomes, so the pairs are independent,
and a discordant pair (one run succeeded, the other not) is "control won" with probability
q = p_C(1-p_T) / (p_T(1-p_C) + p_C(1-p_T)): exactly 1/2 whenever p_T = p_C, whatever the
common rate (the conditional argument behind McNemar's test). So the composite two-sample
null becomes the simple null q = 1/2 on the discordant pairs, and a mixture of likelihood
ratios over a fixed grid of alternatives q > 1/2 is a nonnegative martingale with mean 1
under it (the mixture SPRT, Robbins 1970; Wald 1947; see Ramdas et al., "Game-theoretic
statistics and safe anytime-valid inference", Statist. Sci. 2023). Under the one-sided null
"treatment is not worse" (p_T >= p_C) q <= 1/2 and every factor has mean <= 1, so the test
stays valid for it too. The grid is a discrete prior: no special functions, exact in floats,
vectorisable for the simulations in the tests.

What it costs. Only paired runs count: with a holdout h < 0.5 the treatment runs beyond the
control arm's count wait unpaired (kept up to `MAX_UNPAIRED`; past that the newest are not
queued, a choice that depends on arm counts only, never on an outcome, so the pairs stay
independent). A 10% holdout detects an effect roughly as fast as a 50/50 experiment with
as many control runs.

No package does this without a heavy stack: savvi (a Dirichlet-multinomial test that needs
the assignment probability, which outcome records do not carry) pulls cvxpy and scipy;
confseq is a C++ source build that requires matplotlib, pandas and scipy at install.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

Side = Literal["worse", "better", "differs"]

# Alternatives for q (the chance that control wins a discordant pair), equal weights. 0.6 is
# a 10-point drop at 50% success, 0.65 a 15-point one; the upper points catch large harms fast.
ALTERNATIVES = (0.55, 0.6, 0.65, 0.7, 0.8, 0.9)
_Q = np.array(ALTERNATIVES)
_LOG_UP = np.log(2 * _Q)  # factor of a pair control won
_LOG_DOWN = np.log(2 * (1 - _Q))  # factor of a pair treatment won
MAX_UNPAIRED = 4096


def log_e(
    control_won: npt.ArrayLike, discordant: npt.ArrayLike, side: Side = "worse"
) -> npt.NDArray[np.float64]:
    """The log e-value after `discordant` discordant pairs, `control_won` of them won by
    control (arrays broadcast: the tests evaluate whole simulated paths at once). "worse":
    treatment worse than control; "better": the mirror; "differs": the average of both (a
    mixture of two martingales is one, so it is valid at the same level, two-sided)."""
    k = np.asarray(control_won, dtype=np.float64)
    m = np.asarray(discordant, dtype=np.float64)
    if side == "worse":
        return _log_mix(k, m - k)
    if side == "better":
        return _log_mix(m - k, k)
    return np.logaddexp(_log_mix(k, m - k), _log_mix(m - k, k)) - math.log(2)


def _log_mix(up: npt.NDArray[np.float64], down: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    terms = up[..., None] * _LOG_UP + down[..., None] * _LOG_DOWN
    top = terms.max(axis=-1)
    mean = np.exp(terms - top[..., None]).mean(axis=-1)
    out: npt.NDArray[np.float64] = top + np.log(mean)
    return out


def threshold(alpha: float) -> float:
    """The log e-value at which the test rejects at level alpha (Ville: e >= 1/alpha)."""
    return math.log(1.0 / alpha)


@dataclass
class PairedStream:
    """One comparison, fed runs one at a time: counts per arm, the unpaired runs of the arm
    ahead (bounded), and the discordant pair counts the test reads. O(1) per run."""

    runs: dict[str, int] = field(default_factory=lambda: {"treatment": 0, "control": 0})
    successes: dict[str, int] = field(default_factory=lambda: {"treatment": 0, "control": 0})
    pairs: int = 0
    control_won: int = 0
    discordant: int = 0
    _waiting: deque[tuple[str, bool]] = field(default_factory=deque)

    def add(self, arm: str, success: bool) -> None:
        """Count a run of `arm` ("treatment" | "control"), and pair it if the other arm waits."""
        self.runs[arm] += 1
        self.successes[arm] += int(success)
        if self._waiting and self._waiting[0][0] != arm:
            other = self._waiting.popleft()[1]
            treated, control = (success, other) if arm == "treatment" else (other, success)
            self.pairs += 1
            if treated != control:
                self.discordant += 1
                self.control_won += int(control)
        elif len(self._waiting) < MAX_UNPAIRED:
            self._waiting.append((arm, success))

    def log_e(self, side: Side = "worse") -> float:
        return float(log_e(self.control_won, self.discordant, side))

    def rejects(self, alpha: float, side: Side = "worse") -> bool:
        return self.log_e(side) >= threshold(alpha)
