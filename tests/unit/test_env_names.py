"""A misspelt RB_* variable is said once, with the closest name (issue 48: RB_BORKER was
ignored in silence). Agents and workers often share an environment, so neither side warns
about the other's variables, nor about the tools' own (the local broker's, tests', benches')."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from streams.kafka import client_settings
from streams.kafka.client_settings import (
    OTHER_ENV_PREFIXES,
    WORKER_ENV_NAMES,
    ClientSettings,
    unknown_env_names,
)
from streams.settings import Settings

REPO = Path(__file__).resolve().parents[2]
# where RB_* names are read or set: the package, its scripts, deployments, examples, benches
CODE = ["streams", "scripts", "deploy", "examples", "bench", "Makefile", "docker-compose.yml"]
NAME = re.compile(r"\bRB_[A-Z0-9_]*[A-Z0-9]\b")


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_settings, "_WARNED", set())  # "once per process": a new process


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "streams.settings"]


@pytest.mark.parametrize("cls", [ClientSettings, Settings], ids=["client", "worker"])
def test_an_unknown_name_is_warned_about_once_with_the_closest_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, cls: type[ClientSettings]
) -> None:
    monkeypatch.setenv("RB_BORKER", "kafka://elsewhere:9092")
    caplog.set_level(logging.WARNING, logger="streams.settings")
    for _ in range(3):
        cls.from_env()
    assert warnings(caplog) == [
        "RB_BORKER is not a variable rb-streams reads (did you mean RB_BROKER?): ignored"
    ]


def test_a_name_close_to_nothing_is_warned_about_without_a_guess(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RB_ZQXJ", "1")
    caplog.set_level(logging.WARNING, logger="streams.settings")
    ClientSettings.from_env()
    assert warnings(caplog) == ["RB_ZQXJ is not a variable rb-streams reads: ignored"]


def test_the_client_does_not_warn_about_the_workers_or_the_tools_variables(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in [*WORKER_ENV_NAMES, "RB_DEBUG", "RB_MODELS_DIR", "RB_KAFKA_PORT", "RB_TEST_KAFKA_PORT"]:
        monkeypatch.setenv(name, "x")  # values are not read by the client: only names are checked
    caplog.set_level(logging.WARNING, logger="streams.settings")
    assert unknown_env_names(dict.fromkeys(WORKER_ENV_NAMES, "x"), ClientSettings.known_env_names()) == []
    monkeypatch.setenv("RB_CLIENT_DEADLINE_MS", "300")
    ClientSettings.from_env()
    assert warnings(caplog) == []


def test_settings_read_from_a_given_mapping_warn_about_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="streams.settings")
    ClientSettings.from_env({"RB_BORKER": "x"})  # tests, the CLI's own lookups: not the process's
    assert warnings(caplog) == []


def test_the_clients_list_of_worker_variables_is_the_workers_settings() -> None:
    """The client cannot import the worker's settings (a client-only install has no core), so
    it keeps their names: a new worker field must be added to WORKER_ENV_NAMES."""
    worker = {Settings.env_name(n) for n in Settings.model_fields} | {
        Settings.env_name(n) + "_FILE" for n in Settings.SECRETS
    }
    client = {ClientSettings.env_name(n) for n in ClientSettings.model_fields} | {
        ClientSettings.env_name(n) + "_FILE" for n in ClientSettings.SECRETS
    }
    assert worker - client - WORKER_ENV_NAMES == set(), "add these to client_settings.WORKER_ENV_NAMES"
    assert WORKER_ENV_NAMES - (worker - client) == set(), "no worker setting has these names"


def test_every_rb_name_the_code_uses_is_known_to_both_sides() -> None:
    used: set[str] = set()
    for entry in CODE:
        path = REPO / entry
        files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
        for f in files:
            if f.suffix in {".py", ".sh", ".yml", ".yaml", ".toml", ".env", ""} or f.name == "Makefile":
                used |= set(NAME.findall(f.read_text(errors="ignore")))
    assert "RB_BROKER" in used and "RB_ETRACE_EMBEDDER" in used  # the scan reads what it should
    for cls in (ClientSettings, Settings):
        unknown = {n for n in used if n not in cls.known_env_names() and not n.startswith(OTHER_ENV_PREFIXES)}
        assert unknown == set(), f"{cls.__name__} would warn about {sorted(unknown)}"
