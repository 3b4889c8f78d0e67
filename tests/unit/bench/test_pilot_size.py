"""The pilot-size table (docs/experiments.md) is right: the textbook figure, and the power it
promises holds when the experiment is simulated."""

from __future__ import annotations

import math
import random
from statistics import NormalDist

import pytest

from bench.pilot_size import table, total_runs


def test_fifty_to_sixty_percent_needs_the_textbook_388_runs_per_arm():
    assert math.ceil(total_runs(0.5, 0.10, 0.5) / 2) == 388


def test_a_smaller_holdout_needs_more_runs_in_all():
    assert total_runs(0.3, 0.1, 0.5) < total_runs(0.3, 0.1, 0.2) < total_runs(0.3, 0.1, 0.1)


def test_the_promised_power_holds_in_simulation():
    rnd = random.Random(50)
    p0, d, h = 0.3, 0.15, 0.2
    n = total_runs(p0, d, h)
    nc, nt = round(n * h), n - round(n * h)
    z = NormalDist().inv_cdf(0.975)
    hits, trials = 0, 1000
    for _ in range(trials):
        c = sum(rnd.random() < p0 for _ in range(nc))
        t = sum(rnd.random() < p0 + d for _ in range(nt))
        pool = (c + t) / (nc + nt)
        se = math.sqrt(pool * (1 - pool) * (1 / nc + 1 / nt))
        hits += abs(t / nt - c / nc) / se > z
    assert 0.75 <= hits / trials <= 0.86, hits


def test_the_table_has_every_base_rate_and_difference():
    rows = table().splitlines()
    assert len(rows) == 2 + 9 and rows[2].startswith("| 30% | +5 points | 1,377 |")


def test_bad_rates_are_clear_errors():
    with pytest.raises(ValueError, match="holdout"):
        total_runs(0.5, 0.1, 0.0)
    with pytest.raises(ValueError, match="rates"):
        total_runs(0.95, 0.1, 0.5)
