"""The `rb-streams` command's entry point: checks that the worker's dependencies are installed
before it imports the CLI.

The CLI imports the core, which needs the `worker` extra. On a client-only install (what an
agent needs) `--version`, `--help` and the commands that need no worker (`kafka`: the local
broker; `config`: the agent side's settings) work without it, and every other command says
what to install in one line and exits 2, instead of a traceback about a missing numpy.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata

DIST = "rb-streams"
# rb-streams is not on a public index: the extra comes from where the package came from
HINT = "pip install './[worker]'` in a checkout, or the wheel with `[worker]"
# The CLI's commands that need the worker's packages (the rest are in `client_only`);
# tests/unit/cli/test_entry.py checks the two lists cover the CLI's commands.
WORKER_COMMANDS = (
    "worker",
    "replay",
    "cost",
    "patterns",
    "demo",
    "simulate",
    "plugins",
    "tenants",
    "deadletters",
    "models",
    "experiment",
)
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
        return client_only(sys.argv[1:] if argv is None else argv, missing)
    from .main import main as cli_main

    return cli_main(argv)


def _needs_worker(missing: list[str]) -> str:
    return f"rb-streams: the worker needs `{HINT}` (not installed: {', '.join(missing)})"


def client_only(argv: list[str], missing: list[str]) -> int:
    """The command on an install without the worker's packages: its own small parser (the
    CLI's imports the core), the same usage errors (exit 2), one line for a worker command."""
    from .. import __version__

    p = argparse.ArgumentParser(
        prog="rb-streams",
        description="The `rb-streams` command, on the agent side's install (without the worker's packages).",
        epilog=f"The other commands ({', '.join(WORKER_COMMANDS)}) need the worker: `{HINT}`.",
    )
    p.add_argument("--version", action="version", version=f"rb-streams {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="command")
    k = sub.add_parser("kafka", help="start/stop/status of the local Maven-resolved broker")
    k.add_argument("action", choices=["install", "start", "stop", "restart", "status"])
    k.add_argument("--port", type=int, default=9092)
    k.add_argument("--data-dir", default=None)
    c = sub.add_parser("config", help="print the agent side's configuration (RB_*, secrets masked)")
    c.add_argument("--json", action="store_true", help="one JSON object")
    for name in WORKER_COMMANDS:
        w = sub.add_parser(name, help="(needs the worker's packages)", add_help=False)
        w.add_argument("rest", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.command in WORKER_COMMANDS:
        print(_needs_worker(missing), file=sys.stderr)
        return 2
    if args.command == "kafka":
        from ..local.broker import kafka

        try:
            kafka(args.action, args.port, args.data_dir)
        except subprocess.CalledProcessError as exc:
            return 1 if exc.returncode else 0  # the script has said what went wrong
        return 0
    return _client_config(args.json)


def _client_config(as_json: bool) -> int:
    """The settings an agent's client reads (`ClientSettings`), as `rb-streams config` shows
    the worker's; a bad value is one line and exit 2."""
    from ..kafka.client_settings import ClientSettings, SettingsError

    try:
        shown = ClientSettings.from_env().as_dict(mask_secrets=True)
    except SettingsError as exc:
        print(f"rb-streams: invalid configuration: {exc}", file=sys.stderr)
        return 2
    if as_json:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(shown, default=str) + b"\n")
        return 0
    width = max(len(ClientSettings.env_name(k)) for k in shown)
    for k, v in shown.items():
        print(f"{ClientSettings.env_name(k):<{width}}  {v}")
    return 0
