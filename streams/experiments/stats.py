"""Intervals for a success rate and for the difference between two arms.

Written by hand (a few lines of closed-form arithmetic over numpy, vectorised for the
simulations in the tests) rather than taken from statsmodels, whose install brings scipy,
pandas and patsy into the worker for two formulas.

- Wilson score interval (Wilson 1927): keeps its coverage near nominal at small n and at rates
  near 0 or 1, where the Wald interval p +- z*sqrt(p(1-p)/n) collapses.
- Newcombe's hybrid score interval for p1 - p2 (Newcombe 1998, method 10): combines the two
  Wilson intervals; the standard choice for a difference of independent proportions.

These are fixed-n intervals: read at one chosen time they cover at 95%; looked at after every
run they do not. The anytime-valid verdict is `streams.core.sequential`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Z95 = 1.959963984540054  # the 97.5% normal quantile


def wilson(
    successes: npt.ArrayLike, n: npt.ArrayLike, z: float = Z95
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(low, high) of the Wilson score interval; n = 0 gives (0, 1): nothing is known."""
    s = np.asarray(successes, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    safe = np.where(nn > 0, nn, 1.0)
    p = s / safe
    z2 = z * z
    denom = 1.0 + z2 / safe
    centre = (p + z2 / (2 * safe)) / denom
    half = z * np.sqrt(p * (1 - p) / safe + z2 / (4 * safe * safe)) / denom
    low = np.where(nn > 0, np.clip(centre - half, 0.0, 1.0), 0.0)
    high = np.where(nn > 0, np.clip(centre + half, 0.0, 1.0), 1.0)
    return low, high


def newcombe(
    s1: npt.ArrayLike, n1: npt.ArrayLike, s2: npt.ArrayLike, n2: npt.ArrayLike, z: float = Z95
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(difference, low, high) for p1 - p2, Newcombe's hybrid score interval."""
    a1, b1 = np.asarray(s1, dtype=np.float64), np.asarray(n1, dtype=np.float64)
    a2, b2 = np.asarray(s2, dtype=np.float64), np.asarray(n2, dtype=np.float64)
    p1 = a1 / np.where(b1 > 0, b1, 1.0)
    p2 = a2 / np.where(b2 > 0, b2, 1.0)
    l1, u1 = wilson(a1, b1, z)
    l2, u2 = wilson(a2, b2, z)
    d = p1 - p2
    low = d - np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return d, np.maximum(low, -1.0), np.minimum(high, 1.0)
