"""The worker's composition root: every collaborator built once, then passed in.

Models are loaded once here and shared by the monitors (`Semantics`) and the pattern store
(query embeddings); the pattern store is opened (and seeded) here; nothing below reaches for
a module-level singleton.
"""

from __future__ import annotations

import logging

from ..core.embedding import Embedder
from ..embeddings.models import load_models
from ..etraces.pattern_store import QdrantPatternStore
from ..etraces.patterns import read_file
from ..etraces.retrieval import Retriever, open_store
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
                log.error("patterns seed %s: %s", settings.patterns_seed, err)
            store.upsert(good)
            log.info("patterns seed: %d patterns from %s", len(good), settings.patterns_seed)
        return store
    except Exception:
        log.exception("the pattern store could not be opened; E-traces are off")
        return None


def build_retriever(settings: Settings, store: QdrantPatternStore | None, metrics: Metrics) -> Retriever:
    def observe(tier: str, seconds: float, outcome: str) -> None:
        metrics.etrace_query(tier, seconds, outcome)
        metrics.store_up.set(1 if retriever.up else 0)

    retriever = Retriever(
        store,
        timeout_s=settings.etrace_timeout_ms / 1000.0,
        concurrency=settings.etrace_concurrency,
        retry_after_s=settings.etrace_retry_s,
        observe=observe,
    )
    metrics.store_up.set(1 if store is not None else 0)
    return retriever


def assemble(settings: Settings, steering_partitions: int | None = None) -> Worker:
    """A ready-to-run worker for `settings` (the topics exist already)."""
    models = load_models()  # once: the monitors and the pattern store share them
    metrics = Metrics()
    retriever = build_retriever(settings, open_seeded_store(settings, models.full), metrics)
    return Worker(
        settings,
        semantics=models.semantics(),
        retriever=retriever,
        metrics=metrics,
        steering_partitions=steering_partitions,
    )
