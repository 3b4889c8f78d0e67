"""`rb-streams demo`, `simulate` and `kafka`: the local broker, simulated agents, the demo."""

from __future__ import annotations

import argparse
import subprocess
from typing import Any

from ..kafka.security import unreachable
from .common import _fail, _positive_int, _settings, _stop_on_sigterm


def _experiment_arg(args: argparse.Namespace) -> dict[str, Any] | None:
    """`--experiment` (with `--holdout`, `--seed`): the runs' run_start `experiment`, or None.
    ValueError (said in one line by the caller) for a bad value or a build without them."""
    from ..local.demo import experiment_config, experiment_unsupported

    if not args.experiment:
        return None
    if (why := experiment_unsupported()) is not None:
        raise ValueError(why)
    return experiment_config(args.holdout, args.seed)


def cmd_demo(args: argparse.Namespace) -> int:
    from ..local.demo import main as demo_main
    from ..local.respond import RESPONSIVE

    _stop_on_sigterm()  # a SIGTERM (a `timeout`, a closed terminal) stops the broker and worker too
    try:
        experiment = _experiment_arg(args)
    except ValueError as exc:
        return _fail(str(exc), 2)
    default_runs = len(RESPONSIVE) if experiment is not None else 7
    return demo_main(
        runs=args.runs or default_runs,
        steps=args.steps,
        port=args.port,
        keep_broker=args.keep_broker,
        experiment=experiment,
        rounds=args.rounds,
    )


def cmd_simulate(args: argparse.Namespace) -> int:
    from ..local.demo import simulate

    try:
        experiment = _experiment_arg(args)
    except ValueError as exc:
        return _fail(str(exc), 2)
    s = _settings(args)
    if (why := unreachable(s)) is not None:
        return _fail(why, 1)
    from ..local.respond import RESPONSIVE

    runs = args.runs if args.runs is not None else len(RESPONSIVE) if experiment is not None else 7
    return simulate(s, runs, args.steps, args.forever, experiment, args.rounds)


def _add_experiment_flags(p: argparse.ArgumentParser, rounds: int) -> None:
    p.add_argument(
        "--experiment",
        action="store_true",
        help="agents that respond to steering (synthetic response model), in runs of experiment "
        "'demo' (a held-out control arm), then their outcomes and the report",
    )
    p.add_argument(
        "--holdout",
        type=float,
        default=0.5,
        help="with --experiment: share of runs in control (0-0.5; default 0.5)",
    )
    p.add_argument("--seed", default="0", help="with --experiment: the experiment's seed (default 0)")
    p.add_argument(
        "--rounds",
        type=_positive_int,
        default=rounds,
        help=f"with --experiment: runs per agent, one after another (default {rounds})",
    )


def cmd_kafka(args: argparse.Namespace) -> int:
    from ..local.broker import kafka

    try:
        kafka(args.action, args.port, args.data_dir)
    except subprocess.CalledProcessError as exc:
        # The script has said what went wrong (e.g. "not running"); only the exit code is left.
        return 1 if exc.returncode else 0
    return 0
