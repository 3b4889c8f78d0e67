"""`rb-streams deadletters`: read the dead-letter topic (what the worker refused, and why)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..kafka.security import unreachable
from .common import UserError, _fail, _settings


def cmd_deadletters(args: argparse.Namespace) -> int:
    """Read the dead-letter topic: why the worker refused an event (a run it never steered)."""
    from aiokafka.errors import KafkaError

    from ..admin import deadletter_topic as dl

    known = dl.reasons()
    if args.reason is not None and args.reason not in known:
        raise UserError(f"--reason {args.reason!r}: not a dead-letter reason (known: {', '.join(known)})", 2)
    try:
        since = None if args.since is None else dl.parse_since(args.since)
    except ValueError as exc:
        raise UserError(str(exc), 2) from None
    s = _settings(args)
    if (why := unreachable(s)) is not None:
        return _fail(why, 1)
    topic = dl.topic_of(s, s.tenant)
    q = dl.Query(run=args.run, reason=args.reason, since_s=since, limit=args.limit, follow=args.follow)
    try:
        n = asyncio.run(dl.read(s, topic, q, dl.printer(args.json)))
    except dl.TopicMissing:
        raise UserError(
            f"topic {topic} does not exist on {s.broker}: no worker has run with this RB_TOPIC_PREFIX there"
        ) from None
    except KafkaError as exc:
        raise UserError(f"could not read {topic} on {s.broker}: {type(exc).__name__}: {exc}") from None
    if n == 0 and not args.json:
        print(f"deadletters: no matching record in {topic}", file=sys.stderr)
    return 0
