"""What an agent pays to install and import the client: packages, installed size and import time
of `from streams import SyncSteeringClient`, for a client-only install (`pip install rb-streams`)
and a worker install (`rb-streams[worker]`), and optionally for another revision's wheel.

Each install is a fresh venv without pip (so site-packages holds only what the install brought)
filled by pip's resolver from the wheel built from the checkout (or from `--before REF`, taken
with `git archive`). Import time: a fresh interpreter per run, wall and CPU time around the
import, the installs in turn (a warm-up round, then `--runs` rounds); the median and the spread
(min-max).

    .venv/bin/python -m bench.client_footprint --before bf417e1 --runs 5
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import venv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import log

ROOT = Path(__file__).resolve().parents[1]
WORKER_MODULES = ("numpy", "faust", "rocksdict", "qdrant_client", "tokenizers")
PROBE = """
import json, sys, time
t, c = time.perf_counter(), time.process_time()
from streams import SyncSteeringClient
ms, cpu_ms = (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000
roots = {m.partition(".")[0] for m in sys.modules}
print(json.dumps({"ms": ms, "cpu_ms": cpu_ms, "modules": len(sys.modules),
                  "worker": sorted(r for r in roots if r in sys.argv[1:]),
                  "core": any(m.startswith("streams.core") for m in sys.modules)}))
"""


@dataclass
class Footprint:
    label: str
    packages: int  # distributions installed besides rb-streams
    mb: float  # site-packages, MB (10^6 bytes)
    py: Path
    import_ms: list[float] = field(default_factory=list)  # wall time
    cpu_ms: list[float] = field(default_factory=list)  # the process's CPU time (less noisy on a busy machine)
    modules: int = 0
    worker: list[str] = field(default_factory=list)
    core: bool = False

    def probe(self, cwd: Path) -> dict[str, Any]:
        out = subprocess.run(
            [str(self.py), "-c", PROBE, *WORKER_MODULES],
            check=True,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=clean_env(),
        )
        found: dict[str, Any] = json.loads(out.stdout)
        self.modules, self.worker, self.core = found["modules"], found["worker"], found["core"]
        return found

    def row(self) -> str:
        return (
            f"| {self.label} | {self.packages} | {self.mb:.0f} | {spread(self.import_ms)} | "
            f"{spread(self.cpu_ms)} | {self.modules} | {', '.join(self.worker) or 'none'} | "
            f"{'yes' if self.core else 'no'} |"
        )


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.0f} ({min(xs):.0f}-{max(xs):.0f})"


def clean_env() -> dict[str, str]:
    """No PYTHONPATH: the checkout on it would stand in for the installed package."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def build_wheel(src: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
        check=True,
        env=clean_env(),
    )
    (wheel,) = out.glob("rb_streams-*.whl")
    return wheel


def checkout_of(ref: str, into: Path) -> Path:
    """The tree of `ref` (no .git), for building its wheel."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    return into


def site_packages(py: Path) -> Path:
    out = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def install(label: str, requirement: str, where: Path) -> Footprint:
    env_dir = where / label.replace(" ", "_").replace("[", "_").replace("]", "_")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    log(f"{label}: pip install {Path(requirement).name}")
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
            requirement,
        ],
        check=True,
        env=clean_env(),
    )
    site = site_packages(py)
    dists = [d for d in site.glob("*.dist-info") if not d.name.startswith("rb_streams-")]
    return Footprint(label=label, packages=len(dists), mb=size_mb(site), py=py)


def time_imports(installs: list[Footprint], runs: int, cwd: Path) -> None:
    """Rounds of one fresh interpreter per install, in turn, so that the machine's load drifts
    alike over all of them; the first round is the warm-up (the OS's file cache)."""
    for r in range(runs + 1):
        for f in installs:
            found = f.probe(cwd)
            if r:
                f.import_ms.append(found["ms"])
                f.cpu_ms.append(found["cpu_ms"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--before", help="also measure this revision's wheel (e.g. the commit before the lean client)"
    )
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rb-footprint-") as tmp:
        where = Path(tmp)
        results = []
        if args.before:
            log(f"building the wheel of {args.before}")
            old = build_wheel(checkout_of(args.before, where / "before-src"), where / "before-dist")
            results.append(install(f"rb-streams ({args.before})", str(old), where))
        log("building the wheel of the checkout")
        wheel = build_wheel(ROOT, where / "dist")
        results.append(install("rb-streams", str(wheel), where))
        results.append(install("rb-streams[worker]", f"{wheel}[worker]", where))
        log(f"timing the import: {args.runs} rounds after a warm-up")
        time_imports(results, args.runs, where)
    print(
        f"\nPython {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.1f}; import: median (min-max) of {args.runs} fresh interpreters per "
        "install, in turn, after a warm-up round\n"
    )
    print(
        "| install | packages (besides rb-streams) | site-packages MB | import ms (wall) | "
        "import ms (CPU) | modules loaded | worker packages loaded | streams.core loaded |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(r.row())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
