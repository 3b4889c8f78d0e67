"""The soak's plateau test: per-process RSS and the slope over the final minutes."""

from __future__ import annotations

import argparse
import math
import os
import sys

import pytest

from bench.soak import Row, report, rss_split, slope, tail_window


def test_slope_is_least_squares_in_mb_per_minute() -> None:
    line = [(float(t), 100.0 + 0.5 * t / 60.0) for t in range(0, 1200, 30)]
    assert slope(line) == pytest.approx(0.5)
    saw = [(float(t), 100.0 + (5.0 if (t // 30) % 2 else 0.0)) for t in range(0, 3600, 30)]
    assert abs(slope(saw)) < 0.01  # a sawtooth around a level is a plateau
    assert math.isnan(slope([(0.0, 1.0)])) and math.isnan(slope([(0.0, 1.0), (0.0, 2.0)]))
    assert slope([(0.0, 1.0), (30.0, float("nan")), (60.0, 2.0)]) == pytest.approx(1.0)


def test_the_window_is_the_last_minutes_or_the_second_half_of_a_short_soak() -> None:
    assert tail_window([0.0, 1800.0, 3600.0], 20) == 2400.0
    assert tail_window([0.0, 600.0], 20) == 300.0
    assert tail_window([], 20) == 0.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_rss_is_split_between_a_process_and_its_descendants() -> None:
    own, children = rss_split(os.getpid())
    assert own > 1.0 and children >= 0.0


def test_the_report_gives_the_series_per_process_and_the_slopes(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(minutes=60.0, every=5.0, sample=30.0, slope_minutes=20.0)
    rows = [
        Row(t, 300.0 + min(t, 1200.0) / 60.0, 165.0, 480.0, t, 5.0, 200.0 * t, int(t))
        for t in range(0, 3601, 30)
    ]
    report(args, rows, {"cache:fast_vectors": 20000.0})
    out = capsys.readouterr().out
    assert "per process, every 5 min" in out and " 60.0    320.0      165.0    485.0" in out
    assert "slope over the last 20.0 min (least squares, MB/min): worker +0.000, embedding +0.000" in out
    assert "SUMMARY soak: 60 min" in out and "(200/s)" in out and "cache:fast_vectors=20000" in out
    report(argparse.Namespace(minutes=0.1, every=5.0, sample=3.0, slope_minutes=20.0), rows[:1], {})
    assert "SUMMARY soak" in capsys.readouterr().out  # one sample: no slope, no crash
