"""A record the producer refuses is counted and logged, never the end of Faust's buffer task."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka.errors import MessageSizeTooLargeError

from streams.worker.producer_guard import guard_buffer


class _Channel:
    def get_topic_name(self) -> str:
        return "rb.runs-changelog"


class _Pending:
    channel = _Channel()
    partition = 3


class FutureMessage(asyncio.Future[None]):
    message = _Pending()


class Buffer:
    """Faust's ProducerBuffer as far as the guard sees it: `_send_pending` raising as aiokafka does."""

    size = 0

    def __init__(self) -> None:
        self.sent: list[FutureMessage] = []

    async def flush(self) -> None:
        pass

    async def _send_pending(self, fut: FutureMessage) -> None:
        if len(self.sent) == 0:
            self.sent.append(fut)
            raise MessageSizeTooLargeError("The message is 1260000 bytes when serialized")
        self.sent.append(fut)
        fut.set_result(None)


async def test_a_refused_changelog_record_is_counted_logged_and_the_next_one_is_sent(caplog):
    buf = Buffer()
    refused: list[BaseException] = []
    guard_buffer(buf, refused.append)
    first, second = FutureMessage(), FutureMessage()
    with caplog.at_level(logging.ERROR):
        await buf._send_pending(first)  # would have crashed the app
        await buf._send_pending(second)
    assert len(refused) == 1 and isinstance(refused[0], MessageSizeTooLargeError)
    assert isinstance(first.exception(), MessageSizeTooLargeError)
    assert second.done() and second.exception() is None
    assert "rb.runs-changelog[3]" in caplog.text and "MessageSizeTooLargeError" in caplog.text


async def test_cancellation_still_cancels():
    class Slow(Buffer):
        async def _send_pending(self, fut: FutureMessage) -> None:
            await asyncio.sleep(10)

    buf = Slow()
    guard_buffer(buf, lambda _e: None)
    task = asyncio.ensure_future(buf._send_pending(FutureMessage()))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def real_buffer() -> object:
    """Faust's own ProducerBuffer, of an app that never connects."""
    import faust

    app = faust.App("rb-guard-test", broker="kafka://127.0.0.1:1")
    return app.producer.buffer


async def slow_sends(buf: object, delay: float, done: list[int]) -> None:
    async def send(fut: FutureMessage) -> None:
        await asyncio.sleep(delay)  # a first send to a partition waits for metadata
        done.append(1)
        fut.set_result(None)

    buf._send_pending = send  # type: ignore[attr-defined]


async def test_fausts_own_flush_returns_before_a_slow_record_is_sent():
    """Why the guard replaces it: the commit that follows would pass an unsent state change."""
    buf, done = real_buffer(), []
    await slow_sends(buf, 0.4, done)
    await buf.start()  # type: ignore[attr-defined]
    try:
        buf.put(FutureMessage())  # type: ignore[attr-defined]
        await buf.flush()  # type: ignore[attr-defined]
        assert done == []
    finally:
        await buf.stop()  # type: ignore[attr-defined]


async def test_the_guarded_flush_returns_only_when_every_record_was_handed_on():
    buf, done = real_buffer(), []
    await slow_sends(buf, 0.3, done)
    guard_buffer(buf, lambda _e: None)
    await buf.start()  # type: ignore[attr-defined]
    try:
        for _ in range(3):
            buf.put(FutureMessage())  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)  # the task has taken the first off the queue: in flight, not queued
        await buf.flush()  # type: ignore[attr-defined]
        assert done == [1, 1, 1] and buf.size == 0  # type: ignore[attr-defined]
    finally:
        await buf.stop()  # type: ignore[attr-defined]


async def test_the_guarded_flush_of_an_empty_buffer_returns_at_once_and_a_refusal_settles_it():
    buf = real_buffer()
    guard_buffer(buf, lambda _e: None)
    await buf.start()  # type: ignore[attr-defined]
    try:
        await asyncio.wait_for(buf.flush(), 0.05)  # type: ignore[attr-defined]

        async def refuse(fut: FutureMessage) -> None:
            await asyncio.sleep(0.2)
            raise MessageSizeTooLargeError("too large")

        # a refused record is settled (counted), so the flush does not wait on it forever
        buf2 = real_buffer()
        buf2._send_pending = refuse  # type: ignore[attr-defined]
        guard_buffer(buf2, lambda _e: None)
        await buf2.start()  # type: ignore[attr-defined]
        try:
            buf2.put(FutureMessage())  # type: ignore[attr-defined]
            await asyncio.wait_for(buf2.flush(), 2.0)  # type: ignore[attr-defined]
        finally:
            await buf2.stop()  # type: ignore[attr-defined]
    finally:
        await buf.stop()  # type: ignore[attr-defined]
