"""A worker stopped at any moment of its start-up leaves no process behind (issue 48: SIGINT or
SIGTERM while its embedding child loaded the model left the child running, adopted by init,
~157 MB). Real workers on the shared broker, each marked with an environment variable its
children inherit: 5 s after each worker has exited, no process in /proc carries its mark.

The moments are events, not fixed delays (a start-up takes 5 s or 20 s depending on the
machine's load): before the child exists, the moment it appears (it is loading the model),
and a second later (loading, or embedding the seed library). SIGKILL at the child's
appearance proves the child's own watch (no handler of the worker can run)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from streams.local.worker_process import WorkerProcess
from tests.integration.helpers import STARTER, make_settings

pytestmark = pytest.mark.integration

MARK = "STREAMS_TEST_STOP_MARK"
EMBEDDER = "multiprocessing.spawn"  # the embedding child's command line (spawn_main)
SURVIVAL_S = 5.0


def marked(mark: str) -> dict[int, str]:
    """pid -> command line of every process whose environment holds `mark`."""
    needle = f"{MARK}={mark}".encode()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours
            continue
    return found


def wait_for(what: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.05)
    return False


def embedder_up(w: WorkerProcess, mark: str) -> Callable[[], bool]:
    def up() -> bool:
        assert w.proc.poll() is None, f"the worker exited on its own:\n{w.tail()}"
        return any(EMBEDDER in cmd for cmd in marked(mark).values())

    return up


# (when, signal): "start+1": 1 s after the worker was launched; "child": as soon as its embedding
# child exists; "child+1": a second later
MOMENTS = [
    ("start+1", signal.SIGTERM),
    ("child", signal.SIGKILL),
    ("child", signal.SIGTERM),
    ("child+1", signal.SIGINT),
]


def stop_at(broker: str, tmp: Path, when: str, sig: signal.Signals) -> None:
    """Start a marked worker, signal it at `when`, and check that nothing of it is left."""
    tmp.mkdir(parents=True, exist_ok=True)
    mark = uuid.uuid4().hex
    # a seed library: the start-up embeds it in the child, so "child+1" may land mid-embedding
    s = make_settings(broker, tmp, patterns_seed=str(STARTER))
    w = WorkerProcess(s, tmp / "worker.log", extra_env={MARK: mark})
    try:
        if when == "start+1":
            time.sleep(1.0)
        else:
            assert wait_for(embedder_up(w, mark), 120.0), f"no embedding child after 120 s:\n{w.tail()}"
            if when == "child+1":
                time.sleep(1.0)
        children = {pid: cmd for pid, cmd in marked(mark).items() if pid != w.proc.pid}
        w.proc.send_signal(sig)
        w.proc.wait(60)
        gone = wait_for(lambda: not marked(mark), SURVIVAL_S)
        left = marked(mark)
        assert gone and not left, (
            f"{sig.name} at {when} (children then: {children}): still alive {SURVIVAL_S:g} s after the "
            f"worker exited ({w.proc.returncode}): {left}"
        )
        if when != "start+1":
            assert any(EMBEDDER in cmd for cmd in children.values()), children  # the moment was real
        if when == "child" and sig == signal.SIGTERM:  # mid start-up: the worker's own handler ran
            assert w.proc.returncode == 128 + signal.SIGTERM, w.tail()
        if sig != signal.SIGKILL:
            assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(80)
    finally:
        for pid in marked(mark):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        w.stop()


def test_a_worker_stopped_during_start_up_leaves_no_process_behind(broker: str, tmp_path: Path) -> None:
    """The four moments side by side (each its own worker, mark and folder): a start-up is
    mostly waiting on the model load and the broker, so together they take about one's time."""
    with ThreadPoolExecutor(len(MOMENTS)) as pool:
        futures = {
            f"{when}-{sig.name}": pool.submit(stop_at, broker, tmp_path / f"{when}-{sig.name}", when, sig)
            for when, sig in MOMENTS
        }
    failures = {name: f.exception() for name, f in futures.items() if f.exception() is not None}
    assert not failures, "\n\n".join(f"{name}: {exc}" for name, exc in failures.items())
