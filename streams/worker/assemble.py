"""The worker's composition root: every collaborator built once, then passed in.

Models are loaded once here and shared by the monitors (`Semantics`) and the pattern store
(query embeddings); the pattern store is opened (and seeded) here; nothing below reaches for
a module-level singleton.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..core.embedding import Embedder
from ..embeddings.cache import CachedEmbedder
from ..embeddings.minilm import MiniLMEmbedder
from ..embeddings.models import FULL_CACHE, Models, load_models
from ..embeddings.prefetch import EmbedPrefetch
from ..embeddings.process import ProcessEmbedder
from ..etraces.pattern_store import QdrantPatternStore
from ..etraces.patterns import read_file
from ..etraces.retrieval import Retriever, open_store
from ..logsafe import safe_for_log
from ..settings import Settings
from .app import Worker
from .metrics import Metrics

log = logging.getLogger(__name__)


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
    return CachedEmbedder(child, FULL_CACHE), child


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


def assemble(settings: Settings, steering_partitions: int | None = None) -> Worker:
    """A ready-to-run worker for `settings` (the topics exist already)."""
    models = load_models()  # once: the monitors and the pattern store share them
    metrics = Metrics()
    embedder, child = query_embedder(settings, models)
    close = child.close if child is not None else None
    retriever = build_retriever(settings, open_seeded_store(settings, embedder), metrics, close)
    prefetch = EmbedPrefetch(models.full, child, observe=metrics.prefetch) if child is not None else None
    return Worker(
        settings,
        semantics=models.semantics(),
        retriever=retriever,
        metrics=metrics,
        steering_partitions=steering_partitions,
        prefetch_embeddings=prefetch,
    )
