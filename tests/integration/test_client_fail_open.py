"""The steering service down costs the agent its steering, never its run (issue 40): a client
started with no broker, a broker lost mid-run and restarted, leaving `with` during an outage, a
broker that accepts connections and never answers. The session's spare broker, stopped and
started here, so the shared one is never disturbed; the steps topic read back is the proof
that steering resumed, and a worker on the same broker shows /ready following it."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from streams.admin.topics import ensure_topics
from streams.agent.client import SyncSteeringClient
from streams.agent.session import SteeringSession
from streams.kafka.client_settings import ClientSettings
from streams.local.broker import REPO, kafka
from streams.local.worker_process import WorkerProcess
from tests.integration.helpers import make_settings
from tests.integration.kafka_io import read_all

pytestmark = pytest.mark.integration


class Broker:
    """The session's spare broker (tests/integration/fixtures.py), this module's to take down."""

    def __init__(self, url: str, port: int, data_dir: str, env: dict[str, str]) -> None:
        self.url, self.port, self.data_dir, self.env = url, port, data_dir, env

    def start(self) -> None:
        kafka("start", self.port, self.data_dir, self.env)  # a no-op when it is running

    def stop(self) -> None:
        kafka("stop", self.port, self.data_dir, self.env)  # a no-op when it is stopped


@pytest.fixture
def own_broker(spare_broker_session: tuple[str, int, str, dict[str, str]]) -> Broker:
    return Broker(*spare_broker_session)


def test_a_client_started_without_its_broker_runs_unsteered_then_steers_when_it_comes(
    own_broker: Broker, tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    own_broker.stop()  # the client starts before its broker does
    s = make_settings(own_broker.url, tmp_path, partitions=2)
    caplog.set_level(logging.WARNING)
    seen: list[tuple[bool, str]] = []
    with SyncSteeringClient(s, deadline_ms=200, on_health=lambda h, r: seen.append((h, r))) as c:
        assert not c.healthy and "cannot reach the broker" in c.health_reason
        t0 = time.monotonic()
        assert c.start_run("fo-1", task="t") is None
        for k in (1, 2, 3):
            assert c.step("fo-1", k, thought=f"step {k}") is None
        calls_s = time.monotonic() - t0
        assert [e.skipped_reason for e in c.step_log("fo-1")] == [
            "steering unavailable: proceeding unsteered"
        ] * 4
        session = SteeringSession(c, "fo-2", task="t", model="m")  # a session on it, the same
        session.start()
        for _ in range(2):
            assert session.begin_step().decision is None
            session.end_step(thought="unsteered", action="read_file", observation="ok")
        own_broker.start()
        asyncio.run(ensure_topics(s))
        deadline = time.monotonic() + 30
        while not c.healthy:
            assert time.monotonic() < deadline, c.health_reason
            time.sleep(0.2)
        c.step("fo-1", 4, thought="step 4")  # connected: sent at once, after the held ones
        c.finish_run("fo-1")
        session.begin_step()
        session.end_step(thought="steered again", action="read_file", observation="ok")
        session.finish()
    everything = asyncio.run(read_all(s.bootstrap_servers, s.steps_topic, idle_s=2.0))
    events = [e for e in everything if e["run_id"] == "fo-1"]
    print(f"\n4 calls with no broker: {calls_s * 1000:.0f} ms; health changes {seen}")
    assert calls_s < 0.5
    assert [(e["type"], e.get("step")) for e in events] == [
        ("run_start", None),
        *(("step", k) for k in (1, 2, 3, 4)),
        ("run_finish", None),
    ]
    of_session = [(e["type"], e.get("step")) for e in everything if e["run_id"] == "fo-2"]
    assert of_session == [("run_start", None), ("step", 1), ("step", 2), ("step", 3), ("run_finish", None)]
    assert [h for h, _ in seen] == [False, True] and c.dropped_events == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "streams.agent.client"]
    assert sum(m.startswith("steering unavailable") for m in lines) == 1, lines
    assert sum(m.startswith("steering available again") for m in lines) == 1, lines


AGENT = r"""
import json, sys, time, urllib.request
from streams.agent.client import SyncSteeringClient
from streams.local.broker import kafka
from streams.settings import ClientSettings

port, data_dir, env, broker, prefix = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
ready_url = f"http://127.0.0.1:{sys.argv[6]}/ready"  # the worker's
def worker_ready():
    try:
        with urllib.request.urlopen(ready_url, timeout=2):
            return True
    except OSError:
        return False
s = ClientSettings.from_env({"RB_BROKER": broker, "RB_TOPIC_PREFIX": prefix})
health, slowest, k = [], 0.0, 0
def wait(want, limit):
    t = time.monotonic()
    global k, slowest
    while c.healthy != want:
        assert time.monotonic() - t < limit, (want, c.health_reason)
        k += 1
        t0 = time.monotonic(); c.step("mid-1", k, thought="x"); slowest = max(slowest, time.monotonic() - t0)
        time.sleep(0.1)
    return round(time.monotonic() - t, 1)
