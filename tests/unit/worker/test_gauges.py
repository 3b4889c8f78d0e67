from __future__ import annotations

from dataclasses import dataclass

from streams.worker.ack_order import AckOrder
from streams.worker.gauges import publish_partitions
from streams.worker.metrics import Metrics


@dataclass(frozen=True)
class TP:
    topic: str
    partition: int


def value(m: Metrics, name: str, partition: str) -> float | None:
    return m.registry.get_sample_value(name, {"partition": partition})


def test_lag_counts_from_the_oldest_unacked_event_and_stall_is_its_age() -> None:
    now = [10.0]
    acks: AckOrder[str] = AckOrder(clock=lambda: now[0])
    p0, p1, p2 = TP("s", 0), TP("s", 1), TP("s", 2)
    acks.received(p0, 5)
    acks.received(p0, 6)
    acks.done(p0, 6, "e6")  # 5 is still pending: lag counts from it
    now[0] = 14.0
    m = Metrics()

    def highwater(tp: TP) -> int | None:
        if tp == p2:
            raise RuntimeError("not fetched yet")
        return 9

    publish_partitions(m, [p0, p1, p2], highwater, acks, {p1: 7})
    assert value(m, "rb_consumer_lag_messages", "0") == 4  # offsets 5..8
    assert value(m, "rb_consumer_lag_messages", "1") == 1  # evaluated up to 7, nothing held
    assert value(m, "rb_consumer_lag_messages", "2") is None
    assert value(m, "rb_partition_stall_seconds", "0") == 4.0
    assert value(m, "rb_partition_stall_seconds", "1") == 0.0
    assert m.registry.get_sample_value("rb_assigned_partitions") == 3
