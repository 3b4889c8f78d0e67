"""Gauges set on a timer: the run counts; per partition, consumer lag, how long the oldest
unacked event has waited and how long events have waited with none taken (the progress
watch); per cache, its entries (what a soak watches to tell which one grows)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.monitors import Semantics
from ..core.monitors.drift import task_names_kept
from ..embeddings.cache import CachedEmbedder
from ..embeddings.prefetch import EmbedPrefetch
from ..etraces.retrieval import Retriever
from ..runtime import allocator
from .ack_order import AckOrder
from .chains import RunChains
from .metrics import CACHES, ROCKSDB_MEMORY, Metrics
from .retention_sweep import Retention
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
        # Not yet acknowledged (so a stuck event shows as lag), else not yet taken.
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


POSITION_TIMEOUT_S = 1.0  # asking the consumer where a partition stands; no answer: unknown


@dataclass
class _Watched:
    since: float  # when the partition last progressed, became owned or had nothing waiting
    done: int | None  # its last offset taken then
    fresh: bool = False  # an event was taken since it became owned (`done` is current)


class ProgressWatch:
    """Per owned steps partition: how long events have waited on it while none was taken.

    A worker restarted after `kill -9` logged GroupCoordinatorNotAvailableError,
    owned 4 partitions with events waiting, evaluated nothing for minutes, and said it was
    ready. Past `threshold_s` such a partition makes the worker not ready (`/ready` 503,
    `rb_progress_stall_seconds`); past `exit_after_s` (0: never) the worker gives up
    (`on_stuck`: one log line and a non-zero exit, so that compose or Kubernetes start it
    again, which recovers the consumer). While the tables recover or a rebalance runs
    (`active` false) nothing counts: a recovery legitimately evaluates nothing.

    "Waiting" is the partition's high watermark past the next offset to take: the one after
    the last the processor took (`processed`: set as events arrive, in the consumer's order, so
    a run's event evaluated late, behind its run's pending one, does not set it back and leave
    answered events looking as if they waited), or the consumer's position before this
    ownership has taken one. When that cannot be told (never fetched, no position: what a
    consumer without a coordinator looks like), it counts as waiting too. A partition asks for
    its position only once its clock has run `threshold_s` (an idle partition: once per
    threshold), so the check costs nothing while events flow."""

    def __init__(
        self,
        threshold_s: float,
        exit_after_s: float = 0.0,
        on_stuck: Callable[[str], None] | None = None,
    ) -> None:
        self.threshold_s = threshold_s
        self.exit_after_s = exit_after_s
        self.on_stuck = on_stuck
        self._watched: dict[Hashable, _Watched] = {}
        self._stuck_reported = False

    def own(
        self, now: float, owned: Iterable[Hashable], processed: Mapping[Hashable, int], active: bool
    ) -> None:
        """Start the clock of a newly owned partition, restart that of one that took an
        event since; forget those no longer owned. Inactive: every clock restarts."""
        owned = set(owned)
        for tp in [tp for tp in self._watched if tp not in owned]:
            del self._watched[tp]
        for tp in owned:
            done = processed.get(tp)
            w = self._watched.get(tp)
            if w is None:
                self._watched[tp] = _Watched(now, done)
            elif done != w.done:
                w.since, w.done, w.fresh = now, done, True
            elif not active:
                w.since = now

    def next_offset(self, tp: Hashable) -> int | None:
        """The next offset to take on `tp`, when this ownership has taken one (an
        offset from an earlier ownership may be long past)."""
        w = self._watched.get(tp)
        return None if w is None or not w.fresh or w.done is None else w.done + 1

    def due(self, now: float) -> list[Hashable]:
        """Partitions whose clock has run the threshold: is anything waiting on them?"""
        return [tp for tp, w in self._watched.items() if now - w.since >= self.threshold_s]

    def waiting(self, tp: Hashable, now: float, unread: int | None) -> None:
        """What a due partition has waiting (None: cannot tell). Nothing: its clock restarts."""
        w = self._watched.get(tp)
        if w is not None and unread == 0:
            w.since = now

    def stalled(self, now: float) -> dict[Hashable, float]:
        """Partitions with events waiting and none taken for the threshold: seconds."""
        return {tp: now - w.since for tp, w in self._watched.items() if now - w.since >= self.threshold_s}

    def check(self, now: float) -> dict[Hashable, float]:
        """`stalled`, and past `exit_after_s` the worker gives up (once)."""
        stalled = self.stalled(now)
        worst = max(stalled.values(), default=0.0)
        if self.exit_after_s > 0 and worst >= self.exit_after_s and not self._stuck_reported:
            self._stuck_reported = True
            if self.on_stuck is not None:
                parts = ", ".join(sorted(str(getattr(tp, "partition", tp)) for tp in stalled))
                self.on_stuck(
                    f"no progress for {worst:.0f}s on partitions {parts} with events waiting "
                    f"(RB_STALL_EXIT_S={self.exit_after_s:g}): exiting so that the worker is "
                    "restarted; uncommitted events are processed again, nothing is lost"
                )
        return stalled


class PartitionProbe:
    """The one-second gauges: the run counts, and lag and stall of each steps partition the
    worker owns (its changelog partitions are not events to process), and the progress watch."""

    def __init__(
        self,
        metrics: Metrics,
        runs: RunTable,
        consumer: Callable[[], Any],
        steps_topics: Collection[str],
        ack_order: AckOrder[Any],
        processed: Mapping[Hashable, int],
        watch: ProgressWatch | None = None,
        active: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`consumer`: the app's consumer, read at each publish (Faust makes it on first use).
        `active`: tables recovered and no rebalance running (the progress watch counts then)."""
        self.metrics, self.runs, self.consumer = metrics, runs, consumer
        self.steps_topics, self.ack_order, self.processed = steps_topics, ack_order, processed
        self.watch, self.active, self.clock = watch, active, clock
        self.not_progressing: dict[str, float] = {}  # partition -> seconds (what /ready names)

    async def publish(self) -> None:
        self.runs.publish(self.metrics)
        consumer = self.consumer()
        owned = [tp for tp in consumer.assignment() if tp.topic in self.steps_topics]
        publish_partitions(self.metrics, owned, consumer.highwater, self.ack_order, self.processed)
        if self.watch is not None:
            await self._watch(consumer, owned)

    async def _watch(self, consumer: Any, owned: list[Any]) -> None:
        watch, now = self.watch, self.clock()
        assert watch is not None
        watch.own(now, owned, self.processed, self.active())
        due = watch.due(now)
        counts = await asyncio.gather(*(unread(consumer, tp, watch.next_offset(tp)) for tp in due))
        for tp, n in zip(due, counts, strict=True):
            watch.waiting(tp, now, n)
        gauge = self.metrics.progress_stall
        gauge.clear()
        out: dict[str, float] = {}
        for tp, seconds in watch.check(now).items():
            p = str(getattr(tp, "partition", tp))
            out[p] = max(out.get(p, 0.0), round(seconds, 1))
        for tp in owned:
            gauge.labels(str(tp.partition)).set(out.get(str(tp.partition), 0.0))
        self.not_progressing = out


async def unread(consumer: Any, tp: Any, nxt: int | None) -> int | None:
    """Events on `tp` past the next one to take (`nxt`; None: the consumer's position),
    None when the consumer cannot tell (no fetch yet, no position within POSITION_TIMEOUT_S)."""
    try:
        high = consumer.highwater(tp)
        if nxt is None:
            nxt = await asyncio.wait_for(consumer.position(tp), POSITION_TIMEOUT_S)
    except Exception:  # not fetched yet, no position (no coordinator), or revoked meanwhile
        return None
    if high is None or nxt is None:
        return None
    return max(0, int(high) - int(nxt))


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
            "runs_held": self.runs.held.capacity,  # RB_MAX_RUNS (its shares of every partition)
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
