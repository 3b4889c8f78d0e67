"""Per-partition gauges: consumer lag and how long the oldest unacked event has waited."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from .ack_order import AckOrder
from .metrics import Metrics


def publish_partitions(
    metrics: Metrics,
    owned: Iterable[Any],
    highwater: Callable[[Any], int | None],
    ack_order: AckOrder[Any],
    processed: Mapping[Hashable, int],
) -> None:
    """Set lag and stall per owned partition (`tp.partition` labels; `highwater` may raise
    before the partition's first fetch, then its lag is left out). In multi-tenant mode one
    partition number covers every tenant's steps topic: lags add up, the stall is the oldest."""
    lag, stall = metrics.consumer_lag, metrics.partition_stall
    lag.clear()
    stall.clear()
    owned = list(owned)
    metrics.assigned_partitions.set(len(owned))
    ages = ack_order.oldest_age()
    lags: dict[str, int] = {}
    stalls: dict[str, float] = {}
    for tp in owned:
        p = str(tp.partition)
        stalls[p] = max(stalls.get(p, 0.0), round(ages.get(tp, 0.0), 3))
        try:
            high = highwater(tp)
        except Exception:  # not fetched yet
            continue
        # Not yet acknowledged (so a stuck event shows as lag), else not yet evaluated.
        nxt = ack_order.next_unreleased(tp)
        if nxt is None:
            done = processed.get(tp)
            nxt = None if done is None else done + 1
        if high is None or nxt is None:
            continue
        lags[p] = lags.get(p, 0) + max(0, high - nxt)
    for p, age in stalls.items():
        stall.labels(p).set(age)
    for p, n in lags.items():
        lag.labels(p).set(n)
