"""Integration fixtures: a real local Kafka broker (deploy/kafka/kafka.sh) and real workers.
Listed in tests/conftest.py's `pytest_plugins`; the helpers are in tests/integration/helpers.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.local.broker import REPO, kafka, reachable
from streams.local.worker_process import WorkerProcess, free_port
from tests.integration.helpers import PORT, STARTER, make_settings, start_worker, without_checkout


@pytest.fixture(scope="session")
def broker() -> Iterator[str]:
    """A broker on PORT; started (fresh data dir) unless one is already listening there."""
    started = False
    data_dir = REPO / ".local" / f"test-kafka-{PORT}"
    if not reachable("127.0.0.1", PORT):
        shutil.rmtree(data_dir, ignore_errors=True)
        t0 = time.monotonic()
        kafka("start", PORT, str(data_dir))
        print(f"\nlocal Kafka broker started in {time.monotonic() - t0:.1f}s", file=sys.stderr)
        started = True
    yield f"kafka://127.0.0.1:{PORT}"
    if started and not os.environ.get("RB_TEST_KEEP_BROKER"):
        kafka("stop", PORT, str(data_dir))


@pytest.fixture(scope="session")
def spare_broker_session() -> Iterator[tuple[str, int, str, dict[str, str]]]:
    """A second broker, started once for the tests that stop and restart a broker mid-run
    (test_broker_restart, test_client_outage): theirs to take down, never the shared one."""
    port, ctrl = free_port(), free_port()
    data_dir = REPO / ".local" / f"test-kafka-spare-{port}"
    shutil.rmtree(data_dir, ignore_errors=True)
    env = {"RB_KAFKA_CTRL_PORT": str(ctrl)}
    kafka("start", port, str(data_dir), env)
    yield f"kafka://127.0.0.1:{port}", port, str(data_dir), env
    kafka("stop", port, str(data_dir), env)
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def spare_broker(
    spare_broker_session: tuple[str, int, str, dict[str, str]],
) -> tuple[str, int, str, dict[str, str]]:
    """The spare broker, running (a test that failed mid-outage may have left it stopped):
    (url, port, data dir, kafka.sh environment)."""
    _, port, data_dir, env = spare_broker_session
    kafka("start", port, data_dir, env)  # a no-op when it is running
    return spare_broker_session


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the checkout, built once per session (test_wheel, test_client_only_install)."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(REPO)],
        check=True,
        timeout=600,
        env=without_checkout(),
    )
    (wheel,) = dist.glob("rb_streams-*.whl")
    return wheel


@pytest.fixture(scope="session")
def worker(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """A worker with the default settings, shared by the session (test_fuzz,
    test_hostile_producer, test_pipeline; a start costs ~10 s): each test makes its own runs
    and reads back only those, or only what came after it began (kafka_io.end_offsets)."""
    tmp = tmp_path_factory.mktemp("worker")
    # no key given, as a user of the local harness gives none: the harness makes one (its
    # clients are made from w.settings, which holds it)
    w = start_worker(make_settings(broker, tmp, decision_key=""), tmp)
    yield w
    w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)


@pytest.fixture(scope="session")
def adapters_worker(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """One worker shared by the framework adapters' modules, test_escalation and
    test_deadletters (a start costs ~10 s): every test makes its own runs and reads back only
    those."""
    tmp = tmp_path_factory.mktemp("adapters")
    # signed decisions (RB_DECISION_KEY): the adapters' clients, made from these settings, check them
    w = start_worker(make_settings(broker, tmp, client_deadline_ms=15000), tmp)
    yield w
    w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)


@pytest.fixture(scope="session")
def seeded_worker(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """One worker with the starter pattern library, shared by test_etraces and test_langchain
    (a seeded start embeds the whole library): every test makes its own runs and reads back
    only those, and counts metrics as differences."""
    tmp = tmp_path_factory.mktemp("seeded")
    s = make_settings(
        broker, tmp, patterns_seed=str(STARTER), etrace_timeout_ms=2000, client_deadline_ms=15000
    )
    w = start_worker(s, tmp)
    yield w
    w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)
