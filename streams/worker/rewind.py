"""A steps partition with no committed offset is read from its beginning after every seek.

Faust drops records the consumer has already fetched when a rebalance or a pause comes between
the fetch and their evaluation (`Consumer.getmany` breaks on a new generation, skips a
partition that is not active, and reads nothing while the flow is stopped), and relies on
`perform_seek` to move the consumer back to the committed offset afterwards. A partition with
no committed offset is not moved at all (aiokafka's `seek_to_committed` skips it), so the
consumer goes on after the records it dropped: they are never evaluated. That happens to a
worker killed within its first commit interval (Faust commits every 2.8 s): the next worker
finds no offset, fetches the waiting steps during its rebalances and drops them, and its first
evaluated event is the newest one (RELIABILITY.md #1). The steps topic's `auto_offset_reset`
is "earliest": for a partition that has never been committed, the committed position *is* its
beginning. Reading it again is safe: a step the state already holds re-sends its decision
(`core.engine._resend`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)


def rewind_uncommitted(consumer: Any, owned: Callable[[Any], bool], reset: str = "earliest") -> bool:
    """Make a Faust consumer's seek to committed offsets seek each partition `owned` selects
    that has no committed offset to its beginning. Returns False (and changes nothing) when the
    reset is not "earliest" or the consumer has no thread to seek with."""
    thread = getattr(consumer, "_thread", None)
    original: Callable[[], Awaitable[Mapping[Any, int | None]]] | None = getattr(
        thread, "seek_to_committed", None
    )
    to_beginning: Callable[..., Awaitable[None]] | None = getattr(thread, "seek_to_beginning", None)
    if reset != "earliest" or original is None or to_beginning is None:
        return False
    seek_committed, seek_beginning = original, to_beginning

    async def seek_to_committed() -> Mapping[Any, int | None]:
        committed = await seek_committed()
        fresh = sorted(
            (tp for tp, offset in committed.items() if owned(tp) and (offset is None or offset <= 0)),
            key=lambda tp: (tp.topic, tp.partition),
        )
        if fresh:
            await seek_beginning(*fresh)
            log.info(
                "no committed offset on %s: reading from the beginning",
                ", ".join(f"{tp.topic}[{tp.partition}]" for tp in fresh),
            )
        return committed

    setattr(thread, "seek_to_committed", seek_to_committed)  # noqa: B010 (the instance, not its class)
    return True
