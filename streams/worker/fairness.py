"""Shares the worker's time between tenants (multi-tenant mode), so that one tenant's backlog
does not hold another tenant's steps.

Each tenant's steps topic has its own agent and buffer (`Topics.sources`), and the agents take
turns event by event. That alone is not enough: every event the worker gets comes through
Faust's consumer thread, which needs the interpreter lock for a moment many times per fetch,
and an agent working through a backlog of large events holds it almost without pause. The
fetch round trip then took ~1 s, and so did every decision of the other tenants (measured:
bench/tenant_fairness.py, BENCHMARKS.md). So a tenant that has a backlog, while other tenants are
active, pauses after each of its events for as long as the event took times the number of
other active tenants: it gets at most 1/N of the worker's time, and the pauses are where the
consumer thread and the other tenants' events run. A tenant alone, or keeping up, never
pauses: the pacing costs nothing until two tenants compete.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any

log = logging.getLogger(__name__)

ACTIVE_WINDOW_S = 5.0  # a tenant with an event this recent is competing for the worker
MAX_PAUSE_S = 0.5  # the longest pause after one event (an event that took very long)
# How long the broker may hold a fetch that finds no new records (Faust fixes 1,500 ms).
# aiokafka keeps one fetch in flight per broker and leaves out of it the partitions that still
# have records buffered or are paused; with a flood, a fetch often went out holding none of a
# calm tenant's partitions, found nothing new on the ones it held and waited the whole 1.5 s
# while the calm tenant's records sat on the broker (measured: the wait before processing
# reached 1.5 s; bench/tenant_fairness.py, BENCHMARKS.md section 10). The cost: an idle worker asks
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
    fetcher = _fetcher(consumer)
    if fetcher is None or not hasattr(fetcher, "_fetch_max_wait_ms"):
        return False
    fetcher._fetch_max_wait_ms = wait_ms
    return True


def _fetcher(consumer: Any) -> Any:
    """aiokafka's fetcher inside Faust's consumer thread, or None before it started."""
    thread = getattr(consumer, "_thread", None)
    return getattr(getattr(thread, "_consumer", None), "_fetcher", None)


def share_fetched_records(consumer: Any) -> bool:
    """Makes each hand-over of Faust's consumer (the app's consumer, started) share its records
    between the partitions that have some buffered, and lets records that wait for a full buffer
    hold back no other partition's fetch. False when the consumer has no fetcher yet.

    Shares: aiokafka's `Fetcher.fetched_records` walks its buffer partition by partition in the
    order the fetches came back and stops at `max_records` (TENANT_MAX_POLL_RECORDS, 12). One
    fetch of a small-step flood buffers hundreds of records per partition, so hand-over after
    hand-over took the flood's first partition's 12, and another tenant's records, fetched long
    before, waited in the buffer behind them: up to 2.4 s (measured with time stamps around each
    fetch and hand-over; bench/tenant_fairness.py, BENCHMARKS.md section 10). Now every partition with
    records gets about `max_records / n` of each hand-over, rotating which goes first, also when
    the hand-over first waited for a fetch; records, positions and errors stay aiokafka's own
    (the original call takes each partition's share).

    Waiting records: aiokafka sends no fetch to a broker while any partition's fetched records
    are younger than its prefetch backoff (100 ms), so that the next fetch can ask for that
    partition too once its records are taken. Records of a partition Faust is not taking (its
    tenant's buffer is full, so it is left out of the hand-overs) are not taken soon, and every
    fetch that brought a flood such records held every fetch for 100 ms, a calm tenant's
    partitions included: calm's steps waited up to 100 ms before the broker was even asked, its
    p95 90-98 ms against an unloaded 11-40 ms (measured per record: produce, fetch, hand-over,
    processing; BENCHMARKS.md section 10). The flood's partitions still handed over held it too,
    while their batches took several hand-overs to empty. Now records hold back no fetch when
    their partition is left out of the hand-overs or is more than a hand-over behind the
    broker's end (a backlog): that partition is left out of fetches until they are taken
    (aiokafka's own rule), the others are fetched at once. A caught-up partition's records keep
    aiokafka's hold: they go at the next hand-over, and the next fetch asks for them too."""
    fetcher = _fetcher(consumer)
    if fetcher is None or not isinstance(getattr(fetcher, "_records", None), dict):
        return False
    if isinstance(fetcher.fetched_records, SharedHandOver):
        return True
    fetcher.fetched_records = SharedHandOver(fetcher, fetcher.fetched_records)
    return True


class SharedHandOver:
    """`Fetcher.fetched_records` in shares, and the fetcher's planning with records that wait
    released (`share_fetched_records`)."""

    def __init__(self, fetcher: Any, original: Callable[..., Awaitable[dict[Any, list[Any]]]]) -> None:
        from aiokafka.consumer.fetcher import FetchResult

        self._fetcher, self._original, self._result_type = fetcher, original, FetchResult
        self._turn = 0  # which partition with records goes first: rotates every hand-over
        self._taken: Collection[Any] | None = None  # the partitions of the last hand-over
        self._backlog = 12  # records behind the broker's end that make a backlog: a hand-over's
        self.released = 0  # fetched batches whose prefetch backoff was dropped
        self._releasing = True  # off after an error: aiokafka's own hold, one warning
        plan = getattr(fetcher, "_get_actions_per_node", None)
        if callable(plan):  # the fetch routine plans each round of fetches with it
            self._plan = plan
            fetcher._get_actions_per_node = self._planned

    async def __call__(
        self, partitions: Collection[Any] | None, timeout: float = 0, max_records: int | None = None
    ) -> dict[Any, list[Any]]:
        self._taken = partitions
        if max_records:
            self._backlog = max_records
        wait_for_fetch = getattr(self._fetcher, "_create_fetch_waiter", None)
        if max_records is None or wait_for_fetch is None:
            self._release(wake=True)
            return await self._original(partitions, timeout=timeout, max_records=max_records)
        # When nothing is buffered yet, wait for a fetch here and then share what it brought:
        # the original call would wait, then hand over in buffer order (the flood's first).
        deadline = time.monotonic() + timeout
        while True:
            self._release(wake=True)
            got = await self._shares(partitions, max_records)
            left = deadline - time.monotonic()
            if got or left <= 0 or self._fetcher._closed:
                return got
            waiter = wait_for_fetch()
            done, _ = await asyncio.wait([waiter], timeout=left)
            if not done:
                waiter.cancel()
                return got
            waiter.result()  # an error the subscription passed to the waiters (as aiokafka does)

    def _planned(self, assignment: Any) -> Any:
        """aiokafka's plan of the next fetches, made after releasing the records that wait."""
        self._release(wake=False)
        return self._plan(assignment)

    def _release(self, wake: bool) -> None:
        """Fetched records that will not be taken soon hold back no fetch: those of a partition
        the hand-overs leave out (its tenant's buffer is full) and those of a partition with a
        backlog (more than a hand-over's worth behind the broker's end). A caught-up partition's
        records still do, as in aiokafka: they are taken at the next hand-over, and the next
        fetch asks for their partition too. `wake`: tell the fetch routine to plan again now.
        Never raises: it runs inside aiokafka's fetch routine, which an error would stop."""
        if not self._releasing:
            return
        try:
            self._release_waiting(wake)
        except Exception as exc:  # an aiokafka whose internals moved: keep its own hold
            self._releasing = False
            log.warning("could not release fetched records (%r): a tenant may wait on another's fetches", exc)

    def _release_waiting(self, wake: bool) -> None:
        taken = self._taken
        released = False
        for tp, res in self._fetcher._records.items():
            if not getattr(res, "_backoff", None):  # FetchResult and FetchError have one
                continue
            if (taken and tp not in taken) or self._backlogged(res, tp):
                res._backoff = 0
                released = True
                self.released += 1
        if released and wake:  # the fetch routine waits out the backoff: it looks again now
            self._fetcher._notify(self._fetcher._wait_consume_future)

    def _backlogged(self, res: Any, tp: Any) -> bool:
        try:
            state = res._assignment.state_value(tp)
            behind: int = state.highwater - state.position  # highwater: the last fetch's
        except Exception:  # no assignment, no position or no highwater yet: not known
            return False
        return behind > self._backlog

    async def _shares(self, partitions: Collection[Any] | None, max_records: int) -> dict[Any, list[Any]]:
        """What is buffered now: about `max_records / n` from each of the n partitions with
        records (all from one when only one has some). Never waits."""
        buffered = [
            tp
            for tp, res in self._fetcher._records.items()
            if type(res) is self._result_type and res.has_more() and (not partitions or tp in partitions)
        ]
        if len(buffered) < 2:
            return await self._original(partitions, timeout=0, max_records=max_records)
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
        return await self._original(partitions, timeout=0, max_records=max_records)
