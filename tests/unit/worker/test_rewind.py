"""A steps partition never committed is moved to its beginning by Faust's `perform_seek`; without
the guard, Faust leaves it after whatever records it fetched and dropped (RELIABILITY.md #1)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from faust.transport.consumer import Consumer, ThreadDelegateConsumer
from faust.types import TP

from streams.worker.rewind import rewind_uncommitted

STEPS, CHANGELOG = "rb.steps", "rb-runs-changelog"


class Thread:
    """Faust's consumer thread as `perform_seek` uses it: aiokafka's answers, and the seeks made."""

    def __init__(self, committed: dict[TP, int | None]) -> None:
        self.committed = committed
        self.to_beginning: list[TP] = []

    async def seek_to_committed(self) -> dict[TP, int | None]:
        return dict(self.committed)  # aiokafka seeks only the partitions with an offset > 0

    async def seek_to_beginning(self, *partitions: TP) -> None:
        self.to_beginning.extend(partitions)


class FaustConsumer:
    """Faust's own `perform_seek` and `seek_to_committed`, on the thread above."""

    perform_seek = Consumer.perform_seek
    seek_to_committed = ThreadDelegateConsumer.seek_to_committed

    def __init__(self, thread: Thread) -> None:
        self._thread = thread
        self._read_offset: dict[TP, int | None] = defaultdict(lambda: None)
        self._committed_offset: dict[TP, int | None] = defaultdict(lambda: None)


def steps_only(tp: Any) -> bool:
    return tp.topic == STEPS


NEVER, DONE, LOG = TP(STEPS, 0), TP(STEPS, 1), TP(CHANGELOG, 0)


async def test_faust_alone_leaves_a_never_committed_partition_where_its_fetches_left_it():
    thread = Thread({NEVER: None, DONE: 57, LOG: None})
    await FaustConsumer(thread).perform_seek()
    assert thread.to_beginning == []  # the records fetched and dropped before it are skipped


async def test_a_never_committed_steps_partition_is_read_again_from_its_beginning():
    thread = Thread({NEVER: None, DONE: 57, LOG: None})
    consumer = FaustConsumer(thread)
    assert rewind_uncommitted(consumer, steps_only)
    await consumer.perform_seek()
    assert thread.to_beginning == [NEVER]  # not the committed one, not the changelog
    assert consumer._read_offset[NEVER] is None  # Faust reads whatever comes from there
    assert consumer._committed_offset[DONE] == 57


async def test_a_partition_with_a_committed_offset_is_left_to_it():
    thread = Thread({DONE: 57})
    consumer = FaustConsumer(thread)
    rewind_uncommitted(consumer, steps_only)
    await consumer.perform_seek()
    assert thread.to_beginning == []


def test_nothing_is_changed_when_the_reset_is_not_earliest_or_there_is_no_thread():
    thread = Thread({NEVER: None})
    consumer = FaustConsumer(thread)
    original = thread.seek_to_committed
    assert not rewind_uncommitted(consumer, steps_only, "latest")
    assert thread.seek_to_committed == original
    assert not rewind_uncommitted(object(), steps_only)
