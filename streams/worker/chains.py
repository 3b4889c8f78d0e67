"""Per-run order for events finished off the agent loop.

An event that waits on E-traces is finished by a task, so the partition's loop can go on with
other runs. Every later event of the same run must wait behind it (a run's decisions are made
in step order); events of other runs must not. `RunChains` keeps, per run key, the task that
finishes the run's latest deferred event; a new event of that run is chained behind it. The
number of tasks alive is bounded, which is the backpressure on the partition when too much
waits.

In multi-tenant mode each tenant's steps topic has its own agent (fair shares: see
`streams.worker.app`), so two events of one run id (a tenant naming another's run) may be taken
at once by two agents, interleaved at their awaits. So an event `hold`s its run from its
state's lookup until its state is stored (or its task, if it went off the loop, is done), and
a task waiting for a slot is the run's tail already: an event of the run taken meanwhile by
the other agent chains behind it. With one agent nothing interleaves and a hold costs a dict
entry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Hashable
from typing import Any

MAX_IN_FLIGHT = 512  # events waiting on E-traces (or queued behind them) before the agent waits


class RunChains:
    def __init__(self, max_in_flight: int = MAX_IN_FLIGHT) -> None:
        # the run's tail: a task, a task waiting for its slot, or a hold (an inline event)
        self._tasks: dict[Hashable, asyncio.Future[None]] = {}
        self._max = max_in_flight
        self._slots: asyncio.Semaphore | None = None  # made on first use, inside the loop

    def pending(self, key: Hashable) -> asyncio.Future[None] | None:
        """What the run's next event must wait for: the task finishing its latest deferred
        event, or the hold of an event being finished inline; None when nothing is pending."""
        return self._tasks.get(key)

    def hold(self, key: Hashable) -> asyncio.Future[None]:
        """Mark the run busy with an event taken now (synchronously: nothing interleaves
        between this and the state's lookup); `release` it when the event is done."""
        hold: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tasks[key] = hold
        return hold

    def release(
        self, key: Hashable, hold: asyncio.Future[None], after: asyncio.Future[None] | None = None
    ) -> None:
        """The held event is done, or goes on in `after` (its task): waiters wait for that."""
        if self._tasks.get(key) is hold:
            del self._tasks[key]
        if after is not None and not after.done():
            after.add_done_callback(lambda _f: _resolve(hold))
        else:
            _resolve(hold)

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def max_in_flight(self) -> int:
        return self._max

    async def spawn(
        self, key: Hashable, coro: Coroutine[Any, Any, None], replace: asyncio.Future[None] | None = None
    ) -> asyncio.Future[None]:
        """Run `coro` as the run's latest deferred event; waits while `max_in_flight` are alive.
        `replace`: the hold of the event this task finishes (it stays the tail if another
        event chained behind that hold meanwhile).

        The task copies the caller's context, so Faust's current event (which the table uses
        to pick its changelog partition) is this event's.
        """
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max)
        slots = self._slots
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        tail = self._tasks.get(key)
        if replace is None or tail is None or tail is replace:
            self._tasks[key] = ticket  # the tail from now, while it waits for a slot
        try:
            await slots.acquire()
        except BaseException:
            coro.close()
            if self._tasks.get(key) is ticket:
                del self._tasks[key]
            _resolve(ticket)
            raise
        task = asyncio.ensure_future(coro)
        if self._tasks.get(key) is ticket:
            self._tasks[key] = task

        def done(t: asyncio.Future[None]) -> None:
            if self._tasks.get(key) is t:
                del self._tasks[key]
            slots.release()
            _resolve(ticket)

        task.add_done_callback(done)
        return task


def _resolve(f: asyncio.Future[None]) -> None:
    if not f.done():
        f.set_result(None)
