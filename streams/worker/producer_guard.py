"""No refused record stops the worker.

Faust writes table changes to the changelog through its producer buffer: a background task that
sends each pending record and crashes the whole app ("We experienced a crash!") if a send
raises. aiokafka raises synchronously for a record over the producer's `max_request_size`, an
unknown or unauthorised topic, a closed producer. The core caps every state far below the
broker's limit (`Engine.seal`), so this is the second line: a send that raises is counted,
logged with its topic and partition, and set on the record's future; the worker keeps running
and the partition keeps committing. (A refusal the broker returns later is already only a
warning in Faust's `_on_published`.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

OnRefused = Callable[[BaseException], None]


def guard_buffer(buffer: Any, on_refused: OnRefused) -> None:
    """Wrap a Faust `ProducerBuffer`'s send so that an exception no longer ends its task.
    Call before the producer starts (its task binds the method when it starts)."""
    send: Callable[[Any], Awaitable[None]] = buffer._send_pending

    async def guarded(fut: Any) -> None:
        try:
            await send(fut)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            refused(fut, exc, on_refused)

    buffer._send_pending = guarded


def refused(fut: Any, exc: BaseException, on_refused: OnRefused) -> None:
    """Count, log and settle one refused record. Never raises."""
    try:
        msg = getattr(fut, "message", None)
        channel = getattr(msg, "channel", None)
        topic = channel.get_topic_name() if channel is not None else "?"
        log.error(
            "a record for %s[%s] was refused by the producer and is dropped (the worker keeps "
            "running): %s: %s",
            topic,
            getattr(msg, "partition", "?"),
            type(exc).__name__,
            str(exc)[:300],
        )
        on_refused(exc)
        if isinstance(fut, asyncio.Future) and not fut.done():
            fut.set_exception(exc)
            fut.exception()  # retrieved: no "exception was never retrieved" at collection
    except Exception:  # pragma: no cover - the guard must not become the crash
        pass
