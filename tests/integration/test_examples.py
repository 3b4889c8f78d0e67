"""The runnable examples work end to end against the test broker."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.conftest import PORT

pytestmark = pytest.mark.integration


def run(module: str) -> str:
    p = subprocess.run(
        [sys.executable, "-m", module, "--port", str(PORT)], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_langchain_example_shows_routing_and_injections(broker: str) -> None:
    out = run("examples.langchain_agent")
    assert "model claude-haiku-4-5" in out  # routed once the run turned FAST
    assert "system += [REASONBLOCKS] You have run `run_check` with the same input" in out
    assert "final answer: The check passes" in out


def test_messages_loop_example_is_steered(broker: str) -> None:
    out = run("examples.messages_loop")
    assert "call 5: model claude-sonnet-4-5  system blocks 2" in out
    assert "fired ['semantic_loop'] injected ['monitor']" in out
