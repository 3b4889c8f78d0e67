"""Shares the worker's time between tenants (multi-tenant mode), so that one tenant's backlog
does not hold another tenant's steps.

Each tenant's steps topic has its own agent and buffer (`Topics.sources`), and the agents take
turns event by event. That alone is not enough: every event the worker gets comes through
Faust's consumer thread, which needs the interpreter lock for a moment many times per fetch,
and an agent working through a backlog of large events holds it almost without pause. The
fetch round trip then took ~1 s, and so did every decision of the other tenants (measured:
bench/fairness.py, BENCHMARKS.md). So a tenant that has a backlog, while other tenants are
active, pauses after each of its events for as long as the event took times the number of
other active tenants: it gets at most 1/N of the worker's time, and the pauses are where the
consumer thread and the other tenants' events run. A tenant alone, or keeping up, never
pauses: the pacing costs nothing until two tenants compete.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any

ACTIVE_WINDOW_S = 5.0  # a tenant with an event this recent is competing for the worker
MAX_PAUSE_S = 0.5  # the longest pause after one event (an event that took very long)
# How long the broker may hold a fetch that finds no new records (Faust fixes 1,500 ms).
# aiokafka keeps one fetch in flight per broker and leaves out of it the partitions that still
# have records buffered or are paused; with a flood, a fetch often went out holding none of a
# calm tenant's partitions, found nothing new on the ones it held and waited the whole 1.5 s
# while the calm tenant's records sat on the broker (measured: the wait before processing
# reached 1.5 s; bench/fairness.py, BENCHMARKS.md section 10). The cost: an idle worker asks
# the broker ten times a second instead of under once.
TENANT_FETCH_MAX_WAIT_MS = 100


class FairShare:
    def __init__(
        self,
        window_s: float = ACTIVE_WINDOW_S,
        max_pause_s: float = MAX_PAUSE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window_s = window_s
        self.max_pause_s = max_pause_s
        self._clock = clock
        self._last: dict[str, float] = {}  # tenant -> when its last event was taken
        self.paused_s = 0.0  # pauses so far, in seconds

    def took(self, tenant: str, seconds: float, backlog: bool) -> float:
        """`tenant`'s agent finished an event that took `seconds`; `backlog`: more of its
        events are waiting. Returns how long the agent should pause before its next one."""
        now = self._clock()
        self._last[tenant] = now
        if not backlog or seconds <= 0:
            return 0.0
        others = sum(1 for t, at in self._last.items() if t != tenant and now - at <= self.window_s)
        if not others:
            return 0.0
        pause = min(seconds * others, self.max_pause_s)
        self.paused_s += pause
        return pause


def shorten_fetch_wait(consumer: Any, wait_ms: int = TENANT_FETCH_MAX_WAIT_MS) -> bool:
    """Sets the fetch wait of Faust's consumer (the app's consumer, started) to `wait_ms`; aiokafka
    reads it for every fetch request it builds. False when the consumer has no fetcher yet."""
    thread = getattr(consumer, "_thread", None)
    fetcher = getattr(getattr(thread, "_consumer", None), "_fetcher", None)
    if fetcher is None or not hasattr(fetcher, "_fetch_max_wait_ms"):
        return False
    fetcher._fetch_max_wait_ms = wait_ms
    return True


def share_fetched_records(consumer: Any) -> bool:
    """Makes each hand-over of Faust's consumer (the app's consumer, started) share its records
    between the partitions that have some buffered, instead of taking them in buffer order.

    aiokafka's `Fetcher.fetched_records` walks its buffer partition by partition in the order
    the fetches came back and stops at `max_records` (TENANT_MAX_POLL_RECORDS, 12). One fetch of
    a small-step flood buffers hundreds of records per partition, so hand-over after hand-over
    took the flood's first partition's 12, and another tenant's records, fetched long before,
    waited in the buffer behind them: up to 2.4 s (measured with time stamps around each fetch
    and hand-over; bench/fairness.py, BENCHMARKS.md section 10). Now every partition with
    records gets about `max_records / n` of each hand-over, rotating which goes first; records,
    positions and errors stay aiokafka's own (the original call takes each partition's share).
    False when the consumer has no fetcher yet."""
    thread = getattr(consumer, "_thread", None)
    fetcher = getattr(getattr(thread, "_consumer", None), "_fetcher", None)
    if fetcher is None or not isinstance(getattr(fetcher, "_records", None), dict):
        return False
    if isinstance(fetcher.fetched_records, SharedHandOver):
        return True
    fetcher.fetched_records = SharedHandOver(fetcher, fetcher.fetched_records)
    return True


class SharedHandOver:
    """`Fetcher.fetched_records` in shares (`share_fetched_records`)."""

    def __init__(self, fetcher: Any, original: Callable[..., Awaitable[dict[Any, list[Any]]]]) -> None:
        from aiokafka.consumer.fetcher import FetchResult

        self._fetcher, self._original, self._result_type = fetcher, original, FetchResult
        self._turn = 0  # which partition with records goes first: rotates every hand-over

    async def __call__(
        self, partitions: Collection[Any] | None, timeout: float = 0, max_records: int | None = None
    ) -> dict[Any, list[Any]]:
        buffered = [
            tp
            for tp, res in self._fetcher._records.items()
            if type(res) is self._result_type and res.has_more() and (not partitions or tp in partitions)
        ]
        if max_records is None or len(buffered) < 2:
            return await self._original(partitions, timeout=timeout, max_records=max_records)
        self._turn = (self._turn + 1) % len(buffered)
        order = buffered[self._turn :] + buffered[: self._turn]
        share = max(1, max_records // len(order))
        out: dict[Any, list[Any]] = {}
        left = max_records
        for tp in order:
            if left <= 0:
                break
            got = await self._original({tp}, timeout=0, max_records=min(share, left))
            for key, records in got.items():
                out.setdefault(key, []).extend(records)
                left -= len(records)
        if out:
            return out
        return await self._original(partitions, timeout=timeout, max_records=max_records)
