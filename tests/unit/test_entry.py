"""The `rb-streams` entry point: without the worker's dependencies a command says what to
install in one line (exit 2); with them it is the CLI."""

from __future__ import annotations

import pytest

from streams import __version__
from streams.entry import HINT, main, missing_worker_dependencies, worker_requirements

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
