"""The `rb-streams` entry point: without the worker's dependencies a command says what to
install in one line (exit 2); with them it is the CLI."""

from __future__ import annotations

import argparse

import pytest

from streams import __version__
from streams.cli.entry import HINT, main, missing_worker_dependencies, worker_requirements

REQUIRES = [
    "aiokafka<0.15,>=0.14",
    'numpy<3,>=1.26; extra == "worker"',
    "faust-streaming<0.16,>=0.15.3 ; extra == 'worker'",
    'pytest<10,>=8; extra == "dev"',
    'langchain<2,>=1.0; extra == "langchain"',
]


def test_the_worker_extra_is_read_from_the_package_metadata() -> None:
    assert worker_requirements(REQUIRES) == ["numpy", "faust-streaming"]


def test_installed_worker_dependencies_are_not_missing() -> None:
    assert missing_worker_dependencies(REQUIRES) == []  # this environment has the worker


def test_a_command_without_the_worker_says_what_to_install(capsys: pytest.CaptureFixture[str]) -> None:
    requires = [*REQUIRES, 'rb-no-such-dist>=1; extra == "worker"', 'rb-nor-this; extra == "worker"']
    assert main(["worker"], requires=requires) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines() == [
        f"rb-streams: the worker needs `{HINT}` (not installed: rb-no-such-dist, rb-nor-this)"
    ]


def test_with_the_worker_it_is_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--json"], requires=REQUIRES) == 0
    assert '"partitions"' in capsys.readouterr().out


def test_the_version_is_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"], requires=REQUIRES)
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"rb-streams {__version__}"


MISSING = [*REQUIRES, 'rb-no-such-dist>=1; extra == "worker"']  # an install without the worker


def test_a_client_only_install_prints_its_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"], requires=MISSING)
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"rb-streams {__version__}"
    with pytest.raises(SystemExit) as exc:
        main(["--help"], requires=MISSING)
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "kafka" in out and "config" in out and HINT in " ".join(out.split())


def test_the_client_only_commands_cover_the_clis_commands() -> None:
    from streams.cli.entry import WORKER_COMMANDS
    from streams.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == {*WORKER_COMMANDS, "kafka", "config"}


def test_a_client_only_install_shows_the_agent_sides_config_and_refuses_a_bad_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RB_BROKER", "kafka://broker-1:9092")
    assert main(["config"], requires=MISSING) == 0
    out = capsys.readouterr().out
    assert "RB_BROKER" in out and "kafka://broker-1:9092" in out and "RB_CLIENT_DEADLINE_MS" in out
    monkeypatch.setenv("RB_BROKER", "ftp://x:1")
    assert main(["config", "--json"], requires=MISSING) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rb-streams: invalid configuration: RB_BROKER")


def test_a_client_only_install_runs_the_local_broker_command(capfd: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["kafka", "status", "--port", str(port)], requires=MISSING) == 1
    assert capfd.readouterr().out.strip() == "not running"  # the broker script's own answer
    assert main(["replay", "x.jsonl", "--strict"], requires=MISSING) == 2  # a worker command: one line
    assert capfd.readouterr().err.startswith("rb-streams: the worker needs")
