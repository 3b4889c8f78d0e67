"""Shared by the examples: a local broker (started if none listens) and a worker seeded with
the starter pattern library, both stopped on exit.

With `RB_EXAMPLE_WORKER_PREFIX` set, the examples use the worker already serving that topic
prefix instead of starting their own (the test suite runs every example against one worker).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from streams.local.broker import REPO, kafka, reachable
from streams.local.worker_process import WorkerProcess, free_port
from streams.settings import Settings


@contextlib.contextmanager
def local_stack(port: int = 9092) -> Iterator[Settings]:
    started = False
    if not reachable("127.0.0.1", port):
        print(f"starting the local Kafka broker on 127.0.0.1:{port} ...", flush=True)
        kafka("start", port)
        started = True
    tmp = Path(tempfile.mkdtemp(prefix="rb-example-"))
    shared = os.environ.get("RB_EXAMPLE_WORKER_PREFIX")
    prefix = shared or f"ex{uuid.uuid4().hex[:6]}"
    s = Settings.from_env(
        broker=f"kafka://127.0.0.1:{port}",
        topic_prefix=prefix,
        app_id=f"rb-example-{prefix}",
        partitions=2,
        data_dir=str(tmp),
        web_port=free_port(),
        log_level="warn",
        patterns_seed=str(REPO / "patterns" / "starter.jsonl"),
        client_deadline_ms=5000,
    )
    worker = None
    if not shared:
        print("starting a worker ...", flush=True)
        worker = WorkerProcess.start(s, tmp / "worker.log")
    try:
        yield s
    finally:
        if worker is not None:
            worker.stop()
        if started:
            kafka("stop", port)