with SyncSteeringClient(s, deadline_ms=200, on_health=lambda h, r: health.append(h)) as c:
    assert c.healthy, c.health_reason
    c.start_run("mid-1", task="t")
    kafka("stop", int(port), data_dir, env)
    lost_after = wait(False, 20)
    for _ in range(10):  # unsteered calls while the broker is away: queued, not awaited
        k += 1; c.step("mid-1", k, thought="down")
    kafka("start", int(port), data_dir, env)
    back_after = wait(True, 60)
    t = time.monotonic()
    while not worker_ready():  # the worker rejoins its group
        assert time.monotonic() - t < 90, "the worker never became ready again"
        k += 1; c.step("mid-1", k, thought="x"); time.sleep(0.3)
    t, decision = time.monotonic(), None
    while decision is None:  # steered again: the run's events of the outage reached the worker
        assert time.monotonic() - t < 30, "no decision after the broker came back"
        k += 1; decision = c.step("mid-1", k, thought="x")
    steered_again = decision.step
    kafka("stop", int(port), data_dir, env)
    wait(False, 20)
    for _ in range(5):  # events the producer still holds when the agent leaves `with`
        k += 1; c.step("mid-1", k, thought="down again")
    t_close = time.monotonic()
print(json.dumps({"health": health, "slowest": slowest, "lost_after": lost_after, "back_after": back_after,
                  "steered_again_at_step": steered_again,
                  "close_s": time.monotonic() - t_close, "steps": k, "dropped": c.dropped_events}))
