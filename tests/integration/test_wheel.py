"""The package as a user installs it: a wheel built from the checkout, installed into a fresh
venv outside the checkout, its commands run from elsewhere.

The venv borrows the third-party dependencies of the test environment (a .pth file naming its
site-packages) instead of downloading them again: what is under test is our wheel (metadata,
entry point, package data), not pip's resolver. `streams` itself comes only from the wheel.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import venv
from pathlib import Path

import orjson
import pytest

from streams import __version__
from streams.embeddings.paths import default_models_dir
from streams.local.worker_process import free_port
from tests.factories import run_finish, run_start, step

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(built_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = built_wheel
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    target = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (target / "borrowed-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    # pip --target puts console scripts under <target>/bin: make the entry point by hand, as a
    # regular install would (the wheel's entry_points.txt names it)
    eps = next(target.glob("rb_streams-*.dist-info")) / "entry_points.txt"
    assert "rb-streams = streams.cli.entry:main" in eps.read_text()
    exe = env_dir / "bin" / "rb-streams"
    exe.write_text(f"#!{py}\nimport sys\nfrom streams.cli.entry import main\nsys.exit(main())\n")
    exe.chmod(0o755)
    home = tmp / "home"
    home.mkdir()
    env = {
        "PATH": f"{env_dir / 'bin'}:{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "RB_MODELS_DIR": str(default_models_dir()),  # the models this environment built
        "HF_HUB_OFFLINE": "1",
    }
    return tmp, env


def rb(installed: tuple[Path, dict[str, str]], *args: str) -> subprocess.CompletedProcess[str]:
    tmp, env = installed
    return subprocess.run(
        ["rb-streams", *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: tuple[Path, dict[str, str]]) -> None:
    tmp, env = installed
    where = subprocess.run(
        ["python", "-c", "import streams; print(streams.__file__)"],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(tmp / "venv")) and str(ROOT) not in where
    for data in ("py.typed", "data/kafka/kafka.sh", "data/kafka/pom.xml", "data/patterns/starter.jsonl"):
        assert (Path(where).parent / data).is_file(), data


def test_version_and_config(installed: tuple[Path, dict[str, str]]) -> None:
    out = rb(installed, "--version")
    assert out.returncode == 0 and out.stdout.strip() == f"rb-streams {__version__}"
    cfg = rb(installed, "config", "--json", "--partitions", "3")
    assert cfg.returncode == 0, cfg.stderr
    assert json.loads(cfg.stdout)["partitions"] == 3


def test_the_bundled_starter_library_loads(installed: tuple[Path, dict[str, str]]) -> None:
    tmp, _ = installed
    out = rb(installed, "patterns", "load", "--starter", "--json", "--data-dir", str(tmp / "w"))
    assert out.returncode == 0, out.stderr
    (report,) = json.loads(out.stdout)
    assert report["loaded"] >= 20 and report["bad_lines"] == 0
    assert report["file"].startswith(str(tmp / "venv"))  # the packaged copy


def test_replay_runs_from_the_installed_package(installed: tuple[Path, dict[str, str]]) -> None:
    tmp, _ = installed
    src = tmp / "events.jsonl"
    events = [run_start("r"), *(step("r", i) for i in range(1, 4)), run_finish("r")]
    src.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    out = rb(installed, "replay", str(src), "-o", str(tmp / "decisions.jsonl"), "--strict")
    assert out.returncode == 0, out.stderr
    decisions = [json.loads(x) for x in (tmp / "decisions.jsonl").read_text().splitlines()]
    assert [d["step"] for d in decisions] == [0, 1, 2, 3]


def test_the_packaged_broker_script_is_found(installed: tuple[Path, dict[str, str]]) -> None:
    out = rb(installed, "kafka", "status", "--port", str(free_port()))
    assert out.returncode == 1 and out.stdout.strip() == "not running", out.stderr
    assert "Traceback" not in out.stderr
