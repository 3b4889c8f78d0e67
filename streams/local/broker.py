"""Drive the local broker script (Maven-resolved Apache Kafka, KRaft) from Python.

In a checkout the script is deploy/kafka/kafka.sh and keeps its jars and data under the
repository. An installed package carries the same script, pom.xml and log configuration as
package data (streams/data/kafka); it then resolves the jars into a user cache directory and
keeps broker data under the user's data directory, never inside site-packages.
"""

from __future__ import annotations

import os
import socket
import subprocess
from importlib import resources
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHECKOUT_SCRIPT = REPO / "deploy" / "kafka" / "kafka.sh"


def packaged_script() -> Path:
    return Path(str(resources.files("streams").joinpath("data", "kafka", "kafka.sh")))


def script() -> Path:
    """The checkout's script when running from a checkout, else the packaged copy."""
    for candidate in (CHECKOUT_SCRIPT, packaged_script()):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        "the local broker script is missing (neither deploy/kafka/kafka.sh in a checkout nor "
        "streams/data/kafka/kafka.sh in the installed package): reinstall rb-streams"
    )


def _user_dir(env_var: str, default: str) -> Path:
    base = os.environ.get(env_var) or str(Path.home() / default)
    return Path(base) / "rb-streams"


def reachable(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _env(port: int, data_dir: str | None, extra: dict[str, str] | None, packaged: bool) -> dict[str, str]:
    env = dict(os.environ, RB_KAFKA_PORT=str(port))
    if packaged:  # an installed package: jars in the user cache, data in the user data dir
        env.setdefault("RB_KAFKA_LIBS", str(_user_dir("XDG_CACHE_HOME", ".cache") / "kafka-libs"))
        if not data_dir:
            env.setdefault("RB_KAFKA_DIR", str(_user_dir("XDG_DATA_HOME", ".local/share") / f"kafka-{port}"))
    if data_dir:
        env["RB_KAFKA_DIR"] = data_dir
    env.update(extra or {})
    return env


def kafka(
    command: str, port: int = 9092, data_dir: str | None = None, env: dict[str, str] | None = None
) -> None:
    """Run the broker script; `env` adds its other variables (RB_KAFKA_SASL_PORT, ...)."""
    path = script()
    packaged = path != CHECKOUT_SCRIPT
    subprocess.run(["bash", str(path), command], env=_env(port, data_dir, env, packaged), check=True)
