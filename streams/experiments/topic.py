"""Read the outcomes topic (`<prefix>.outcomes`) to its end and stop: the report's input when
no file is named. Every partition, merged by record time (then partition, offset), so the
order is the one the records were written in, as near as the broker can tell."""

from __future__ import annotations

from typing import Any

import orjson
from aiokafka import TopicPartition

from ..admin.deadletter_topic import TopicMissing, partitions_of, reader
from ..kafka.client_settings import KafkaSettings

MAX_RECORDS = 5_000_000  # a bound on what one report holds in memory (~1 KB a record)


def outcomes_topic(s: KafkaSettings) -> str:
    return f"{s.topic_prefix}.outcomes"


async def read_outcomes(s: KafkaSettings, topic: str) -> tuple[list[dict[str, Any]], int]:
    """(the records in write order, how many values were not JSON objects: left out)."""
    c = reader(s, "rb-experiment-report")
    await c.start()
    try:
        tps = await partitions_of(c, topic)
        c.assign(tps)
        ends = await c.end_offsets(tps)
        begins = await c.beginning_offsets(tps)
        for tp in tps:
            c.seek(tp, begins[tp])
        got: list[tuple[int, int, int, dict[str, Any]]] = []
        bad = 0
        while any([await c.position(tp) < ends[tp] for tp in tps]) and len(got) < MAX_RECORDS:
            for tp, recs in (await c.getmany(timeout_ms=500, max_records=5000)).items():
                for r in recs:
                    if r.offset >= ends[tp] or r.value is None:  # later ones, or a tombstone
                        continue
                    try:
                        v = orjson.loads(r.value)
                    except orjson.JSONDecodeError:
                        v = None
                    if isinstance(v, dict):
                        got.append((r.timestamp, tp.partition, r.offset, v))
                    else:
                        bad += 1
        got.sort(key=lambda t: t[:3])
        return [t[3] for t in got], bad
    finally:
        await c.stop()


__all__ = ["TopicMissing", "TopicPartition", "outcomes_topic", "read_outcomes"]
