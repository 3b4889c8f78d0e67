"""Per-run order for events finished off the agent loop.

An event that waits on E-traces is finished by a task, so the partition's loop can go on with
other runs. Every later event of the same run must wait behind it (a run's decisions are made
in step order); events of other runs must not. `RunChains` keeps, per run key, the task that
finishes the run's latest deferred event; a new event of that run is chained behind it. The
number of tasks alive is bounded, which is the backpressure on the partition when too much
waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Hashable
from typing import Any

MAX_IN_FLIGHT = 512  # events waiting on E-traces (or queued behind them) before the agent waits


class RunChains:
    def __init__(self, max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self._tasks: dict[Hashable, asyncio.Task[None]] = {}
        self._max = max_in_flight
        self._slots: asyncio.Semaphore | None = None  # made on first use, inside the loop

    def pending(self, key: Hashable) -> asyncio.Task[None] | None:
        """The task finishing the run's latest deferred event, if it is still running."""
        return self._tasks.get(key)

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def max_in_flight(self) -> int:
        return self._max

    async def spawn(self, key: Hashable, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `coro` as the run's latest deferred event; waits while `max_in_flight` are alive.

        The task copies the caller's context, so Faust's current event (which the table uses
        to pick its changelog partition) is this event's.
        """
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max)
        slots = self._slots
        await slots.acquire()
        task = asyncio.ensure_future(coro)
        self._tasks[key] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._tasks.get(key) is t:
                del self._tasks[key]
            slots.release()

        task.add_done_callback(done)
        return task
