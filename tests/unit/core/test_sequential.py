"""The sequential test is anytime-valid and has power, checked by simulation (vectorised)."""

from __future__ import annotations

import numpy as np
import pytest

from streams.core.sequential import MAX_UNPAIRED, PairedStream, log_e, threshold

from .sim_arms import ever_rejects, experiments, first_rejection, log_e_per_run

ALPHA = 0.05


@pytest.mark.parametrize(("p", "holdout"), [(0.5, 0.5), (0.9, 0.5), (0.3, 0.1)])
def test_false_positive_rate_stays_under_alpha_when_checked_after_every_run(p: float, holdout: float) -> None:
    rng = np.random.default_rng(7)
    rejected = ever_rejects(rng, p, p, holdout, runs=2000, n=2000, sides=("worse", "differs"), alpha=ALPHA)
    for side, r in rejected.items():
        assert r.mean() <= ALPHA, (side, r.mean())


def test_false_positive_rate_per_run_with_interleaved_arms_stays_under_alpha() -> None:
    # the same, run by run through the FIFO pairing of interleaved arms (smaller: slower path)
    rng = np.random.default_rng(17)
    control, success = experiments(rng, 0.5, 0.5, 0.3, runs=1000, n=1000)
    le, n_t, n_c = log_e_per_run(control, success, "worse")
    assert (first_rejection(le, n_t, n_c, ALPHA, min_runs=1) > 0).mean() <= ALPHA


@pytest.mark.parametrize(("p_t", "p_c"), [(0.5, 0.6), (0.8, 0.7)])
def test_detects_a_10_point_difference_at_1000_runs_per_arm_with_power_over_80_percent(
    p_t: float, p_c: float
) -> None:
    rng = np.random.default_rng(8)
    power = ever_rejects(rng, p_t, p_c, 0.5, runs=2000, n=2000, sides=("differs",), alpha=ALPHA)[
        "differs"
    ].mean()
    assert power >= 0.80, power


def test_worse_does_not_reject_when_treatment_is_better() -> None:
    rng = np.random.default_rng(9)
    control, success = experiments(rng, 0.7, 0.5, 0.5, runs=1000, n=500)
    le, n_t, n_c = log_e_per_run(control, success, "worse")
    assert (first_rejection(le, n_t, n_c, ALPHA, min_runs=1) > 0).mean() == 0.0


def test_paired_stream_fed_one_run_at_a_time_equals_the_vectorised_statistic() -> None:
    rng = np.random.default_rng(10)
    control, success = experiments(rng, 0.4, 0.6, 0.3, runs=400, n=3)
    for side in ("worse", "better", "differs"):
        le, _, _ = log_e_per_run(control, success, side)  # type: ignore[arg-type]
        for row in range(3):
            s = PairedStream()
            for r in range(400):
                s.add("control" if control[row, r] else "treatment", bool(success[row, r]))
                assert s.log_e(side) == pytest.approx(float(le[row, r]), abs=1e-9)  # type: ignore[arg-type]
            assert s.runs["control"] == int(control[row].sum())


def test_no_pair_no_evidence_and_one_arm_alone_proves_nothing() -> None:
    s = PairedStream()
    for _ in range(1000):
        s.add("treatment", False)
    assert s.pairs == 0 and s.log_e("worse") == 0.0
    assert s.runs["treatment"] == 1000


def test_unpaired_runs_are_bounded_and_pairing_goes_on() -> None:
    s = PairedStream()
    for _ in range(MAX_UNPAIRED + 500):
        s.add("treatment", False)
    assert len(s._waiting) == MAX_UNPAIRED
    for _ in range(10):
        s.add("control", True)
    assert (s.pairs, s.discordant, s.control_won) == (10, 10, 10)


def test_threshold_is_ville_and_the_e_value_grows_with_evidence() -> None:
    assert threshold(0.05) == pytest.approx(np.log(20))
    assert float(log_e(30, 30, "worse")) > threshold(0.01)
    assert float(log_e(15, 30, "worse")) < 0
    assert float(log_e(0, 30, "better")) > threshold(0.01)
