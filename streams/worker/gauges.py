"""Gauges set on a timer: the run counts; per partition, consumer lag and how long the oldest
unacked event has waited; per cache, its entries (what a soak watches to tell which one grows)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from typing import Any

from .. import allocator
from ..core.monitors import Semantics
from ..core.monitors.drift import task_names_kept
from ..embeddings.cache import CachedEmbedder
from ..embeddings.prefetch import EmbedPrefetch
from ..etraces.retrieval import Retriever
from .ack_order import AckOrder
from .chains import RunChains
from .metrics import CACHES, ROCKSDB_MEMORY, Metrics
from .retention import Retention
from .run_table import DECODED_KEPT, RunTable

log = logging.getLogger(__name__)


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


class PartitionProbe:
    """The one-second gauges: the run counts, and lag and stall of each steps partition the
    worker owns (its changelog partitions are not events to process)."""

    def __init__(
        self,
        metrics: Metrics,
        runs: RunTable,
        consumer: Callable[[], Any],
        steps_topics: Collection[str],
        ack_order: AckOrder[Any],
        processed: Mapping[Hashable, int],
    ) -> None:
        """`consumer`: the app's consumer, read at each publish (Faust makes it on first use)."""
        self.metrics, self.runs, self.consumer = metrics, runs, consumer
        self.steps_topics, self.ack_order, self.processed = steps_topics, ack_order, processed

    async def publish(self) -> None:
        self.runs.publish(self.metrics)
        consumer = self.consumer()
        owned = [tp for tp in consumer.assignment() if tp.topic in self.steps_topics]
        publish_partitions(self.metrics, owned, consumer.highwater, self.ack_order, self.processed)


def publish_caches(metrics: Metrics, sizes: Mapping[str, float], capacities: Mapping[str, float]) -> None:
    """Set `rb_cache_entries` (and `rb_cache_capacity`) for the caches named in `sizes`; names
    outside metrics.CACHES are ignored, so the label set stays fixed."""
    for name, n in sizes.items():
        if name in CACHES:
            metrics.cache_entries.labels(name).set(n)
    for name, n in capacities.items():
        if name in CACHES:
            metrics.cache_capacity.labels(name).set(n)


def rocksdb_memory(dbs: Iterable[Any]) -> dict[str, float]:
    """RocksDB's memory by kind (metrics.ROCKSDB_MEMORY), summed over `dbs` (rocksdict `Rdict`s,
    one per partition); a store that cannot say is skipped."""
    out = dict.fromkeys(ROCKSDB_MEMORY, 0.0)
    for db in dbs:
        for kind, prop in ROCKSDB_MEMORY.items():
            try:
                value = db.property_int_value(prop)
            except Exception:  # closed meanwhile (a rebalance), or another driver
                continue
            out[kind] += float(value or 0)
    return out


def publish_rocksdb(metrics: Metrics, dbs: Iterable[Any]) -> None:
    for kind, value in rocksdb_memory(dbs).items():
        metrics.rocksdb_memory.labels(kind).set(value)


class CacheProbe:
    """Reads every bounded structure's size for `rb_cache_entries` (on the gauges timer: a
    few len() calls and RocksDB property reads, no scans)."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        runs: RunTable,
        retention: Retention,
        chains: RunChains,
        ack_order: AckOrder[Any],
        semantics: Semantics,
        retriever: Retriever,
        fast: CachedEmbedder,
        full: CachedEmbedder,
        query: CachedEmbedder | None = None,
        prefetch: EmbedPrefetch | None = None,
        rocksdbs: Callable[[], Iterable[Any]] = tuple,
    ) -> None:
        self.metrics = metrics
        self.runs, self.retention, self.chains, self.ack_order = runs, retention, chains, ack_order
        self.semantics, self.retriever = semantics, retriever
        self.fast, self.full, self.query, self.prefetch = fast, full, query, prefetch
        self.rocksdbs = rocksdbs

    def sizes(self) -> tuple[dict[str, float], dict[str, float]]:
        """(entries, bounds) by cache name (metrics.CACHES); a bound of 0: bounded otherwise."""
        stacks, stacks_max = self.semantics.stacks
        tasks, tasks_max = task_names_kept()
        sizes: dict[str, float] = {
            "decoded_states": self.runs.decoded_kept,
            "run_index": len(self.runs.seen),
            "runs_held": len(self.runs.held),
            "evictions_asked": self.retention.asked,
            "fast_vectors": self.fast.cache_len,
            "full_vectors": self.full.cache_len,
            "similarity_stacks": stacks,
            "task_names": tasks,
            "etrace_prefetched": self.retriever.prefetched,
            "run_chains": len(self.chains),
            "acks_pending": self.ack_order.waiting(),
        }
        caps: dict[str, float] = {
            "decoded_states": DECODED_KEPT,
            "fast_vectors": self.fast.capacity,
            "full_vectors": self.full.capacity,
            "similarity_stacks": stacks_max,
            "task_names": tasks_max,
            "etrace_prefetched": self.retriever.max_prefetched,
            "run_chains": self.chains.max_in_flight,
        }
        if self.query is not None:
            sizes["query_vectors"], caps["query_vectors"] = self.query.cache_len, self.query.capacity
        if self.prefetch is not None:
            sizes["embed_prefetch_in_flight"] = self.prefetch.in_flight
            caps["embed_prefetch_in_flight"] = self.prefetch.max_in_flight
        return sizes, caps

    async def publish(self) -> None:
        """The gauges timer's callback: never raises (a probe must not stop the worker)."""
        try:
            sizes, caps = self.sizes()
            publish_caches(self.metrics, sizes, caps)
            publish_rocksdb(self.metrics, self.rocksdbs())
            for kind, value in (allocator.stats() or {}).items():
                self.metrics.malloc.labels(kind).set(value)
        except Exception:
            log.exception("cache gauges could not be read")
