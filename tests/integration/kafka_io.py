"""Read back what the worker wrote, as an independent read_committed consumer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition


def _consumer(bootstrap: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, isolation_level="read_committed"
    )


async def _partitions(c: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    parts = c.partitions_for_topic(topic) or set()
    for _ in range(50):
        if parts:
            break
        await c._client.force_metadata_update()
        parts = c.partitions_for_topic(topic) or set()
        await asyncio.sleep(0.1)
    assert parts, f"topic {topic} not found"
    return [TopicPartition(topic, p) for p in parts]


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's end now: pass it as `read_all(since=...)` to read only what comes
    after (a test on a shared worker reads back only what it caused)."""
    c = _consumer(bootstrap)
    await c.start()
    try:
        ends = await c.end_offsets(await _partitions(c, topic))
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await c.stop()


async def read_all(
    bootstrap: str,
    topic: str,
    expect: int | None = None,
    idle_s: float = 3.0,
    timeout_s: float = 60.0,
    since: dict[int, int] | None = None,
) -> list[dict[str, Any]]:
    """Every record of `topic` from the beginning (or from the offsets `since`), until
    `expect` are read (then a short grace period to catch extras) or nothing arrives for
    `idle_s`."""
    c = _consumer(bootstrap)
    await c.start()
    try:
        tps = await _partitions(c, topic)
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        for tp in tps:
            if since and since.get(tp.partition):
                c.seek(tp, since[tp.partition])
        out: list[dict[str, Any]] = []
        start = last = time.monotonic()
        grace_until: float | None = None
        while True:
            batch = await c.getmany(timeout_ms=200)
            for recs in batch.values():
                for r in recs:
                    out.append(
                        {"key": r.key, "partition": r.partition, "offset": r.offset, **orjson.loads(r.value)}
                    )
                    last = time.monotonic()
            now = time.monotonic()
            if expect is not None and len(out) >= expect and grace_until is None:
                grace_until = now + 1.0
            if grace_until is not None and now >= grace_until:
                return out
            if now - last > idle_s and (expect is None or now - start > timeout_s):
                return out
            if now - start > timeout_s:
                return out
            await asyncio.sleep(0)
    finally:
        await c.stop()
