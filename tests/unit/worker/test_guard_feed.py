"""The worker's guard feed: topic values in, one log line and the guard metrics per switch."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from streams.core.guard import ALL, Guard, GuardSettings
from streams.worker.guard_feed import GuardFeed
from streams.worker.metrics import Metrics


def value(run_id: str, arm: str, success: bool) -> bytes:
    rec: dict[str, Any] = {
        "type": "outcome",
        "run_id": run_id,
        "org_id": "acme",
        "experiment": "pilot",
        "arm": arm,
        "outcome": "success" if success else "failure",
        "first_fire": {},
    }
    return orjson.dumps(rec)


def test_a_switch_logs_why_once_and_sets_the_gauge_and_the_counter(caplog: pytest.LogCaptureFixture) -> None:
    reg = CollectorRegistry()
    m = Metrics(reg, process=False)
    feed = GuardFeed(
        Guard(GuardSettings(enabled=True, alpha=0.05, min_runs=20)),
        lambda sw: m.guard_switched(sw.org, sw.experiment, sw.monitor),
    )
    with caplog.at_level(logging.WARNING, logger="streams.guard"):
        for i in range(200):
            feed.feed_value(value(f"t{i}", "treatment", False))
            feed.feed_value(value(f"c{i}", "control", True))
    lines = [r.getMessage() for r in caplog.records if r.name == "streams.guard"]
    assert len(lines) == 1 and "switched to observe-only" in lines[0] and "'acme'" in lines[0]
    labels = {"org": "acme", "experiment": "pilot", "monitor": ALL}
    assert reg.get_sample_value("rb_guard_observe_only", labels) == 1.0
    assert reg.get_sample_value("rb_guard_switches_total", labels) == 1.0
    assert feed.observe_only("acme", "pilot") == {ALL}
    assert feed.observe_only("acme", None) == frozenset()


def test_tombstones_and_values_that_are_not_records_are_skipped() -> None:
    feed = GuardFeed(Guard(GuardSettings(enabled=True)))
    assert feed.feed_value(None) == []
    assert feed.feed_value(b"{not json") == []
    assert feed.feed_value(b"[1]") == []
    assert feed.not_json == 2 and feed.guard.records == 0
