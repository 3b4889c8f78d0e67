"""The runnable examples work end to end against the test broker.

They share one worker (seeded with the starter patterns, as each example's own would be): an
example started with `RB_EXAMPLE_WORKER_PREFIX` uses it instead of starting its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.local.worker_process import WorkerProcess
from tests.integration.conftest import PORT, STARTER, make_settings, start_worker

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def shared(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    tmp = tmp_path_factory.mktemp("examples")
    w = start_worker(
        make_settings(broker, tmp, partitions=2, patterns_seed=str(STARTER), client_deadline_ms=5000), tmp
    )
    yield w
    w.stop()
    assert "Traceback" not in Path(w.log_path).read_text(errors="replace"), w.tail(120)


def run(module: str, worker: WorkerProcess, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RB_EXAMPLE_WORKER_PREFIX": worker.settings.topic_prefix}
    p = subprocess.run(
        [sys.executable, "-m", module, "--port", str(PORT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == code, p.stdout[-2000:] + p.stderr[-3000:]
    return p


def test_langchain_example_shows_routing_and_injections(shared: WorkerProcess) -> None:
    out = run("examples.langchain_agent", shared).stdout
    assert "model claude-haiku-4-5" in out  # routed once the run turned FAST
    assert "messages += [REASONBLOCKS] You have run `run_check` with the same input" in out
    assert "final answer: The check passes" in out


def test_messages_loop_example_is_steered(shared: WorkerProcess) -> None:
    out = run("examples.messages_loop", shared).stdout
    assert "call 5: model claude-sonnet-4-5  steering blocks 1" in out
    assert "fired ['semantic_loop'] injected ['monitor']" in out


def test_the_cli_wrapper_example_exits_3_when_steering_stops_its_loop(shared: WorkerProcess) -> None:
    p = run("examples.loop_guard", shared, code=3)
    assert "stopped by steering after step" in p.stderr
    assert "claude-opus-4-5 escalate" in p.stdout  # escalated before it was stopped


def test_claude_agent_example_is_steered_and_stopped(shared: WorkerProcess) -> None:
    out = run("examples.claude_agent", shared).stdout
    assert "claude-haiku-4-5-20251001    calls Grep  [sub-agent of toolu_01Task]" in out
    assert "set_model(claude-opus-4-5) sent to Claude Code" in out
    assert "continue=false, stopReason = Run stopped by rb-streams steering: semantic_loop warned" in out
    assert out.rstrip().endswith(": failure: stopped_by_steering")


def test_otel_example_monitors_an_instrumented_smolagents_run(shared: WorkerProcess) -> None:
    out = run("examples.otel_smolagents", shared).stdout
    assert "fired ['semantic_loop'] loop" in out, out
    assert "late 0, dropped 0, errors 0" in out, out


def test_openai_agents_example_hands_off_injects_and_escalates(shared: WorkerProcess) -> None:
    out = run("examples.openai_agents_agent", shared).stdout
    assert "call  1  Triage  model gpt-4.1" in out and "Coder   model gpt-4.1  nudge" in out
    steered = [line for line in out.splitlines() if line.strip().startswith("input += [REASONBLOCKS]")]
    assert any("has run `run_check` with the same input" in line for line in steered), out
    assert "Coder   model o3       escalate" in out  # the ignored warning: model_routing["SLOW"]
    assert "final answer (Coder): The check passes" in out
