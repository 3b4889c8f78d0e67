"""Loading the models, once, for whoever needs them.

`load_models` returns the fast (static) and full (MiniLM) embedders, each behind the one
vector cache. The composition roots (the worker's `assemble`, `replay`, the CLI's pattern
commands) call it once and pass the result on; nothing fetches a module-level singleton.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from threadpoolctl import threadpool_limits

from ..core.monitors import Semantics
from . import model_build
from .cache import CachedEmbedder
from .minilm import MiniLMEmbedder
from .paths import default_models_dir
from .static import StaticEmbedder

# BLAS threads for the numpy models. One: a MiniLM embedding is a chain of small matrix
# products, and OpenBLAS spreading each over threads costs far more than it saves when the
# worker's event loop, the broker and the agents share the cores. Measured on the 2-core CI
# machine, one 86-token text: 35 ms with one thread, 505 ms (median of 20) with OpenBLAS's
# default of two. The vectors are bit-identical either way (each output is computed by one
# thread in the same order), so decisions do not depend on it.
BLAS_THREADS = 1

FAST_CACHE = 20_000  # texts; the monitors embed every step's texts with the fast model
FULL_CACHE = 5_000  # the full model is asked for claims, ambiguous pairs and E-trace queries
# ... and at most this much memory each (texts and vectors): a cache filled with the longest
# texts a step may carry stays this size; ordinary texts (a few hundred characters) fill the
# entry bounds first or nearly (the fast model's 20,000 take ~30 MB).
FAST_CACHE_BYTES = 24 * 1024 * 1024
FULL_CACHE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Models:
    fast: CachedEmbedder  # the static model: every step
    full: CachedEmbedder  # MiniLM: the monitors' escalations and E-trace queries

    def semantics(self) -> Semantics:
        """The monitors' similarity cascade over these models."""
        return Semantics(self.fast, self.full)


def load_models(models_dir: Path | str | None = None, *, minilm_dir: Path | str | None = None) -> Models:
    """(fast static, full MiniLM), each cached. Builds the static model on demand if missing.

    `models_dir` holds built artifacts (default `default_models_dir()`); the static model is
    `<models_dir>/static-minilm-256`. If it is missing or stale there, a valid copy in the
    default location is used instead (workers with throwaway data dirs share one build);
    only if none exists is it distilled (about a minute on 2 cores, logged). Limits the
    process's BLAS threads to BLAS_THREADS (see there).
    """
    threadpool_limits(limits=BLAS_THREADS, user_api="blas")
    minilm = MiniLMEmbedder(minilm_dir)
    base = Path(models_dir).resolve() if models_dir is not None else default_models_dir()
    static_dir = model_build.ensure_static_model(base / model_build.STATIC_MODEL_NAME, minilm)
    static = StaticEmbedder(static_dir, name=model_build.STATIC_MODEL_NAME)
    return Models(
        CachedEmbedder(static, FAST_CACHE, FAST_CACHE_BYTES),
        CachedEmbedder(minilm, FULL_CACHE, FULL_CACHE_BYTES),
    )
