"""A run with a bad setting, as a new user meets it (issue 31): the client refuses it at
start with the reason; sent anyway (another client, an older one), the worker dead-letters it
and says so at WARNING with the run id, `/runs/{id}` answers with the reason, and
`rb-streams deadletters` reads it back from the topic."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import orjson
import pytest

from streams.admin import deadletter_topic as dl
from streams.agent.client import SteeringClient
from streams.local.worker_process import WorkerProcess, free_port
from tests.integration.helpers import make_settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dl_worker(adapters_worker: WorkerProcess) -> WorkerProcess:
    """The session's shared worker (the same settings this module's own had); each test uses
    its own run ids (no other module sends it a bad run_start)."""
    return adapters_worker


def run_start(run_id: str, **fields: Any) -> bytes:
    return orjson.dumps(
        {"type": "run_start", "schema_version": 1, "run_id": run_id, "ts": time.time(), **fields}
    )


async def send_anyway(w: WorkerProcess, *events: tuple[str, bytes]) -> None:
    """What a client that does not check (an older one, another language) sends."""
    async with SteeringClient(w.settings) as c:
        for run_id, value in events:
            await c.send_raw(value, key=run_id.encode())


def run_view(w: WorkerProcess, run_id: str) -> tuple[int, dict[str, Any]]:
    url = f"http://127.0.0.1:{w.settings.web_port}/runs/{run_id}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def until(check: Any, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run(
        [sys.executable, "-m", "streams", "deadletters", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_a_bad_setting_is_refused_at_start_then_dead_lettered_logged_served_and_listed(
    dl_worker: WorkerProcess,
) -> None:
    w = dl_worker

    async def refused_at_start() -> None:
        async with SteeringClient(w.settings) as c:
            with pytest.raises(ValueError, match="unknown task_profile 'nonexistent'"):
                await c.start_run("dl-profile", task_profile="nonexistent")
            with pytest.raises(ValueError, match="unknown fsm_thresholds parameter"):
                await c.start_run("dl-fsm", fsm_thresholds={"slow_treshold": 0.5})

    asyncio.run(refused_at_start())
    asyncio.run(
        send_anyway(
            w,
            ("dl-profile", run_start("dl-profile", task_profile="nonexistent")),
            ("dl-fsm", run_start("dl-fsm", fsm_thresholds={"slow_treshold": 0.5})),
        )
    )

    status, body = until(lambda: (lambda r: r if "deadletter" in r[1] else None)(run_view(w, "dl-profile")))
    assert status == 404 and body["error"] == "run dead-lettered", body
    assert body["deadletter"]["reason"] == "invalid_config"
    assert "unknown task_profile 'nonexistent'" in body["deadletter"]["detail"]

    def logged() -> str | None:
        return next(
            (x for x in w.log_path.read_text(errors="replace").splitlines() if "run dl-fsm" in x), None
        )

    line = until(logged)
    assert line is not None and "dead-lettered run dl-fsm" in line
    assert "WARNING" in line and "invalid_fsm_thresholds: unknown fsm_thresholds parameter" in line

    flags = ["--broker", w.settings.broker, "--topic-prefix", w.settings.topic_prefix]
    p = cli("--run", "dl-profile", *flags)
    assert p.returncode == 0, p.stderr
    (only,) = p.stdout.splitlines()
    assert "  dl-profile  invalid_config  -  unknown task_profile 'nonexistent'" in only
    p = cli("--reason", "invalid_fsm_thresholds", "--since", "10m", "--json", *flags)
    assert p.returncode == 0, p.stderr
    records = [json.loads(x) for x in p.stdout.splitlines()]
    assert [r["run_id"] for r in records] == ["dl-fsm"] and records[0]["original"].startswith("{")


def test_follow_prints_a_dead_letter_as_it_is_written(dl_worker: WorkerProcess) -> None:
    w = dl_worker
    got: list[dl.Record] = []

    async def follow() -> int:
        stop = asyncio.Event()

        def emit(rec: dl.Record) -> None:
            got.append(rec)
            stop.set()

        q = dl.Query(run="dl-follow", follow=True)
        reader = asyncio.create_task(dl.read(w.settings, w.settings.deadletter_topic, q, emit, stop))
        await asyncio.sleep(1.0)  # the reader is at the end of the topic
        await send_anyway(w, ("dl-follow", run_start("dl-follow", scorer="nope")))
        return await asyncio.wait_for(reader, 20.0)

    assert asyncio.run(follow()) == 1
    assert got[0].reason == "invalid_config" and "unknown scorer 'nope'" in got[0].data["detail"]  # type: ignore[index]


def test_bad_input_and_no_broker_are_one_line_each(dl_worker: WorkerProcess) -> None:
    flags = ["--broker", dl_worker.settings.broker, "--topic-prefix", dl_worker.settings.topic_prefix]
    for args, code, said in [
        (["--reason", "bogus", *flags], 2, "--reason 'bogus': not a dead-letter reason (known: invalid_json"),
        (["--since", "ten minutes", *flags], 2, "expected a positive duration such as 30s"),
        (
            ["--broker", w_down := f"kafka://127.0.0.1:{free_port()}"],
            1,
            f"cannot reach the broker at {w_down[8:]}",
        ),
        (
            ["--broker", dl_worker.settings.broker, "--topic-prefix", "nothing-here"],
            1,
            "topic nothing-here.deadletter does not exist",
        ),
    ]:
        p = cli(*args)
        assert p.returncode == code, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and said in p.stderr, (args, p.stderr)


def test_limit_shows_the_newest_records_across_partitions_escaped(broker: str, tmp_path: Any) -> None:
    """No worker needed: records produced straight to a dead-letter topic of 3 partitions, the
    newest ones on the partitions read last and first alike; a hostile one among them."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    s = make_settings(broker, tmp_path)
    topic = s.deadletter_topic
    base = time.time() - 100

    def rec(ts: float, **kw: Any) -> bytes:
        return orjson.dumps(
            {"reason": "unknown_run", "detail": "d", "run_id": f"r{ts:.0f}", "processed_ts": base + ts, **kw}
        )

    async def main() -> tuple[list[str], list[str]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=s.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 3, 1)])
        finally:
            await admin.close()
        p = AIOKafkaProducer(bootstrap_servers=s.bootstrap_servers)
        await p.start()
        try:
            for part, stamps in ((0, (9, 10)), (1, (1, 2, 3, 4, 5)), (2, (6, 11))):
                for ts in stamps:
                    await p.send_and_wait(topic, rec(ts), partition=part)
            await p.send_and_wait(topic, rec(12, reason="\x1b[2J", run_id="\x1b]0;pwned\x07"), partition=1)
        finally:
            await p.stop()
        lines: list[str] = []
        await dl.read(s, topic, dl.Query(limit=4), lambda r: lines.append(dl.line(r)))
        as_json: list[str] = []
        await dl.read(s, topic, dl.Query(limit=2), lambda r: as_json.append(dl.json_line(r)))
        return lines, as_json

    lines, as_json = asyncio.run(main())
    assert [x.split("  ")[1] for x in lines] == ["r9", "r10", "r11", "\\x1b]0;pwned\\x07"]
    assert all(x.isprintable() for x in lines + as_json) and "\\x1b[2J" in lines[-1]
    assert [json.loads(x)["processed_ts"] - base for x in as_json] == pytest.approx([11, 12])
