"""A broker outage seen from the agent process (issue 31: an 8 s outage wrote 643 aiokafka
lines to stderr): the client logs one line when it starts and one when the broker answers
again (its health lines, issue 40), and counts aiokafka's. A broker of its own, stopped and started, so that the session's
broker (other modules' workers) is never disturbed."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from streams.admin.topics import ensure_topics
from streams.agent.client import SteeringClient
from streams.local.broker import kafka
from tests.integration.helpers import make_settings

pytestmark = pytest.mark.integration

OUTAGE_S = 1.0  # the broker is down this long, plus its stop and start (seconds each)


def test_a_broker_outage_is_two_lines_in_the_agents_log_and_the_rest_is_counted(
    spare_broker: tuple[str, int, str, dict[str, str]], tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    broker, port, data_dir, env = spare_broker
    s = make_settings(broker, tmp_path, partitions=2)  # no worker: every decision is late
    caplog.set_level(logging.WARNING)
    seen: dict[str, float] = {}

    async def main() -> tuple[int, int]:
        await ensure_topics(s)
        async with SteeringClient(s, deadline_ms=200) as c:
            await c.start_run("outage-1", task="t")
            stepping = True

            async def agent() -> None:
                k = 0
                while stepping:
                    k += 1
                    await c.step("outage-1", k, thought="step", tokens=1)
                    await asyncio.sleep(0.1)

            task = asyncio.create_task(agent())
            await asyncio.sleep(1.0)
            t0 = time.monotonic()
            await asyncio.to_thread(kafka, "stop", port, data_dir, env)
            await asyncio.sleep(OUTAGE_S)
            await asyncio.to_thread(kafka, "start", port, data_dir, env)
            seen["outage_s"] = time.monotonic() - t0
            deadline = time.monotonic() + 20.0
            while not any("steering available again" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "the client never saw the broker answer again"
                await asyncio.sleep(0.2)
            stepping = False
            await task
            return c.quieted_kafka_logs, c.failed_sends

    quieted, failed = asyncio.run(main())
    kafka_lines = [r for r in caplog.records if r.name.startswith("aiokafka")]
    ours = [r.getMessage() for r in caplog.records if r.name == "streams.agent.client"]
    print(f"outage {seen['outage_s']:.1f}s: {quieted} aiokafka messages quieted, {len(kafka_lines)} logged")
    # the outage's first message as aiokafka wrote it (and a lone one a fresh broker may cause)
    assert len(kafka_lines) <= 2, [r.getMessage() for r in kafka_lines]
    assert quieted > 0
    assert sum(m.startswith("steering unavailable") for m in ours) == 1, ours
    assert sum(m.startswith("steering available again after") for m in ours) == 1, ours
    assert failed == 0  # the outage was shorter than the producer's patience: nothing lost
