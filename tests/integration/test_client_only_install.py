"""An agent's install: a fresh venv with only `pip install rb-streams` (the wheel built from the
checkout, its base dependencies resolved and installed by pip, nothing borrowed) steers a run
against a real worker, and has none of the worker's packages.

The worker runs from the test environment (the `worker` extra), as it would on its own host.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

from streams.cli.entry import HINT
from streams.local.worker_process import WorkerProcess
from tests.integration.helpers import without_checkout

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
# Top-level modules of the `worker` extra that an agent's install must not have.
WORKER_MODULES = (
    "numpy",
    "faust",
    "rocksdict",
    "qdrant_client",
    "tokenizers",
    "jsonschema",
)
# ... and what it has: the package and its base dependencies (fastjsonschema: the client
# checks a run_start against the wire schema before sending it; cramjam: aiokafka's codecs, the
# worker's decisions come zstd-compressed, RB_PRODUCER_COMPRESSION).
AGENT_MODULES = ("streams", "aiokafka", "orjson", "pydantic_settings", "fastjsonschema", "cramjam")

AGENT = textwrap.dedent(
    """
    import json, sys, time
    t0 = time.perf_counter()
    from streams import SyncSteeringClient
    import_ms = (time.perf_counter() - t0) * 1000
    run = sys.argv[1]
    with SyncSteeringClient() as c:  # RB_BROKER, RB_TOPIC_PREFIX, RB_CLIENT_DEADLINE_MS
        decisions = [c.start_run(run, task="Fix the failing test in calc.py")]
        for k in range(1, 4):
            decisions.append(
                c.step(run, k, thought="Run the tests, then read calc.py.", action="bash",
                       action_input={"cmd": "pytest -q"}, observation="1 failed, 3 passed", tokens=120)
            )
        c.finish_run(run)
    print(json.dumps({
        "decisions": [None if d is None else [d.step, d.fsm_state, d.action] for d in decisions],
        "steered": [e.steered for e in c.step_log(run)],
        "import_ms": import_ms,
        "streams": sys.modules["streams"].__file__,
        "loaded": sorted(m for m in sys.modules if m.partition(".")[0] in sys.argv[2].split(",")),
    }))
    """
)


def _install(wheel: Path, tmp: Path) -> Path:
    """The wheel into a fresh venv by pip's resolver (its base dependencies only)."""
    env_dir = tmp / "agent-venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "-q",
            "--disable-pip-version-check",
            str(wheel),
        ],
        check=True,
        timeout=300,
        env=without_checkout(),
    )
    return env_dir


@pytest.fixture(scope="module")
def setup(
    adapters_worker: WorkerProcess, built_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, WorkerProcess]:
    """The agent's install, and the session's shared worker (the settings this module's own
    worker had): the agent's run is its own."""
    tmp = tmp_path_factory.mktemp("client-only")
    return _install(built_wheel, tmp), adapters_worker


def run_in(env_dir: Path, *cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    home = env_dir.parent / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run(
        cmd,
        cwd=env_dir.parent,  # not the checkout: `streams` can only come from the venv
        env={"PATH": f"{env_dir / 'bin'}:{os.environ.get('PATH', '')}", "HOME": str(home), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_agent_install_has_none_of_the_workers_packages(setup: tuple[Path, WorkerProcess]) -> None:
    env_dir, _ = setup
    probe = "import importlib.util as u, json, sys; print(json.dumps([m for m in sys.argv[1:] if u.find_spec(m)]))"
    out = run_in(env_dir, "python", "-c", probe, *WORKER_MODULES, *AGENT_MODULES)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == list(AGENT_MODULES)


def test_an_agent_steers_a_run_from_the_agent_install(setup: tuple[Path, WorkerProcess]) -> None:
    env_dir, w = setup
    script = env_dir.parent / "agent.py"
    script.write_text(AGENT)
    s = w.settings
    env = {
        "RB_BROKER": s.broker,
        "RB_TOPIC_PREFIX": s.topic_prefix,
        "RB_CLIENT_DEADLINE_MS": "15000",
        "RB_DECISION_KEY": s.secret(s.decision_key),  # the agent checks the worker's signatures
    }
    out = run_in(env_dir, "python", str(script), "lean-run-1", ",".join(WORKER_MODULES), env=env)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["streams"].startswith(str(env_dir)), report["streams"]
    assert [d[0] if d else None for d in report["decisions"]] == [0, 1, 2, 3]
    assert all(d[1] in {"INIT", "FAST", "NORMAL", "SLOW", "SKIP", "END"} for d in report["decisions"])
    assert all(d[2] in {"continue", "nudge", "escalate", "stop"} for d in report["decisions"])
    assert report["steered"] == [True] * 4  # run_start and three steps, each answered in time
    assert report["loaded"] == []


def test_a_worker_command_on_the_agent_install_says_what_to_install(
    setup: tuple[Path, WorkerProcess],
) -> None:
    env_dir, _ = setup
    for cmd in (["rb-streams", "worker"], ["python", "-m", "streams", "replay", "x.jsonl"]):
        out = run_in(env_dir, *cmd)
        assert out.returncode == 2, (cmd, out.stdout, out.stderr)
        lines = [x for x in out.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
        assert HINT in lines[0] and "numpy" in lines[0], lines[0]


def test_the_agent_install_runs_version_help_config_and_an_example_against_a_running_worker(
    setup: tuple[Path, WorkerProcess],
) -> None:
    """Issue 40: these exited 2 ("the worker needs ...") or died on `No module named 'numpy'`."""
    env_dir, w = setup
    out = run_in(env_dir, "rb-streams", "--version")
    assert out.returncode == 0 and out.stdout.startswith("rb-streams "), out.stderr
    out = run_in(env_dir, "rb-streams", "--help")
    assert out.returncode == 0 and "kafka" in out.stdout and "config" in out.stdout, out.stderr
    out = run_in(env_dir, "rb-streams", "config", env={"RB_BROKER": w.settings.broker})
    assert out.returncode == 0 and w.settings.broker in out.stdout, out.stderr
    # an example from a checkout, its `streams` the venv's (the checkout is not on the path)
    shutil.copytree(ROOT / "examples", env_dir.parent / "examples", dirs_exist_ok=True)
    env = {
        "RB_EXAMPLE_WORKER_PREFIX": w.settings.topic_prefix,
        "RB_DECISION_KEY": w.settings.secret(w.settings.decision_key),
    }
    port = w.settings.bootstrap_servers.rpartition(":")[2]
    out = run_in(env_dir, "python", "-m", "examples.messages_loop", "--port", port, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "call 1: model" in out.stdout and "Traceback" not in out.stderr
