"""Shared by the examples: a local broker (started if none listens) and a worker seeded with
the starter pattern library, both stopped on exit."""

from __future__ import annotations

import contextlib
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
    prefix = f"ex{uuid.uuid4().hex[:6]}"
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
    print("starting a worker ...", flush=True)
    worker = WorkerProcess.start(s, tmp / "worker.log")
    try:
        yield s
    finally:
        worker.stop()
        if started:
            kafka("stop", port)
