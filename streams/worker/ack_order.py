"""Acknowledge a partition's events in offset order, whatever order they finish in.

An event that waits on E-traces finishes after later events of other runs on its partition.
Faust commits the first run of consecutive acked offsets and only checks that it starts
right after the committed offset when that offset is truthy and more than one behind, so an
out-of-order ack can commit past an event that is still pending; if the worker then dies,
that event is never processed again and its run's next step is dead-lettered out_of_order.
Releasing acks only as a contiguous prefix of the offsets received keeps the committed
offset behind every unfinished event.

The flip side: one event that is never finished holds back every later ack of its partition.
So the worker finishes every event whatever happens to it (processor.py), and the age of the oldest
event still held here is the stall signal (`rb_partition_stall_seconds`, `/ready`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

E = TypeVar("E")


class AckOrder(Generic[E]):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._pending: dict[Hashable, OrderedDict[int, E | None]] = {}
        self._since: dict[Hashable, dict[int, float]] = {}  # offset -> when it was read
        self._released: dict[Hashable, int] = {}  # the last offset released, per partition
        self._clock = clock

    def received(self, tp: Hashable, offset: int) -> None:
        """Register an event as it is read (in offset order)."""
        self._pending.setdefault(tp, OrderedDict())[offset] = None
        self._since.setdefault(tp, {})[offset] = self._clock()

    def done(self, tp: Hashable, offset: int, event: E) -> list[E]:
        """Mark an event finished; return the events that may be acked now, in order."""
        q = self._pending.get(tp)
        if q is None or offset not in q:
            return [event]  # not tracked (partition revoked meanwhile): Faust decides
        q[offset] = event
        out: list[E] = []
        since = self._since[tp]
        while q:
            first, ev = next(iter(q.items()))
            if ev is None:
                break
            del q[first]
            since.pop(first, None)
            self._released[tp] = first
            out.append(ev)
        return out

    def forget(self, tps: set[Hashable] | frozenset[Hashable]) -> None:
        """Partitions revoked: their unacked events will be processed again elsewhere."""
        for tp in tps:
            self._pending.pop(tp, None)
            self._since.pop(tp, None)
            self._released.pop(tp, None)

    def waiting(self) -> int:
        return sum(len(q) for q in self._pending.values())

    def oldest_age(self, now: float | None = None) -> dict[Hashable, float]:
        """Per partition holding unreleased events: seconds since the oldest was read. Its ack
        (and every later one) waits on it, so this is how long the committed offset has been
        held back."""
        now = self._clock() if now is None else now
        out: dict[Hashable, float] = {}
        for tp, q in self._pending.items():
            if q:
                first = next(iter(q))
                out[tp] = max(0.0, now - self._since[tp].get(first, now))
        return out

    def next_unreleased(self, tp: Hashable) -> int | None:
        """The first offset not yet released: the oldest held, else one past the last
        released; None if nothing was read from `tp` yet."""
        q = self._pending.get(tp)
        if q:
            return next(iter(q))
        last = self._released.get(tp)
        return None if last is None else last + 1
