"""Finished and idle runs leave the table (with a changelog tombstone); active runs stay."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.error
import urllib.request

import pytest

from streams.agent.client import SteeringClient
from tests.factories import b, step
from tests.integration.helpers import make_settings, start_worker
from tests.integration.kafka_io import read_all

pytestmark = pytest.mark.integration


def http_status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def evicted(port: int, reason: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(rf'^rb_runs_evicted_total{{reason="{reason}"}} (\S+)$', text, re.M)
    assert m, text
    return float(m.group(1))


def test_finished_and_idle_runs_are_evicted_for_good_and_active_runs_are_kept(broker, tmp_path):
    s = make_settings(
        broker, tmp_path, partitions=2, finished_retention_s=2.0, idle_timeout_s=5.0, evict_interval_s=0.5
    )
    w = start_worker(s, tmp_path)
    port = s.web_port
    try:

        async def scenario() -> None:
            async with SteeringClient(s, deadline_ms=15_000) as c:
                for run in ("done", "quiet", "busy"):
                    assert await c.start_run(run) is not None
                assert await c.step("done", 1) is not None
                await c.finish_run("done", "success")
                assert await c.step("quiet", 1) is not None
                # "busy" keeps stepping while "done" passes its retention and "quiet" its idle timeout
                t0 = time.monotonic()
                n = 1
                while time.monotonic() - t0 < 9.0:
                    assert await c.step("busy", n) is not None
                    n += 1
                    await asyncio.sleep(0.5)
                assert http_status(port, "/runs/done") == 404
                assert http_status(port, "/runs/quiet") == 404
                assert http_status(port, "/runs/busy") == 200
                # A late step for an evicted run is rejected like any step of an unknown run.
                await c.send_raw(b(step("done", 2)), key=b"done")
                assert await c.step("busy", n) is not None

        asyncio.run(scenario())
        assert evicted(port, "finished") == 1.0
        assert evicted(port, "idle") >= 1.0  # "quiet", and the readiness probe's run
    finally:
        w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)

    dead = asyncio.run(read_all(s.bootstrap_servers, s.deadletter_topic, expect=1))
    assert [(d["reason"], d["run_id"]) for d in dead] == [("unknown_run", "done")]
    # Each run that ended has its outcome record: "quiet" evicted idle without a run_finish
    # (sent, and on the broker, before its state went), "done" on its run_finish (issue 50).
    ended = {
        r["run_id"]: (r["outcome"], r["ended_by"])
        for r in asyncio.run(read_all(s.bootstrap_servers, s.outcomes_topic, expect=2))
    }
    assert ended["done"] == ("success", "run_finish") and ended["quiet"] == ("abandoned", "evicted")
    assert "busy" not in ended

    # A replacement with an empty data dir recovers the table from the changelog: the
    # tombstones keep the evicted runs out, the active one is back (eviction off this time).
    s2 = s.with_(data_dir=str(tmp_path / "worker-2"), finished_retention_s=0.0, idle_timeout_s=0.0)
    w2 = start_worker(s2, tmp_path, "worker-2")
    try:
        assert http_status(s2.web_port, "/runs/busy") == 200
        assert http_status(s2.web_port, "/runs/done") == 404
        assert http_status(s2.web_port, "/runs/quiet") == 404
    finally:
        w2.stop()
