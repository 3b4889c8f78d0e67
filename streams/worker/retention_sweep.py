"""Retention: finished and idle runs leave the table through their own partition's order.

The sweep never deletes anything itself. For every expired run it holds, it writes a signed
eviction request into the steps topic, keyed by the run; the request is then processed in
order with the run's events (core.retention). Applying it removes the run only if the run is
still at the version the request names: a step that arrived in between keeps the run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..core.retention import (
    evict_request,
    expiry,
)
from ..pipeline import EvictionRule
from .run_table import RunTable

# Sends one record to the steps topic: (key, value, partition).
SendStep = Callable[[bytes, bytes, int], Awaitable[object]]


class Retention:
    """The sweep that asks for evictions. How a request is judged when it comes back through
    the steps topic (`rule`, the one the processor's pipeline applies) is fixed here, once."""

    def __init__(
        self,
        runs: RunTable,
        send_step: SendStep,
        partition_of: Callable[[str], int],
        *,
        finished_retention_s: float,
        idle_timeout_s: float,
        evict_interval_s: float,
        control_key: str,
    ) -> None:
        self.runs = runs
        self._send = send_step
        self._partition_of = partition_of
        self.rule = EvictionRule(control_key, (finished_retention_s, idle_timeout_s))
        self.evict_interval_s = evict_interval_s
        self._asked: dict[bytes, float] = {}  # requests sent, not yet applied: key -> when

    @property
    def control_key(self) -> str:
        return self.rule.control_key

    @property
    def finished_retention_s(self) -> float:
        return self.rule.windows[0] if self.rule.windows else 0.0

    @property
    def idle_timeout_s(self) -> float:
        return self.rule.windows[1] if self.rule.windows else 0.0

    @property
    def asked(self) -> int:
        """Eviction requests sent and not applied yet (the `evictions_asked` cache gauge)."""
        return len(self._asked)

    def _expiry(self, finished: bool, clock: float | None, now: float) -> str | None:
        return expiry(finished, clock, now, self.finished_retention_s, self.idle_timeout_s)

    async def sweep(self, now: float) -> int:
        """Ask for the eviction of every expired run held here; returns how many were asked."""
        asked = 0
        for key, seen in list(self.runs.seen.items()):
            if self._expiry(seen.finished, seen.clock, now) is None:
                continue
            if now - self._asked.get(key, 0.0) < 10 * self.evict_interval_s:
                continue  # asked already; not applied yet
            self._asked[key] = now
            run_id = key.decode("utf-8")
            await self._send(
                key, evict_request(run_id, seen.version, self.control_key), self._partition_of(run_id)
            )
            asked += 1
        for key in [k for k in self._asked if k not in self.runs.seen]:
            del self._asked[key]  # its run left another way (a rebalance took its partition)
        return asked

    def settled(self, key: bytes | None) -> None:
        """The eviction asked for the run under `key` was judged (applied, stale or refused by
        the rule): the sweep may ask again if the run is still expired."""
        if key is not None:
            self._asked.pop(key, None)
