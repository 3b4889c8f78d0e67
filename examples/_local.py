"""Shared by the examples: a local broker (started if none listens) and a worker seeded with
the starter pattern library, both stopped on exit, and the worker's temporary folder removed,
whether the example succeeds, fails or is interrupted (Ctrl-C: exit 130, no traceback).

With `RB_EXAMPLE_WORKER_PREFIX` set (a running worker's `RB_TOPIC_PREFIX`), the examples use
the worker already serving that topic prefix instead of starting their own (the test suite
runs every example against one worker). That needs only the agent side's install: without
the worker's packages, an example that would start a worker says so in one line.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streams.kafka.client_settings import ClientSettings
from streams.local.broker import REPO, kafka, reachable

WORKER_HINT = "pip install './[worker]'"


@contextlib.contextmanager
def local_stack(port: int = 9092) -> Iterator[ClientSettings]:
    shared = os.environ.get("RB_EXAMPLE_WORKER_PREFIX")
    if not shared and importlib.util.find_spec("numpy") is None:
        sys.exit(
            f"this example starts a local worker, which needs the worker's packages ({WORKER_HINT}); "
            "to use a worker that is already running, set RB_EXAMPLE_WORKER_PREFIX to its RB_TOPIC_PREFIX"
        )
    started = False
    tmp: Path | None = None
    worker: Any = None
    try:
        if not reachable("127.0.0.1", port):
            print(f"starting the local Kafka broker on 127.0.0.1:{port} ...", flush=True)
            started = True  # set first: a Ctrl-C while it starts still stops it
            kafka("start", port)
        if shared:
            yield ClientSettings.from_env(
                broker=f"kafka://127.0.0.1:{port}", topic_prefix=shared, client_deadline_ms=5000
            )
            return
        from streams.local.worker_process import WorkerProcess, free_port  # the worker's side
        from streams.settings import Settings

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
        yield worker.settings  # with the decision key the worker signs with (made for this run)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping what the example started ...", file=sys.stderr, flush=True)
        raise SystemExit(130) from None  # the shell's code for Ctrl-C, without a traceback
    finally:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut this short
        try:
            if worker is not None:
                worker.stop()
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            if started:
                with contextlib.suppress(Exception):
                    kafka("stop", port)
        finally:
            signal.signal(signal.SIGINT, previous)
