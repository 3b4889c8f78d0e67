from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner

from streams.kafka.wire import dumps, loads, partition_for


def test_partition_for_matches_kafkas_default_partitioner():
    part = DefaultPartitioner()
    for n in (1, 3, 8, 12, 64):
        for i in range(300):
            rid = f"run-{i}-é"
            key = rid.encode()
            assert partition_for(rid, n) == part(key, list(range(n)), list(range(n)))


def test_orjson_round_trip():
    obj = {"a": [1, 2.5, None, "ü"], "b": {"c": True}}
    assert loads(dumps(obj)) == obj
