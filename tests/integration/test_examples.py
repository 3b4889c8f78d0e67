"""The runnable examples work end to end against the test broker.

They share one worker (seeded with the starter patterns, as each example's own would be): an
example started with `RB_EXAMPLE_WORKER_PREFIX` uses it instead of starting its own.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.local.broker import reachable
from streams.local.worker_process import WorkerProcess
from tests.integration.helpers import PORT, STARTER, make_settings, start_worker

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
    s = worker.settings  # its agents check the worker's signatures, as a user's would
    env = {
        **os.environ,
        "RB_EXAMPLE_WORKER_PREFIX": s.topic_prefix,
        "RB_DECISION_KEY": s.secret(s.decision_key),
    }
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
    # the third identical check with nothing changed in between (the no-progress floor)
    # the block's header carries the run tag (issue 49)
    assert re.search(
        r"messages \+= \[REASONBLOCKS [0-9a-f]{12}\] You have called `run_check` 3 times in a row", out
    )
    assert "final answer: The check passes" in out


def test_messages_loop_example_is_steered(shared: WorkerProcess) -> None:
    out = run("examples.messages_loop", shared).stdout
    assert "call 4: model claude-sonnet-4-5  steering blocks 1" in out  # after the third same answer
    assert "fired ['semantic_loop'] injected ['monitor']" in out
    # the exported trace: each call's span carries the decision that steered it, and the
    # monitor that fired on step 3 as an evaluation event with the text the agent received
    trace = out[out.index("trace:") :]
    assert trace.count("span 'chat claude-sonnet-4-5'") == 6  # the sixth call answered
    assert "event gen_ai.evaluation.result: semantic_loop score" in trace
    assert "(step 3)" in trace and "rb.action nudge" in trace
    assert "given (monitor): 'You have called `search_docs` 3 times" in trace


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
    stopped = out[out.index("session 2") :]  # the CLI says "success" after a stop: not shown as such
    assert "result: stopped by steering after" in stopped and "result: success" not in stopped


def test_otel_example_monitors_an_instrumented_smolagents_run(shared: WorkerProcess) -> None:
    out = run("examples.otel_smolagents", shared).stdout
    assert "fired ['semantic_loop'] loop" in out, out
    assert "late 0, dropped 0, errors 0" in out, out
    trace = out[out.index("trace:") :]  # the decisions in the trace, with the monitor that fired
    assert "rb.steering.decision (step 1)" in trace and "evaluations ['semantic_loop']" in trace, out


def test_openai_agents_example_hands_off_injects_and_escalates(shared: WorkerProcess) -> None:
    out = run("examples.openai_agents_agent", shared).stdout
    assert "call  1  Triage  model gpt-4.1" in out and "Coder   model gpt-4.1  nudge" in out
    steered = [
        line
        for line in out.splitlines()
        if re.match(r"input \+= \[REASONBLOCKS [0-9a-f]{12}\] ", line.strip())
    ]
    assert any("has run `run_check` with the same input" in line for line in steered), out
    assert "Coder   model o3       escalate" in out  # the ignored warning: model_routing["SLOW"]
    assert "final answer (Coder): The check passes" in out


def own_stack_env(tmp: Path) -> dict[str, str]:
    """An example that starts its own worker (no RB_EXAMPLE_WORKER_PREFIX), its temporary
    folders under `tmp`, and any broker it starts with its data there too."""
    env = {k: v for k, v in os.environ.items() if k != "RB_EXAMPLE_WORKER_PREFIX"}
    return {**env, "TMPDIR": str(tmp / "tmpdir"), "RB_KAFKA_DIR": str(tmp / "kafka")}


def test_an_example_that_fails_removes_its_worker_and_folder(tmp_path: Path) -> None:
    """loop_guard exits 3 (steering stopped its loop): its own worker is stopped and its
    /tmp/rb-example-* folder removed; the broker it did not start is left running."""
    env = own_stack_env(tmp_path)
    (tmp_path / "tmpdir").mkdir()
    p = subprocess.run(
        [sys.executable, "-m", "examples.loop_guard", "--port", str(PORT)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-3000:]
    assert "starting a worker" in p.stdout and "Traceback" not in p.stderr
    assert list((tmp_path / "tmpdir").iterdir()) == []
    assert reachable("127.0.0.1", PORT)


def free_pair() -> int:
    """A port whose next one is free too (the broker's controller listens there)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


def test_ctrl_c_in_an_example_stops_its_broker_and_worker_without_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C while the example starts its worker (the longest wait): exit 130, one line, no
    KeyboardInterrupt traceback; the broker and the worker it started are stopped and its
    folder is gone."""
    port = free_pair()
    env = own_stack_env(tmp_path)
    (tmp_path / "tmpdir").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "examples.messages_loop", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out = ""
        deadline = time.monotonic() + 240
        assert proc.stdout is not None
        while "starting a worker" not in out and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            out += line
        assert "starting the local Kafka broker" in out and "starting a worker" in out, out
        # the worker process is loading (a start takes 3 s on a quiet machine, ~10 s under load):
        # interrupt that, before the example's few calls are done
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        if reachable("127.0.0.1", port):  # the test's own clean-up if the example's failed
            from streams.local.broker import kafka

            kafka("stop", port, str(tmp_path / "kafka"))
    assert proc.returncode == 130, out + rest + err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "interrupted" in err
    assert not reachable("127.0.0.1", port)  # the broker the example started is stopped
    assert list((tmp_path / "tmpdir").iterdir()) == []
