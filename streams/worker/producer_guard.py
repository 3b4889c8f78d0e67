"""No refused record stops the worker, and no commit goes ahead of a changelog record.

Faust writes table changes to the changelog through its producer buffer: a background task that
sends each pending record and crashes the whole app ("We experienced a crash!") if a send
raises. aiokafka raises synchronously for a record over the producer's `max_request_size`, an
unknown or unauthorised topic, a closed producer. The core caps every state far below the
broker's limit (`Engine.seal`), so this is the second line: a send that raises is counted,
logged with its topic and partition, and set on the record's future; the worker keeps running
and the partition keeps committing. (A refusal the broker returns later is already only a
warning in Faust's `_on_published`.)

Faust commits a source offset only after `producer.flush()`, meant to put every table change
on the broker first. But the buffer's `flush` gives up after 0.1 s without a record sent, and
does not count the record its task has taken off the queue and is still handing to aiokafka
(the first send to a changelog partition after a start waits for metadata). A commit could
then pass an event whose state change never reached the changelog; killed there, the worker
came back with the run's state from before that event while its offset was committed (issue
38: "expected step 1, got 3"). `guard_buffer` replaces the flush with one that returns only
when the queue is empty and no send is in flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

OnRefused = Callable[[BaseException], None]
STALLED_FLUSH_LOG_S = 10.0  # a flush waiting this long with nothing sent says so (and keeps waiting)


def guard_buffer(buffer: Any, on_refused: OnRefused) -> None:
    """Wrap a Faust `ProducerBuffer`'s send so that an exception no longer ends its task, and
    make its `flush` complete (see the module's docstring). Call before the producer starts
    (its task binds the method when it starts)."""
    send: Callable[[Any], Awaitable[None]] = buffer._send_pending
    flush: Callable[[], Awaitable[None]] = buffer.flush
    sending = [0]  # records taken off the queue whose send has not returned
    settled = asyncio.Event()  # set each time a send returns

    async def guarded(fut: Any) -> None:
        sending[0] += 1
        try:
            await send(fut)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            refused(fut, exc, on_refused)
        finally:
            sending[0] -= 1
            settled.set()

    async def complete_flush() -> None:
        """Return once every record put in the buffer so far was handed to aiokafka (whose own
        flush, which Faust awaits next, then waits for the broker). A stopping buffer keeps
        Faust's flush: its task may be gone, and it raises rather than wait."""
        if getattr(buffer, "state", "running") != "running":
            await flush()
            return
        while buffer.size or sending[0]:
            settled.clear()
            if not (buffer.size or sending[0]):
                break
            try:
                await asyncio.wait_for(settled.wait(), timeout=STALLED_FLUSH_LOG_S)
            except TimeoutError:
                log.warning(
                    "the producer has sent no changelog record for %.0f s (%d queued, %d in "
                    "flight): offsets are not committed until it does",
                    STALLED_FLUSH_LOG_S,
                    buffer.size,
                    sending[0],
                )

    buffer._send_pending = guarded
    buffer.flush = complete_flush


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
