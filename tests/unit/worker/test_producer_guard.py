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

    def __init__(self) -> None:
        self.sent: list[FutureMessage] = []

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
