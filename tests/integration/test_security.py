"""Kafka security on the real local broker: a SASL_PLAINTEXT listener with PLAIN and SCRAM."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.agent.client import SteeringClient
from streams.kafka.security import KafkaAuthError
from streams.local.broker import REPO, kafka
from streams.local.worker_process import WorkerProcess, free_port
from streams.settings import Settings
from tests.integration.helpers import make_settings

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret", "bob": "b0b-s3cret"}


@pytest.fixture(scope="module")
def secured_broker() -> Iterator[dict[str, str]]:
    """A broker of its own with a SASL_PLAINTEXT and an SSL listener (its own CA, which also
    issued a client certificate: the SSL listener requires one)."""
    port, sasl_port, ssl_port, ctrl_port = free_port(), free_port(), free_port(), free_port()
    data_dir = REPO / ".local" / f"test-kafka-sasl-{port}"
    shutil.rmtree(data_dir, ignore_errors=True)
    env = {
        "RB_KAFKA_SASL_PORT": str(sasl_port),
        "RB_KAFKA_SSL_PORT": str(ssl_port),
        "RB_KAFKA_CTRL_PORT": str(ctrl_port),
        "RB_KAFKA_SASL_USERS": ",".join(f"{u}:{p}" for u, p in USERS.items()),
    }
    kafka("start", port, str(data_dir), env)
    yield {
        "sasl": f"kafka://127.0.0.1:{sasl_port}",
        "ssl": f"kafka://127.0.0.1:{ssl_port}",
        "ca": str(data_dir / "tls" / "ca.pem"),
        "cert": str(data_dir / "tls" / "client.pem"),
        "key": str(data_dir / "tls" / "client.key"),
    }
    kafka("stop", port, str(data_dir), env)
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def sasl_broker(secured_broker: dict[str, str]) -> str:
    return secured_broker["sasl"]


def sasl_settings(broker: str, tmp: Path, mechanism: str, user: str, password: str, **kw) -> Settings:
    return make_settings(
        broker, tmp, sasl_mechanism=mechanism, sasl_username=user, sasl_password=password, **kw
    )


def test_worker_and_clients_work_over_sasl_with_plain_and_both_scram_mechanisms(sasl_broker, tmp_path):
    s = sasl_settings(sasl_broker, tmp_path, "SCRAM-SHA-256", "alice", USERS["alice"])
    assert s.kafka_security == "SASL_PLAINTEXT"
    w = WorkerProcess.start(s, tmp_path / "worker.log")
    try:

        async def one_run(mechanism: str, user: str) -> list[int]:
            cs = s.with_(sasl_mechanism=mechanism, sasl_username=user, sasl_password=USERS[user])
            steps = []
            async with SteeringClient(cs, deadline_ms=5000) as c:
                rid = f"sasl-{mechanism.lower()}"
                d = await c.start_run(rid, task="fix the failing test")
                assert d is not None
                steps.append(d.step)
                for i in range(1, 4):
                    d = await c.step(rid, i, thought=f"step {i}", action="bash", difficulty=0.2)
                    assert d is not None, f"no decision for {rid} step {i}"
                    steps.append(d.step)
                await c.finish_run(rid, "success")
            return steps

        async def main() -> list[list[int]]:
            return await asyncio.gather(
                one_run("PLAIN", "bob"), one_run("SCRAM-SHA-256", "alice"), one_run("SCRAM-SHA-512", "bob")
            )

        assert asyncio.run(main()) == [[0, 1, 2, 3]] * 3
    finally:
        w.stop()
    log = w.log_path.read_text(errors="replace")
    assert "Traceback" not in log, w.tail(80)
    assert USERS["alice"] not in log  # the password never reaches the log


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_client_with_a_wrong_password_fails_at_start_with_a_clear_error(sasl_broker, tmp_path, mechanism):
    s = sasl_settings(sasl_broker, tmp_path, mechanism, "alice", "not-her-password")

    async def main() -> None:
        async with SteeringClient(s):
            pass

    t0 = time.monotonic()
    with pytest.raises(KafkaAuthError) as err:
        asyncio.run(main())
    assert time.monotonic() - t0 < 30
    msg = str(err.value)
    assert "rejected the credentials" in msg and mechanism in msg and "'alice'" in msg
    assert "RB_SASL_PASSWORD" in msg
    assert "not-her-password" not in msg


def test_worker_with_a_wrong_password_exits_2_naming_the_settings(sasl_broker, tmp_path):
    s = sasl_settings(sasl_broker, tmp_path, "SCRAM-SHA-512", "mallory", "guess")
    env = dict(os.environ, **{Settings.env_name(k): str(v) for k, v in s.as_dict().items()})
    p = subprocess.run(
        [sys.executable, "-m", "streams", "worker"], env=env, capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2, p.stderr[-3000:]
    assert "rejected the credentials (SASL_PLAINTEXT SCRAM-SHA-512 as 'mallory')" in p.stderr
    assert "Traceback" not in p.stderr


def test_worker_and_client_work_over_tls_and_an_untrusted_certificate_fails_clearly(secured_broker, tmp_path):
    tls = {"ssl_certfile": secured_broker["cert"], "ssl_keyfile": secured_broker["key"]}
    s = make_settings(secured_broker["ssl"], tmp_path, ssl_cafile=secured_broker["ca"], **tls)
    assert s.kafka_security == "SSL"
    w = WorkerProcess.start(s, tmp_path / "worker.log")
    try:

        async def run() -> list[int]:
            async with SteeringClient(s, deadline_ms=5000) as c:
                d0 = await c.start_run("tls-1", task="fix the failing test")
                d1 = await c.step("tls-1", 1, thought="read the test", action="bash")
                return [d.step for d in (d0, d1) if d is not None]

        assert asyncio.run(run()) == [0, 1]
    finally:
        w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(80)

    # The system CA bundle does not know the broker's self-signed certificate.
    untrusted = s.with_(ssl_cafile="", security_protocol="SSL")

    async def connect() -> None:
        async with SteeringClient(untrusted):
            pass

    with pytest.raises(KafkaAuthError) as err:
        asyncio.run(connect())
    assert "RB_SSL_CAFILE" in str(err.value)

    # A client without a certificate of the broker's CA cannot connect (ssl.client.auth=required).
    anonymous = s.with_(ssl_certfile="", ssl_keyfile="")

    async def connect_anonymously() -> None:
        async with SteeringClient(anonymous):
            pass

    with pytest.raises(KafkaAuthError) as err:
        asyncio.run(connect_anonymously())
    assert "client certificate" in str(err.value) and "RB_SSL_CERTFILE" in str(err.value)
