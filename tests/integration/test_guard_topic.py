"""The outcomes topic read back through a real broker: `rb-streams experiment report` with no
file reads it to its end, and the worker's guard feed follows it and switches (no worker
started: the feed is the part that talks to the broker)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streams.cli.main import main
from streams.core.guard import ALL, Guard, GuardSettings
from streams.experiments.topic import outcomes_topic
from streams.worker.guard_feed import GuardFeed
from tests.integration.helpers import make_settings

pytestmark = pytest.mark.integration


def records() -> list[dict[str, Any]]:
    rng = np.random.default_rng(5)
    out = []
    for i in range(300):
        for arm, p in (("treatment", 0.25), ("control", 0.6)):
            out.append(
                {
                    "type": "outcome",
                    "schema_version": 1,
                    "run_id": f"{arm[0]}{i}",
                    "org_id": "acme",
                    "experiment": "pilot",
                    "arm": arm,
                    "outcome": "success" if rng.random() < p else "failure: tests fail",
                    "cost_usd": 0.1,
                    "first_fire": {},
                }
            )
    return out


async def publish(bootstrap: str, topic: str, recs: list[dict[str, Any]]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1, topic_configs={"cleanup.policy": "compact"})])
    finally:
        await admin.close()
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await p.start()
    try:
        for r in recs:
            await p.send(topic, orjson.dumps(r), key=r["run_id"].encode())
        await p.flush()
    finally:
        await p.stop()


def test_report_and_guard_read_the_outcomes_topic(
    broker: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = make_settings(broker, tmp_path)
    topic = outcomes_topic(s)
    asyncio.run(publish(s.bootstrap_servers, topic, records()))

    assert main(["experiment", "report", "--json", "--broker", broker, "--topic-prefix", s.topic_prefix]) == 0
    rep = json.loads(capsys.readouterr().out)
    (e,) = rep["experiments"]
    assert e["arms"]["treatment"]["runs"] == 300 and e["arms"]["control"]["runs"] == 300
    assert e["sequential"]["verdict"] == "treatment worse than control"
    assert [g["monitor"] for g in e["guard"]] == [ALL]

    feed = GuardFeed(Guard(GuardSettings(enabled=True, alpha=0.05, min_runs=50)))

    async def follow() -> None:
        task = asyncio.create_task(
            feed.run(
                lambda: AIOKafkaConsumer(
                    bootstrap_servers=s.bootstrap_servers, group_id=None, enable_auto_commit=False
                ),
                topic,
            )
        )
        for _ in range(300):
            if feed.guard.records >= 600:
                break
            await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(follow())
    assert feed.guard.records == 600
    assert feed.observe_only("acme", "pilot") == {ALL}


def test_report_on_a_prefix_without_outcomes_topic_is_one_line(
    broker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["experiment", "report", "--broker", broker, "--topic-prefix", "nosuchprefix0"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "does not exist" in err
