from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streams.core.monitors import Semantics
from streams.core.monitors.drift import task_names_kept
from streams.core.state import RunConfig, TraceState
from streams.embeddings.cache import CachedEmbedder
from streams.worker.ack_order import AckOrder
from streams.worker.gauges import (
    CacheProbe,
    PartitionProbe,
    publish_caches,
    publish_partitions,
    rocksdb_memory,
)
from streams.worker.metrics import CACHES, ROCKSDB_MEMORY, Metrics
from streams.worker.run_table import DECODED_KEPT, RunTable
from tests.factories import run_start, step
from tests.unit.worker.harness import rig


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


class _Consumer:
    def __init__(self, *assigned: TP) -> None:
        self.assigned = assigned

    def assignment(self) -> set[TP]:
        return set(self.assigned)

    def highwater(self, tp: TP) -> int:
        return 10


def test_the_partition_probe_sets_the_run_counts_and_reads_only_the_steps_topics() -> None:
    m = Metrics(process=False)
    runs = RunTable({}, 10, lambda _run_id: 0, 4)
    runs.recount([(b"r", TraceState("r", RunConfig()).encode())])
    steps, changelog = TP("rb.steps", 0), TP("rb-runs-changelog", 1)
    consumer = _Consumer(steps, changelog)
    probe = PartitionProbe(m, runs, lambda: consumer, {"rb.steps"}, AckOrder(), {steps: 4, changelog: 0})
    asyncio.run(probe.publish())
    assert m.registry.get_sample_value("rb_active_runs") == 1
    assert m.registry.get_sample_value("rb_assigned_partitions") == 1
    assert value(m, "rb_consumer_lag_messages", "0") == 5  # offsets 5..9
    assert value(m, "rb_consumer_lag_messages", "1") is None  # the changelog is not work


class _Vectors:
    """An embedder of fixed vectors: what the caches hold does not matter here, only how many."""

    name, dim = "fake", 3

    def embed(self, texts: Sequence[str]) -> Any:
        return np.ones((len(texts), 3), dtype=np.float32)


class _Db:
    def __init__(self, values: dict[str, int] | None) -> None:
        self.values = values

    def property_int_value(self, name: str) -> int | None:
        if self.values is None:
            raise RuntimeError("closed")
        return self.values.get(name)


def cache(m: Metrics, name: str, metric: str = "rb_cache_entries") -> float | None:
    return m.registry.get_sample_value(metric, {"cache": name})


def test_every_cache_is_exported_from_the_start_with_a_fixed_label_set() -> None:
    m = Metrics(process=False)
    for name in CACHES:
        assert cache(m, name) == 0.0 and cache(m, name, "rb_cache_capacity") == 0.0
    publish_caches(m, {"fast_vectors": 7, "made_up": 3}, {"fast_vectors": 20})
    assert cache(m, "fast_vectors") == 7 and cache(m, "fast_vectors", "rb_cache_capacity") == 20
    assert cache(m, "made_up") is None  # an unknown name never becomes a label value


def test_the_probe_reads_each_cache_and_its_bound(sem: Semantics) -> None:
    m = Metrics(process=False)
    r = rig(sem)
    fast, full, query = (
        CachedEmbedder(_Vectors(), 4),
        CachedEmbedder(_Vectors(), 5),
        CachedEmbedder(_Vectors(), 6),
    )
    fast.embed(["a", "b", "c", "d", "e"])  # one over the bound: the oldest goes
    query.embed(["q"])
    probe = CacheProbe(
        m,
        runs=r.runs,
        retention=r.retention,
        chains=r.processor.chains,
        ack_order=r.processor.ack_order,
        semantics=sem,
        retriever=r.processor.retriever,
        fast=fast,
        full=full,
        query=query,
        rocksdbs=lambda: [_Db({"rocksdb.cur-size-all-mem-tables": 100}), _Db(None)],
    )

    async def go() -> None:
        await r.feed(run_start("r"))
        await r.feed(step("r", 1))
        await r.drain()
        await probe.publish()

    asyncio.run(go())
    assert cache(m, "fast_vectors") == 4 and cache(m, "fast_vectors", "rb_cache_capacity") == 4
    assert cache(m, "full_vectors") == 0 and cache(m, "full_vectors", "rb_cache_capacity") == 5
    assert cache(m, "query_vectors") == 1 and cache(m, "query_vectors", "rb_cache_capacity") == 6
    assert cache(m, "decoded_states") == 1 and cache(m, "decoded_states", "rb_cache_capacity") == DECODED_KEPT
    assert cache(m, "run_index") == 1 and cache(m, "runs_held") == 1
    assert cache(m, "acks_pending") == 0 and cache(m, "run_chains") == 0
    assert cache(m, "similarity_stacks", "rb_cache_capacity") == sem.stacks[1] > 0
    assert cache(m, "task_names", "rb_cache_capacity") == task_names_kept()[1] > 0
    assert cache(m, "etrace_prefetched", "rb_cache_capacity") == r.processor.retriever.max_prefetched
    # the closed store is skipped, the other summed; a kind nobody reported stays 0
    assert m.registry.get_sample_value("rb_rocksdb_memory_bytes", {"kind": "memtables"}) == 100
    assert m.registry.get_sample_value("rb_rocksdb_memory_bytes", {"kind": "block_cache"}) == 0


def test_a_probe_that_fails_does_not_raise(sem: Semantics) -> None:
    m = Metrics(process=False)
    r = rig(sem)
    probe = CacheProbe(
        m,
        runs=r.runs,
        retention=r.retention,
        chains=r.processor.chains,
        ack_order=r.processor.ack_order,
        semantics=sem,
        retriever=r.processor.retriever,
        fast=CachedEmbedder(_Vectors(), 1),
        full=CachedEmbedder(_Vectors(), 1),
        rocksdbs=lambda: 1 / 0,  # type: ignore[arg-type,return-value]
    )
    asyncio.run(probe.publish())  # logged, not raised


def test_rocksdb_memory_sums_the_partitions_by_kind() -> None:
    dbs = [_Db({prop: 1 for prop in ROCKSDB_MEMORY.values()}), _Db({"rocksdb.block-cache-usage": 5})]
    assert rocksdb_memory(dbs) == {"memtables": 1.0, "block_cache": 6.0, "table_readers": 1.0}
