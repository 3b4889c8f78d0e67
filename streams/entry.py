"""The `rb-streams` command's entry point: checks that the worker's dependencies are installed
before it imports the CLI.

Every `rb-streams` command is the worker's side (the worker, replay, patterns, models, the
demo), and the CLI imports the core, which needs the `worker` extra. On a client-only install
(`pip install rb-streams`, what an agent needs) a command says so in one line and exits 2,
instead of a traceback about a missing numpy.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from importlib import metadata

DIST = "rb-streams"
HINT = "pip install 'rb-streams[worker]'"
_EXTRA = re.compile(r"""extra\s*==\s*["']worker["']""")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def worker_requirements(requires: Sequence[str]) -> list[str]:
    """The distribution names the `worker` extra adds, from the package's `Requires-Dist`."""
    names = []
    for req in requires:
        spec, _, marker = req.partition(";")
        name = _NAME.match(spec.strip())
        if name and _EXTRA.search(marker):
            names.append(name.group(0))
    return names


def missing_worker_dependencies(requires: Sequence[str] | None = None) -> list[str]:
    """The worker's distributions that are not installed. None reads the installed package's
    metadata; a source checkout without it has nothing to check (its bootstrap installs all)."""
    if requires is None:
        try:
            requires = metadata.requires(DIST) or []
        except metadata.PackageNotFoundError:
            return []
    missing = []
    for name in worker_requirements(requires):
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def main(argv: list[str] | None = None, requires: Sequence[str] | None = None) -> int:
    missing = missing_worker_dependencies(requires)
    if missing:
        print(f"rb-streams: the worker needs `{HINT}` (not installed: {', '.join(missing)})", file=sys.stderr)
        return 2
    from .cli import main as cli_main

    return cli_main(argv)
