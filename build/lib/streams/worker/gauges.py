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
    before the partition's first fetch, then its lag is left out)."""
    lag, stall = metrics.consumer_lag, metrics.partition_stall
    lag.clear()
    stall.clear()
    owned = list(owned)
    metrics.assigned_partitions.set(len(owned))
    ages = ack_order.oldest_age()
    for tp in owned:
        stall.labels(str(tp.partition)).set(round(ages.get(tp, 0.0), 3))
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
        lag.labels(str(tp.partition)).set(max(0, high - nxt))
