"""The throughput benchmark's bytes per event: read from the broker's log segments."""

from __future__ import annotations

import pytest

import bench.throughput as throughput
from streams.settings import Settings


def _segment(root, topic: str, partition: int, size: int) -> None:
    d = root / "data" / f"{topic}-{partition}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "00000000000000000000.log").write_bytes(b"x" * size)
    (d / "00000000000000000000.index").write_bytes(b"i" * 999)  # not data: never counted


def test_changelog_and_decision_bytes_are_the_segments_of_those_topics_per_event(tmp_path, monkeypatch):
    monkeypatch.setattr(throughput, "broker_dir", lambda: tmp_path)
    s = Settings.from_env({}, app_id="bench-x", topic_prefix="x")
    for p, size in enumerate((3_000, 5_000)):
        _segment(tmp_path, "bench-x-runs-changelog", p, size)
        _segment(tmp_path, s.steering_topic, p, 100)
    _segment(tmp_path, "bench-y-runs-changelog", 0, 1_000_000)  # another app's run
    got = throughput.topic_bytes(s, 100)
    assert got == {"changelog_bytes": pytest.approx(80.0), "decision_bytes": pytest.approx(2.0)}


def test_no_figures_when_the_broker_is_not_this_machines_benchmark_broker(tmp_path, monkeypatch):
    monkeypatch.setattr(throughput, "broker_dir", lambda: tmp_path / "elsewhere")
    assert throughput.topic_bytes(Settings.from_env({}, app_id="bench-x"), 100) == {}
