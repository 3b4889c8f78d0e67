"""The agent side loads nothing of the worker: `pip install rb-streams` (no `worker` extra) is
enough for an agent, and its import stays fast.

Checked in a fresh interpreter (this test session has long since imported the core), through
`sys.modules`: what an import really loads, lazy imports and all.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import streams.agent

# The worker's heavy third-party packages (the `worker` extra). Its light ones (jsonschema, tqdm,
# prometheus-client) are left out: an agent framework may import them itself.
WORKER_PACKAGES = (
    "numpy",
    "faust",
    "rocksdict",
    "qdrant_client",
    "tokenizers",
    "safetensors",
    "threadpoolctl",
)
WORKER_MODULES = (
    "streams.core",
    "streams.settings",
    "streams.worker",
    "streams.embeddings",
    "streams.etraces",
    "streams.pipeline",
    "streams.replay",
    "streams.plugins",
    "streams.local",
    "streams.admin",
    "streams.runtime",
)
AGENT_MODULES = sorted(m.name for m in pkgutil.walk_packages(streams.agent.__path__, "streams.agent."))

PROBE = """
import json, sys
from streams import (
    Decision, RunStopped, SteeringClient, SteeringSession, SyncSteeringClient,
    anthropic_request, openai_system_message, with_system,
)
from streams.kafka.client_settings import ClientSettings
import importlib
for name in sys.argv[1:]:
    importlib.import_module(name)
ClientSettings.from_env({}, broker="127.0.0.1:9")
SyncSteeringClient  # the names resolved: the lazy exports are loaded
print(json.dumps(sorted(sys.modules)))
"""


def loaded_by(*modules: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(out.stdout))


def of(roots: tuple[str, ...], loaded: set[str]) -> list[str]:
    return sorted(m for m in loaded if any(m == r or m.startswith(r + ".") for r in roots))


def test_the_client_and_every_adapter_load_nothing_of_the_worker() -> None:
    assert (
        "streams.agent.client" in AGENT_MODULES
        and "streams.agent.adapters.langchain_middleware" in AGENT_MODULES
    )
    loaded = loaded_by(*AGENT_MODULES)
    assert set(AGENT_MODULES) <= loaded  # the probe did import them all
    assert of(WORKER_PACKAGES, loaded) == []
    assert of(WORKER_MODULES, loaded) == []


def test_the_probe_sees_a_worker_import() -> None:
    """The check above can fail: the same probe, importing the core, finds it."""
    loaded = loaded_by("streams.core.events")
    assert "streams.core" in of(WORKER_MODULES, loaded)
    assert "numpy" in of(WORKER_PACKAGES, loaded)
