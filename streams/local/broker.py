"""Drive deploy/kafka/kafka.sh (the Maven-resolved local broker) from Python."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "kafka" / "kafka.sh"


def reachable(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _env(port: int, data_dir: str | None, extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ, RB_KAFKA_PORT=str(port))
    if data_dir:
        env["RB_KAFKA_DIR"] = data_dir
    env.update(extra or {})
    return env


def kafka(
    command: str, port: int = 9092, data_dir: str | None = None, env: dict[str, str] | None = None
) -> None:
    """Run kafka.sh; `env` adds its other variables (RB_KAFKA_SASL_PORT, RB_KAFKA_SASL_USERS...)."""
    if not SCRIPT.exists():
        raise RuntimeError(f"{SCRIPT} not found: the local broker needs a checkout of the repository")
    subprocess.run(["bash", str(SCRIPT), command], env=_env(port, data_dir, env), check=True)
