"""Simulated experiments for the sequential test and the guard, vectorised over experiments."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from streams.core.sequential import Side, log_e, threshold


def experiments(
    rng: np.random.Generator, p_treatment: float, p_control: float, holdout: float, runs: int, n: int
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """(is_control, success), each (n experiments, runs) in arrival order."""
    control = rng.random((n, runs)) < holdout
    p = np.where(control, p_control, p_treatment)
    return control, rng.random((n, runs)) < p


def log_e_per_run(
    control: npt.NDArray[np.bool_], success: npt.NDArray[np.bool_], side: Side
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The test's log e-value after every run (FIFO pairs, as `PairedStream`), and the runs of
    each arm so far: the statistic a user looking after every run sees."""
    n, runs = control.shape
    n_c = np.cumsum(control, axis=1)
    n_t = np.cumsum(~control, axis=1)
    # the i-th treatment run's and i-th control run's outcomes, in their arm's order
    t_out = np.zeros((n, runs + 1), dtype=bool)
    c_out = np.zeros((n, runs + 1), dtype=bool)
    rows = np.repeat(np.arange(n), runs).reshape(n, runs)
    t_out[rows[~control], (n_t - 1)[~control]] = success[~control]
    c_out[rows[control], (n_c - 1)[control]] = success[control]
    won = np.cumsum(c_out & ~t_out, axis=1)  # control won pair j (prefix counts)
    disc = np.cumsum(c_out ^ t_out, axis=1)
    pairs = np.minimum(n_t, n_c)  # FIFO: pairs formed by run r
    idx = np.maximum(pairs - 1, 0)
    k = np.where(pairs > 0, np.take_along_axis(won, idx, axis=1), 0)
    m = np.where(pairs > 0, np.take_along_axis(disc, idx, axis=1), 0)
    # the statistic takes few distinct (k, m) values: evaluate each once
    code = k.astype(np.int64) * (runs + 1) + m
    uniq, inv = np.unique(code, return_inverse=True)
    values = log_e(uniq // (runs + 1), uniq % (runs + 1), side)
    return values[inv].reshape(n, runs), n_t, n_c


def first_rejection(
    le: npt.NDArray[np.float64],
    n_t: npt.NDArray[np.int64],
    n_c: npt.NDArray[np.int64],
    alpha: float,
    min_runs: int,
) -> npt.NDArray[np.int64]:
    """The 1-based run at which the test first rejects (with min_runs per arm), 0: never."""
    hit = (le >= threshold(alpha)) & (n_t >= min_runs) & (n_c >= min_runs)
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)


def ever_rejects(
    rng: np.random.Generator,
    p_treatment: float,
    p_control: float,
    holdout: float,
    runs: int,
    n: int,
    sides: tuple[Side, ...],
    alpha: float,
) -> dict[str, npt.NDArray[np.bool_]]:
    """Per side, whether the test rejects at any run up to `runs` (no minimum of runs), drawn
    at the pair level: the statistic moves only when a FIFO pair completes, the pairs are iid
    (t_i, c_i) and by run `runs` there are min(treatment runs, control runs) of them (that
    `PairedStream` pairs this way is checked against `log_e_per_run`). Cheaper than per run."""
    n_c = rng.binomial(runs, holdout, size=n)
    pairs = np.minimum(n_c, runs - n_c)
    width = int(pairs.max())
    t = rng.random((n, width)) < p_treatment
    c = rng.random((n, width)) < p_control
    live = np.arange(width)[None, :] < pairs[:, None]
    k = np.cumsum(c & ~t & live, axis=1)
    m = np.cumsum((c ^ t) & live, axis=1)
    code = k.astype(np.int64) * (width + 1) + m
    uniq, inv = np.unique(code, return_inverse=True)
    out = {}
    for side in sides:
        values = log_e(uniq // (width + 1), uniq % (width + 1), side)[inv].reshape(n, width)
        out[side] = (values >= threshold(alpha)).any(axis=1)
    return out
