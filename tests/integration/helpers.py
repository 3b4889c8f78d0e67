"""What the integration tests share besides fixtures: the test broker's port, the starter
library, settings for a test worker, starting one, and reading back what a worker saw."""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from streams.local.broker import REPO
from streams.local.worker_process import WorkerProcess, free_port
from streams.settings import Settings
from tests.integration.kafka_io import read_all

PORT = int(os.environ.get("RB_TEST_KAFKA_PORT", "19092"))
STARTER = REPO / "patterns" / "starter.jsonl"
DECISION_KEY = "decision-key-for-tests"


def without_checkout() -> dict[str, str]:
    """This environment without PYTHONPATH: a checkout on it (with a build's
    rb_streams.egg-info) would read to pip as rb-streams installed already."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def make_settings(broker: str, tmp: Path, **kw) -> Settings:
    prefix = kw.pop("topic_prefix", f"t{uuid.uuid4().hex[:8]}")
    return Settings.from_env(
        {},
        broker=broker,
        topic_prefix=prefix,
        app_id=kw.pop("app_id", f"app-{prefix}"),
        # decisions signed, and checked by the tests' clients made from these settings
        decision_key=kw.pop("decision_key", DECISION_KEY),
        partitions=kw.pop("partitions", 4),
        data_dir=str(tmp / "worker"),
        web_port=free_port(),
        session_timeout_s=6.0,
        heartbeat_interval_s=1.0,
        log_level="info",
        **kw,
    )


def start_worker(settings: Settings, tmp: Path, name: str = "worker") -> WorkerProcess:
    return WorkerProcess.start(settings, tmp / f"{name}.log")


def run_summary(w: WorkerProcess, run_id: str, finished: bool = True) -> dict[str, Any]:
    """The run's `/runs/{id}` (polled until finished: run_finish has no decision)."""
    summary: dict[str, Any] = {}
    for _ in range(100):
        url = f"http://127.0.0.1:{w.settings.web_port}/runs/{run_id}"
        summary = json.loads(urllib.request.urlopen(url, timeout=10).read())
        if summary.get("finished") or not finished:
            break
        time.sleep(0.1)
    return summary


def steps_of(w: WorkerProcess, run_id: str) -> list[dict[str, Any]]:
    """The run's step events as the worker read them from the steps topic."""
    s = w.settings
    events = asyncio.run(read_all(s.bootstrap_servers, s.steps_topic, idle_s=1.0))
    return [e for e in events if e.get("run_id") == run_id and e.get("type") == "step"]
