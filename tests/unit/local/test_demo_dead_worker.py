"""The demo notices that its worker died (issue 48: its agents, failing open, went on unsteered
and it printed "done: every step in time got its decision above"). A real worker process that
dies during the demo: one given an invalid setting, which exits 2 once it has read it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from streams.local.demo import run_fleet, while_alive
from streams.local.worker_process import WorkerProcess, free_port
from streams.settings import Settings


def test_the_demo_says_its_worker_died_and_exits_1_without_its_done_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = f"dead{uuid.uuid4().hex[:6]}"
    settings = Settings.from_env(
        {},
        broker=f"kafka://127.0.0.1:{free_port()}",  # nothing listens: the agents go on unsteered
        topic_prefix=prefix,
        app_id=f"app-{prefix}",
        data_dir=str(tmp_path / "worker"),
        web_port=free_port(),
    )
    worker = WorkerProcess(settings, tmp_path / "worker.log", extra_env={"RB_PARTITIONS": "none"})
    try:
        t0 = time.monotonic()
        rc = run_fleet(settings, worker, runs=2, steps=400)  # ~50 s of steps if nobody noticed
        took = time.monotonic() - t0
    finally:
        worker.stop()
    out, err = capsys.readouterr()
    assert rc == 1
    assert "the worker died during the demo (exit code 2)" in err
    assert "RB_PARTITIONS: 'none' is not valid" in err  # the end of its log says why
    assert "done:" not in out and "what each agent got" not in out
    assert took < 30, took  # noticed within a check of its exit, not at the end of the runs


def test_while_alive_returns_the_result_while_the_process_runs() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:

        async def work() -> int:
            await asyncio.sleep(0.6)  # longer than a check: the loop goes round
            return 42

        assert asyncio.run(while_alive(work(), proc)) == 42
    finally:
        proc.kill()
        proc.wait()
