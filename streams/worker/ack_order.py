"""Acknowledge a partition's events in offset order, whatever order they finish in.

An event that waits on E-traces finishes after later events of other runs on its partition.
Faust commits the first run of consecutive acked offsets and only checks that it starts
right after the committed offset when that offset is truthy and more than one behind, so an
out-of-order ack can commit past an event that is still pending; if the worker then dies,
that event is never processed again and its run's next step is dead-lettered out_of_order.
Releasing acks only as a contiguous prefix of the offsets received keeps the committed
offset behind every unfinished event.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

E = TypeVar("E")


class AckOrder(Generic[E]):
    def __init__(self) -> None:
        self._pending: dict[Hashable, OrderedDict[int, E | None]] = {}

    def received(self, tp: Hashable, offset: int) -> None:
        """Register an event as it is read (in offset order)."""
        self._pending.setdefault(tp, OrderedDict())[offset] = None

    def done(self, tp: Hashable, offset: int, event: E) -> list[E]:
        """Mark an event finished; return the events that may be acked now, in order."""
        q = self._pending.get(tp)
        if q is None or offset not in q:
            return [event]  # not tracked (partition revoked meanwhile): Faust decides
        q[offset] = event
        out: list[E] = []
        while q:
            first, ev = next(iter(q.items()))
            if ev is None:
                break
            del q[first]
            out.append(ev)
        return out

    def forget(self, tps: set[Hashable] | frozenset[Hashable]) -> None:
        """Partitions revoked: their unacked events will be processed again elsewhere."""
        for tp in tps:
            self._pending.pop(tp, None)

    def waiting(self) -> int:
        return sum(len(q) for q in self._pending.values())