"""


def watch_worker(
    w: WorkerProcess, seen: list[tuple[float, bool, float | None]], missing: set[str], done: threading.Event
) -> None:
    """/ready (and what it names missing) and rb_broker_connected, every 0.3 s."""
    base = f"http://127.0.0.1:{w.settings.web_port}"
    while not done.is_set():
        connected, ready = None, False
        try:
            with urllib.request.urlopen(f"{base}/metrics", timeout=2) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("rb_broker_connected "):
                        connected = float(line.split()[1])
            with urllib.request.urlopen(f"{base}/ready", timeout=2):
                ready = True
        except urllib.error.HTTPError as exc:
            missing.update(json.loads(exc.read()).get("missing", []))
        except OSError:
            pass
        seen.append((time.monotonic(), ready, connected))
        time.sleep(0.3)


def test_losing_the_broker_mid_run_restarting_it_and_closing_during_an_outage_never_hurt_the_agent(
    own_broker: Broker, tmp_path
) -> None:
    """An agent process of its own: its exit code and stderr are what the issue saw (leaving
    `with` during an outage raised CancelledError, then "Unclosed AIOKafkaProducer" and "Task
    was destroyed", exit 1). A worker on the same broker meanwhile: not ready while the broker
    is away (it answered ready after 75 s of outage), ready again after, and its log is a line
    per outage, not ~60 ERROR lines a second."""
    own_broker.start()
    s = make_settings(own_broker.url, tmp_path, partitions=2)
    w = WorkerProcess.start(s, tmp_path / "worker.log")
    seen: list[tuple[float, bool, float | None]] = []
    done = threading.Event()
    missing: set[str] = set()
    watcher = threading.Thread(target=watch_worker, args=(w, seen, missing, done), daemon=True)
    watcher.start()
    args = [own_broker.port, own_broker.data_dir, json.dumps(own_broker.env), own_broker.url, s.topic_prefix]
    args.append(s.web_port)
    try:
        p = subprocess.run(
            [sys.executable, "-W", "default", "-c", AGENT, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=REPO,
        )
        time.sleep(3.0)  # the worker sees the second outage too
    finally:
        done.set()
        watcher.join(5)
        w.stop(signal.SIGKILL)  # its graceful stop without a broker is not what this tests (~11 s)
    assert p.returncode == 0, p.stderr[-3000:]
    out: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"\n{out}")
    for bad in ("Traceback", "Unclosed", "Task was destroyed", "CancelledError", "never retrieved"):
        assert bad not in p.stderr, p.stderr[-3000:]
    # the worker: ready, then not (broker away), ready again (restarted), then not
    states = [r for _, r, _ in seen]
    flips = [states[0], *(b for a, b in itertools.pairwise(states) if a != b)]
    print(f"worker /ready over the test: {flips}; rb_broker_connected seen {sorted({c for *_, c in seen})}")
    assert flips[:4] == [True, False, True, False], flips
    assert {c for *_, c in seen} >= {0.0, 1.0}
    assert "broker" in missing, missing
    log_lines = w.log_path.read_text(errors="replace").splitlines()
    outage_lines = [ln for ln in log_lines if "Kafka broker unreachable" in ln]
    kafka_noise = [ln for ln in log_lines if ("ERROR" in ln or "WARNING" in ln) and "aiokafka" in ln]
    noisy = [ln for ln in log_lines if "ERROR" in ln or "WARNING" in ln]
    print(f"worker log: {len(log_lines)} lines, {len(noisy)} warnings/errors, {len(kafka_noise)} of aiokafka")
    print("\n".join(ln[:200] for ln in noisy[:30]))
    assert len(outage_lines) == 2, outage_lines
    assert len(kafka_noise) <= 20, kafka_noise[:40]
    assert out["health"] == [True, False, True, False]
    assert out["steered_again_at_step"] > 10  # a decision after the restart: steering resumed
    assert out["slowest"] < 1.5  # each call about its deadline (200 ms), never the broker's
    assert out["close_s"] < 8.0  # 2 x close timeout (2 s) and the slack of a busy machine
    lines = [ln for ln in p.stderr.splitlines() if "steering unavailable" in ln]
    assert len(lines) == 2, p.stderr[-3000:]  # one per outage


@pytest.fixture
def blackhole() -> Iterator[str]:
    """A port that accepts TCP connections and never answers (a hung broker, a firewall)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not done.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"kafka://127.0.0.1:{srv.getsockname()[1]}"
    done.set()
    t.join(2)
    for conn in held:
        conn.close()
    srv.close()


@pytest.mark.parametrize("use", ["client", "session"])
def test_a_broker_that_never_answers_costs_the_start_its_connect_timeout_and_nothing_more(
    blackhole: str, use: str
) -> None:
    s = ClientSettings.from_env({"RB_BROKER": blackhole})
    t0 = time.monotonic()
    c = SyncSteeringClient(s, connect_timeout_s=1.0)
    with c:
        started_s = time.monotonic() - t0
        assert not c.healthy and "did not answer within 1 s" in c.health_reason
        t1 = time.monotonic()
        if use == "client":
            c.start_run("bh-1", task="t")
            for k in range(1, 11):
                assert c.step("bh-1", k, thought="x") is None
            c.finish_run("bh-1")
        else:
            with SteeringSession(c, "bh-2", task="t", model="m") as run:
                for _ in range(10):
                    steer = run.begin_step()
                    assert steer.model == "m" and steer.decision is None
                    run.end_step(thought="x", action="read_file", observation="ok")
        calls_s = time.monotonic() - t1
        t2 = time.monotonic()
    close_s = time.monotonic() - t2
    print(f"\n{use}: start {started_s:.1f} s, 12 calls {calls_s * 1000:.0f} ms, close {close_s:.1f} s")
    assert started_s < 3.0 and calls_s < 0.5 and close_s < 6.0


QUIET_ON_A_MISSING_TOPIC = ("did not answer", "not found in cluster metadata", "was away", "never took")


def test_a_client_whose_topics_do_not_exist_says_so_in_one_line_at_once_and_at_stop(
    broker: str, tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 48: an agent started before its worker (or with another prefix) was told the
    broker 'did not answer within 3 s' (it had answered), waited those 3 s in start(), and at
    exit 'events the broker never took (it was away)'. The shared broker: a prefix nobody uses."""
    s = make_settings(broker, tmp_path, partitions=2)
    want = f"no topic {s.topic_prefix}.steering: is a worker running with RB_TOPIC_PREFIX={s.topic_prefix}?"
    caplog.set_level(logging.WARNING)
    t0 = time.monotonic()
    with SyncSteeringClient(s, deadline_ms=200) as c:
        took = time.monotonic() - t0
        assert not c.healthy and c.health_reason == want
        t1 = time.monotonic()
        assert c.start_run("mt-1", task="t") is None and c.step("mt-1", 1, thought="x") is None
        calls_s = time.monotonic() - t1
    print(f"\nstart() with no topic: {took * 1000:.0f} ms; two calls {calls_s * 1000:.0f} ms")
    assert took < 1.5, took  # its connect timeout is 3 s: the broker's answer was not waited past
    assert calls_s < 0.5
    lines = [r.getMessage() for r in caplog.records]
    assert sum(want in m for m in lines) == 2, lines  # when it starts, and at stop
    assert [m for m in lines if want in m][1] == f"steering client stopped with 2 events never sent: {want}"
    assert not [m for m in lines if any(q in m for q in QUIET_ON_A_MISSING_TOPIC)], lines


def test_a_client_started_before_its_topics_steers_once_they_appear(broker: str, tmp_path) -> None:
    """Fail open, then steering picked up: the topics created (as a worker's start does), the
    client connects in the background and sends what it held, in order."""
    s = make_settings(broker, tmp_path, partitions=2)
    with SyncSteeringClient(s, deadline_ms=200) as c:
        assert not c.healthy and c.health_reason.startswith("no topic ")
        assert c.start_run("mt-2", task="t") is None
        assert c.step("mt-2", 1, thought="before the topics") is None
        asyncio.run(ensure_topics(s))
        deadline = time.monotonic() + 20  # the retries back off to 5 s
        while not c.healthy:
            assert time.monotonic() < deadline, c.health_reason
            time.sleep(0.2)
        c.step("mt-2", 2, thought="after")
        c.finish_run("mt-2")
        assert c.dropped_events == 0
    events = asyncio.run(read_all(s.bootstrap_servers, s.steps_topic, expect=4, idle_s=2.0))
    assert [(e["type"], e.get("step")) for e in events if e["run_id"] == "mt-2"] == [
        ("run_start", None),
        ("step", 1),
        ("step", 2),
        ("run_finish", None),
    ]
