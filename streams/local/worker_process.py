"""Run `rb-streams worker` as a child process and wait until it answers (demo, tests, bench)."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from ..admin.topics import ensure_topics
from ..agent.client import SteeringClient
from ..settings import Settings


def signed(settings: Settings, key: str = "") -> Settings:
    """`settings` with a decision key: its own (RB_DECISION_KEY), else `key`, else a random one
    for this run, so that every worker the local harness starts signs its decisions and every
    agent made from the same settings drops a forged one (docs/production.md)."""
    if settings.decision_key.get_secret_value():
        return settings
    return settings.with_(decision_key=key or secrets.token_hex(32))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WorkerProcess:
    """A worker child process. It always signs its decisions: with the settings' key, or one
    made for it (`signed`); `settings` is what agents of this worker use (the key included)."""

    def __init__(self, settings: Settings, log_path: Path, extra_env: dict[str, str] | None = None) -> None:
        self.settings = settings = signed(settings)
        self.log_path = log_path
        env = dict(os.environ)
        env.update({Settings.env_name(k): str(v) for k, v in settings.as_dict().items()})
        env.update(extra_env or {})
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 (lives as long as the worker)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streams", "worker"], env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    @classmethod
    def start(
        cls,
        settings: Settings,
        log_path: Path,
        timeout_s: float = 120.0,
        extra_env: dict[str, str] | None = None,
    ) -> WorkerProcess:
        w = cls(settings, log_path, extra_env)
        try:
            asyncio.run(w.wait_ready(timeout_s))
        except BaseException:
            w.stop()
            raise
        return w

    @classmethod
    def start_all(
        cls, specs: Sequence[tuple[Settings, Path]], timeout_s: float = 120.0
    ) -> list[WorkerProcess]:
        """Launch every worker at once, then wait until all are ready: replicas of one app
        load their models side by side and join the group together, in about one worker's
        start time instead of one each. On failure every one of them is stopped. Those given
        no decision key share one made for them: replicas of one app sign alike."""
        workers: list[WorkerProcess] = []
        key = secrets.token_hex(32)
        try:
            for settings, log_path in specs:
                workers.append(cls(signed(settings, key), log_path))

            async def all_ready() -> None:
                await asyncio.gather(*(w.wait_ready(timeout_s) for w in workers))

            asyncio.run(all_ready())
        except BaseException:
            for w in workers:
                w.stop()
            raise
        return workers

    def http_ready(self) -> bool:
        url = f"http://127.0.0.1:{self.settings.web_port}/ready"
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    async def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Ready once this worker says so on /ready and a probe run's decision 0 comes back
        (from whichever worker owns the probe's partition)."""
        await ensure_topics(self.settings)
        deadline = time.monotonic() + timeout_s
        while not await asyncio.to_thread(self.http_ready):
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {self.proc.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker not ready after {timeout_s}s:\n{self.tail()}")
            await asyncio.sleep(0.2)
        # multi-tenant mode: the probe goes through the first tenant's topics
        tenants = self.settings.tenant_names
        probe = self.settings.with_(tenant=tenants[0]) if tenants else self.settings
        async with SteeringClient(probe, deadline_ms=1000) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"worker exited with {self.proc.returncode}:\n{self.tail()}")
                if await c.start_run(f"probe-{uuid.uuid4().hex[:8]}") is not None:
                    return
        raise TimeoutError(f"worker not ready after {timeout_s}s:\n{self.tail()}")

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
