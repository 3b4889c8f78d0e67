"""The worker's composition root: every collaborator built once, then passed in.

Models are loaded once here and shared by the monitors (`Semantics`) and the pattern store
(query embeddings); the pattern store is opened (and seeded) here; the Policy (scorers,
transitions, weight profiles: the defaults plus plugins, `streams.plugins`) is built here
unless the caller built it first; nothing below reaches for a module-level singleton.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..core.embedding_port import Embedder
from ..core.policy import Policy
from ..embeddings.cache import CachedEmbedder
from ..embeddings.minilm import MiniLMEmbedder
from ..embeddings.models import FULL_CACHE, FULL_CACHE_BYTES, Models, load_models
from ..embeddings.prefetch import EmbedPrefetch
from ..embeddings.process import ProcessEmbedder
from ..etraces.pattern_store import QdrantPatternStore
from ..etraces.patterns import read_file
from ..etraces.retrieval import Retriever, open_store
from ..plugins import load_policy
from ..runtime import allocator
from ..runtime.memtrace import start_from_env
from ..settings import Settings
from ..shared.logsafe import safe_for_log
from .app import Worker
from .gauges import CacheProbe
from .metrics import Metrics
from .recovery_guard import forward_only
from .run_table import bound_rocksdb

log = logging.getLogger(__name__)
CACHE_GAUGES_INTERVAL_S = 5.0  # rb_cache_entries and rb_rocksdb_memory_bytes are read this often
MALLOC_TRIM_INTERVAL_S = 60.0  # free heap pages go back to the kernel this often (allocator.trim)


def open_seeded_store(settings: Settings, embedder: Embedder) -> QdrantPatternStore | None:
    """The pattern store, seeded from RB_PATTERNS_SEED if set; None (E-traces off) if it
    cannot be opened, which is logged: the worker still steers without E-traces."""
    try:
        store = open_store(settings, embedder)
        if settings.patterns_seed:
            good, bad = read_file(settings.patterns_seed)
            for err in bad:
                log.error("patterns seed %s: %s", settings.patterns_seed, safe_for_log(err, None))
            store.upsert(good)
            log.info("patterns seed: %d patterns from %s", len(good), settings.patterns_seed)
        return store
    except Exception:
        log.exception("the pattern store could not be opened; E-traces are off")
        return None


def query_embedder(settings: Settings, models: Models) -> tuple[Embedder, ProcessEmbedder | None]:
    """The pattern store's embedder, and the child process it runs in: MiniLM in a niced child
    (RB_ETRACE_EMBEDDER=process, the default; see embeddings/process.py), which also embeds
    the monitors' next-step texts ahead (embeddings/prefetch.py), or the in-process model the
    monitors use (thread: no child)."""
    minilm = models.full.model
    if settings.etrace_embedder == "thread" or not isinstance(minilm, MiniLMEmbedder):
        return models.full, None
    child = ProcessEmbedder(minilm.model_dir, name=minilm.name, dim=minilm.dim)
    pid = child.start()
    log.info("E-trace query embeddings and monitor prefetch in process %d", pid)
    return CachedEmbedder(child, FULL_CACHE, FULL_CACHE_BYTES), child


def build_retriever(
    settings: Settings,
    store: QdrantPatternStore | None,
    metrics: Metrics,
    on_close: Callable[[], None] | None = None,
) -> Retriever:
    def observe(tier: str, seconds: float, outcome: str) -> None:
        metrics.etrace_query(tier, seconds, outcome)
        metrics.store_up.set(1 if retriever.up else 0)

    retriever = Retriever(
        store,
        timeout_s=settings.etrace_timeout_ms / 1000.0,
        concurrency=settings.etrace_concurrency,
        retry_after_s=settings.etrace_retry_s,
        observe=observe,
        on_close=on_close,
    )
    metrics.store_up.set(1 if store is not None else 0)
    return retriever


def assemble(
    settings: Settings, steering_partitions: int | None = None, policy: Policy | None = None
) -> Worker:
    """A ready-to-run worker for `settings` (the topics exist already). `policy`: what runs
    may name (default: `load_policy(settings)`, which raises PluginError for a bad plugin)."""
    policy = policy if policy is not None else load_policy(settings)
    allocator.configure()  # before the threads allocate: see streams.runtime.allocator
    start_from_env("worker")  # opt-in heap tracing (RB_MEMTRACE_FILE), before anything is loaded
    models = load_models()  # once: the monitors and the pattern store share them
    metrics = Metrics()
    embedder, child = query_embedder(settings, models)
    close = child.close if child is not None else None
    retriever = build_retriever(settings, open_seeded_store(settings, embedder), metrics, close)
    prefetch = EmbedPrefetch(models.full, child, observe=metrics.prefetch) if child is not None else None
    semantics = models.semantics()
    worker = Worker(
        settings,
        policy=policy,
        semantics=semantics,
        retriever=retriever,
        metrics=metrics,
        steering_partitions=steering_partitions,
        prefetch_embeddings=prefetch,
    )
    bound_rocksdb(worker.table.data)  # before the partitions' stores open
    forward_only(worker.table.data)  # a restart's changelog replay never undoes a newer local state
    worker.runs.on_delete.append(retriever.discard)  # an evicted run's prefetched answers go too
    probe = CacheProbe(
        metrics,
        runs=worker.runs,
        retention=worker.retention,
        chains=worker.processor.chains,
        ack_order=worker.processor.ack_order,
        semantics=semantics,
        retriever=retriever,
        fast=models.fast,
        full=models.full,
        query=embedder if isinstance(embedder, CachedEmbedder) and child is not None else None,
        prefetch=prefetch,
        rocksdbs=lambda: rocksdb_partitions(worker.table.data),
    )
    worker.app.timer(CACHE_GAUGES_INTERVAL_S, name="rb-cache-gauges")(probe.publish)
    if allocator.tuning():
        worker.app.timer(MALLOC_TRIM_INTERVAL_S, name="rb-malloc-trim")(allocator.trim_async)
    return worker


def rocksdb_partitions(store: Any) -> list[Any]:
    """The RocksDB databases (one per partition) behind a Faust table's store; none for the
    memory store."""
    return list(getattr(store, "_dbs", {}).values())
