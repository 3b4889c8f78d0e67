"""orjson on the wire, and the partition rule both sides of the steering topic share."""

from __future__ import annotations

from typing import Any

import orjson
from aiokafka.partitioner import murmur2


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def partition_for(run_id: str, partitions: int) -> int:
    """Kafka's default partitioner (murmur2, positive) so a run's steps and decisions share
    a partition index; agents subscribe to just the steering partitions of their runs."""
    return int(murmur2(run_id.encode("utf-8")) & 0x7FFFFFFF) % partitions
