"""`rb-streams experiment report`: the report over outcome records."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from ..kafka.security import unreachable
from .common import UserError, _fail, _print_json, _settings


def cmd_experiment_report(args: argparse.Namespace) -> int:
    """Per arm and per monitor: success with intervals, cost, compliance, the sequential verdict."""
    from ..core.guard import GuardSettings
    from ..experiments import report as er

    guard = GuardSettings(enabled=True, alpha=args.alpha, min_runs=args.min_runs)
    if args.files:
        records: Any = er.read_jsonl(args.files)  # streamed: a file is read once, never held
        bad = 0
    else:
        from aiokafka.errors import KafkaError

        from ..experiments import topic as et

        s = _settings(args)
        if (why := unreachable(s)) is not None:
            return _fail(why, 1)
        name = et.outcomes_topic(s)
        try:
            records, bad = asyncio.run(et.read_outcomes(s, name))
        except et.TopicMissing:
            raise UserError(
                f"topic {name} does not exist on {s.broker}: no worker has written outcomes with this "
                "RB_TOPIC_PREFIX there (or name OUTCOMES.jsonl files)"
            ) from None
        except KafkaError as exc:
            raise UserError(f"could not read {name} on {s.broker}: {type(exc).__name__}: {exc}") from None
    try:
        rep = er.build(records, experiment=args.experiment, alpha=args.alpha, guard=guard)
    except er.ReportError as exc:
        raise UserError(str(exc)) from None
    rep["ignored"]["not_json"] = bad
    if args.json:
        _print_json(rep)
    else:
        print(er.text(rep))
    if args.plot:
        why = er.plot(args.plot, rep)
        print(f"rb-streams: {why}" if why else f"experiment: plot written to {args.plot}", file=sys.stderr)
    return 0
