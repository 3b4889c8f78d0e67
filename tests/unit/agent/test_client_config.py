"""A bad agent-side setting never stops the agent (issue 48: RB_CLIENT_DEADLINE_MS=25O raised
SettingsError, with a traceback, inside the agent process). An invalid RB_* value turns
steering off for that client: one log line naming the variable, `healthy` False with the
reason, every call unsteered and nothing sent. A mistake in code (an explicit argument) still
raises at construction."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from streams.agent.adapters.otel import SteeringSpanProcessor
from streams.agent.client import SteeringClient, SyncSteeringClient
from streams.kafka.client_settings import SettingsError

# variable -> (its bad value, the variable the reason names)
BAD_ENV = {
    "RB_CLIENT_DEADLINE_MS": ("25O", "RB_CLIENT_DEADLINE_MS"),
    "RB_BROKER": ("ftp://broker:9092", "RB_BROKER"),
    "RB_TOPIC_PREFIX": ("my prefix", "RB_TOPIC_PREFIX"),
    "RB_CLIENT_CALL_GATE": ("maybe", "RB_CLIENT_CALL_GATE"),
    "RB_TENANT": ("a.b", "RB_TENANT"),
    "RB_SECURITY_PROTOCOL": ("SASL_SSL", "RB_SASL_MECHANISM"),  # across fields: what is missing
    "RB_DECISION_KEY_FILE": ("/nonexistent/decision.key", "RB_DECISION_KEY_FILE"),  # named, missing
    "RB_SECRETS_DIR": ("/nonexistent/secrets", "RB_SECRETS_DIR"),
}


@pytest.mark.parametrize(("var", "value", "name"), [(k, *v) for k, v in BAD_ENV.items()], ids=list(BAD_ENV))
def test_an_invalid_variable_runs_the_agent_unsteered_with_one_line_and_the_reason(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, var: str, value: str, name: str
) -> None:
    monkeypatch.setenv(var, value)
    caplog.set_level(logging.WARNING, logger="streams")
    health: list[tuple[bool, str]] = []
    c = SyncSteeringClient(on_health=lambda h, r: health.append((h, r)))  # does not raise
    t0 = time.monotonic()
    with c:
        assert not c.healthy
        assert c.config_error is not None and name in c.health_reason
        assert c.health_reason == c.config_error
        assert c.start_run("cfg-1", task="t") is None
        for k in (1, 2, 3):
            assert c.step("cfg-1", k, thought="x", action="bash", observation="ok") is None
        c.finish_run("cfg-1")
        assert [e.steered for e in c.step_log("cfg-1")] == [False] * 4
        assert c.check_call("cfg-1", "bash", {"cmd": "ls"}).allow  # the gate fails open too
    took = time.monotonic() - t0
    assert took < 1.0, took  # no broker asked: nothing to wait for
    assert c.dropped_events == 0  # nothing was queued to be lost
    assert health == [(False, c.config_error)]
    lines = [r.getMessage() for r in caplog.records if r.name == "streams.agent.client"]
    assert len(lines) == 1 and lines[0].startswith("steering is off: invalid setting "), lines
    assert name in lines[0] and "the agent goes on unsteered" in lines[0]


async def test_the_async_client_fails_open_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RB_CLIENT_DEADLINE_MS", "25O")
    async with SteeringClient() as c:
        assert not c.healthy and "RB_CLIENT_DEADLINE_MS: '25O' is not valid" in c.health_reason
        assert await c.start_run("cfg-2") is None
        assert await c.step("cfg-2", 1, thought="x") is None
        await c.finish_run("cfg-2")


def test_an_otel_processor_connecting_from_a_bad_environment_observes_nothing_and_raises_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RB_CLIENT_DEADLINE_MS", "25O")
    proc = SteeringSpanProcessor.connect()
    try:
        assert not proc.client.healthy
    finally:
        proc.shutdown()


def test_an_explicit_value_overrides_a_bad_variable_of_the_same_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RB_CLIENT_DEADLINE_MS", "25O")
    c = SteeringClient(deadline_ms=300)
    assert c.config_error is None and c.deadline_ms == 300


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"topic_prefix": "my prefix"}, SettingsError),
        ({"deadline_ms": 0}, ValueError),
        ({"deadline_ms": "250"}, ValueError),
    ],
    ids=["topic_prefix", "deadline_ms=0", "deadline_ms=str"],
)
def test_an_invalid_explicit_argument_raises_at_construction(kwargs: dict[str, object], error: type) -> None:
    with pytest.raises(error):
        SyncSteeringClient(**kwargs)  # type: ignore[arg-type]


def test_an_explicit_bad_argument_raises_even_when_the_environment_is_bad_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RB_CLIENT_DEADLINE_MS", "25O")
    with pytest.raises(SettingsError, match="RB_TOPIC_PREFIX"):
        SteeringClient(topic_prefix="my prefix")
