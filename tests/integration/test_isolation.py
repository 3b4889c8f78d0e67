"""Two deployments with different topic prefixes share nothing, through the real broker
(issue 48): a worker on its prefix's default app id neither lists nor serves the other's runs,
before or after a restart (the run table's changelog is its own), its consumer group commits
only its own steps topic, and a worker whose app id another prefix owns refuses to start with
one line (streams.admin.ownership), whether the owner claimed the id or only used it before
claims existed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import OffsetAndMetadata

from streams.agent.client import SteeringClient
from streams.local.worker_process import WorkerProcess
from streams.settings import Settings, owner_topic
from tests.integration.helpers import make_settings, start_worker

pytestmark = pytest.mark.integration


def listed(w: WorkerProcess) -> set[str]:
    url = f"http://127.0.0.1:{w.settings.web_port}/runs?limit=1000"
    return {r["run_id"] for r in json.loads(urllib.request.urlopen(url, timeout=10).read())}


def served(w: WorkerProcess, run_id: str) -> int:
    url = f"http://127.0.0.1:{w.settings.web_port}/runs/{run_id}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


async def one_run(s: Settings, run_id: str) -> None:
    async with SteeringClient(s, deadline_ms=15_000) as c:
        assert await c.start_run(run_id, task="fix the login bug") is not None
        assert await c.step(run_id, 1, thought="read the form", action="read_file") is not None
        await c.finish_run(run_id, "success")


async def broker_view(s: Settings, groups: list[str]) -> tuple[list[str], dict[str, set[str]]]:
    """Every topic, and the topics each group has committed offsets on."""
    admin = AIOKafkaAdminClient(bootstrap_servers=s.bootstrap_servers)
    await admin.start()
    try:
        committed = {g: {tp.topic for tp in await admin.list_consumer_group_offsets(g)} for g in groups}
        return await admin.list_topics(), committed
    finally:
        await admin.close()


def refusing(broker: str, tmp: Path, prefix: str, app_id: str) -> subprocess.Popen[str]:
    """`rb-streams worker` with this prefix and app id, started (see `refusal`)."""
    s = make_settings(broker, tmp, topic_prefix=prefix, app_id=app_id)
    env = {**os.environ, **{Settings.env_name(k): str(v) for k, v in s.as_dict().items()}}
    return subprocess.Popen(
        [sys.executable, "-m", "streams", "worker"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def refusal(p: subprocess.Popen[str]) -> tuple[int, str]:
    """How the worker ended (killed if it ran on) and what it wrote to stderr."""
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # not refused: it must not outlive the test
        p.kill()
        _, err = p.communicate()
    return p.returncode, err


def one_line(ended: tuple[int, str]) -> str:
    """A refused worker exits 2 with one line, before joining any group: that line."""
    code, err = ended
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


async def used_before_claims(s: Settings, group: str) -> None:
    """A group that committed offsets on `s`'s steps topic, as a worker of a release before
    claims did: no claim topic, only its use."""
    c = AIOKafkaConsumer(bootstrap_servers=s.bootstrap_servers, group_id=group, enable_auto_commit=False)
    await c.start()
    try:
        tp = TopicPartition(s.steps_topic, 0)
        c.assign([tp])
        await c.commit({tp: OffsetAndMetadata(0, "")})
    finally:
        await c.stop()


def test_two_prefixes_share_no_run_table_or_group_and_a_foreign_app_id_is_refused_with_one_line(
    worker: WorkerProcess, broker: str, tmp_path: Path
) -> None:
    a = worker  # the session's worker: one deployment
    s = make_settings(broker, tmp_path, app_id="")  # another prefix, on its default app id
    assert s.app_id == f"{s.topic_prefix}-streams" != a.settings.app_id
    b = start_worker(s, tmp_path)
    procs: list[subprocess.Popen[str]] = []
    try:
        ra, rb = f"iso-a-{uuid.uuid4().hex[:6]}", f"iso-b-{uuid.uuid4().hex[:6]}"
        asyncio.run(one_run(a.settings, ra))
        asyncio.run(one_run(b.settings, rb))
        assert ra in listed(a) and rb not in listed(a) and served(a, rb) == 404
        assert rb in listed(b) and ra not in listed(b) and served(b, ra) == 404
        # While b restarts: a third prefix on b's app id, and a fourth on an id a's prefix
        # used before claims existed (its group's committed offsets are all that says so).
        third, fourth = (f"t{uuid.uuid4().hex[:8]}" for _ in range(2))
        legacy = f"legacy-{uuid.uuid4().hex[:8]}"
        asyncio.run(used_before_claims(a.settings, legacy))
        claimed = refusing(broker, tmp_path / "third", third, s.app_id)
        used = refusing(broker, tmp_path / "fourth", fourth, legacy)
        procs += [claimed, used]
        b.stop()  # the restart: b's table comes back from its own changelog, and only from it
        b = start_worker(s, tmp_path)
        assert rb in listed(b) and ra not in listed(b) and served(b, ra) == 404
        assert served(b, rb) == 200
    finally:
        b.stop()
        ended = [refusal(p) for p in procs]
    topics, committed = asyncio.run(broker_view(s, [a.settings.app_id, s.app_id]))
    assert f"{s.app_id}-runs-changelog" in topics and f"{a.settings.app_id}-runs-changelog" in topics
    assert committed[s.app_id] == {s.steps_topic}  # b's group read b's steps topic only
    assert committed[a.settings.app_id] <= {a.settings.steps_topic}
    assert owner_topic(s.app_id, s.topic_prefix) in topics  # b's claim on its app id

    # both refused, naming the owner's prefix, and nothing of their own made
    line = one_line(ended[0])
    assert f"belongs to the deployment with RB_TOPIC_PREFIX={s.topic_prefix!r}" in line, line
    assert f"{third}-streams" in line, line  # what to do instead
    line = one_line(ended[1])
    assert f"RB_TOPIC_PREFIX={a.settings.topic_prefix!r}" in line, line
    assert f"committed offsets on {a.settings.steps_topic}" in line, line
    topics, _ = asyncio.run(broker_view(s, []))
    assert not [t for t in topics if third in t or fourth in t or t.startswith(f"{legacy}-owner-")]
