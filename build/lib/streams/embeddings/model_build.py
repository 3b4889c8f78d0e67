"""Distil the static embedding model from MiniLM with our numpy forward pass (no torch).

Follows model2vec 0.10's `distill` (subword vocabulary, no extra vocabulary, float32 output):

1. the vocabulary is the MiniLM tokenizer's, in id order, minus tokens matching
   `[unused\\d+]` (model2vec's default token_remove_pattern) and minus the added special
   tokens other than [PAD] and [UNK] (model2vec prunes [CLS], [SEP], [MASK]);
2. each token t is run as `[CLS] t [SEP]` (all three positions attended, token type 0) and
   the three output vectors are averaged (mean pooling);
3. PCA to 256 dimensions: eigendecomposition of the covariance in float64, components signed
   so each column's largest-magnitude score is positive (model2vec's `_pca_fit_transform`);
4. SIF weighting with Zipf-estimated frequencies: the token of rank r (position in the kept
   vocabulary, from 1) is scaled by a / (a + p_r), p_r proportional to 1 / (r + 1), a = 1e-4.

The artifact is saved in model2vec's layout (model.safetensors with an "embeddings" tensor,
tokenizer.json, config.json), so `StaticEmbedder` could load a real model2vec model too.
Unlike model2vec we keep the dropped tokens as zero rows instead of editing the tokenizer
(the embedder skips zero rows), so the tokenizer file stays the original; the only visible
difference is that a literal "[CLS]" in a text is skipped rather than split into subwords.
model2vec stores float16 by default; we keep float32. `rb_build.json` stamps the source
model's sha256 and the algorithm version; a build whose stamp matches is reused.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .minilm import MiniLMEmbedder
from .paths import default_models_dir
from .vectors import FloatArray

log = logging.getLogger(__name__)

STATIC_MODEL_NAME = "static-minilm-256"
ALGORITHM_VERSION = "model2vec-0.10-distill/1"
STAMP_FILE = "rb_build.json"
PCA_DIMS = 256
SIF_COEFFICIENT = 1e-4
TOKEN_REMOVE_PATTERN = r"\[unused\d+\]"

_SHA_CACHE: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised per (path, size, mtime) for the process."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _SHA_CACHE[key] = h.hexdigest()
    return _SHA_CACHE[key]


@dataclass(frozen=True)
class BuildStamp:
    """What a built artifact was made from; any difference means rebuild."""

    source_sha256: str
    algorithm_version: str = ALGORITHM_VERSION
    pca_dims: int = PCA_DIMS
    sif_coefficient: float = SIF_COEFFICIENT
    max_tokens: int | None = None  # a truncated (test) build never passes for a full one


@dataclass(frozen=True)
class BuildReport:
    path: Path
    built: bool  # False: a valid artifact was already there
    seconds: float
    tokens: int
    dim: int
    explained_variance_ratio: float | None


def read_stamp(model_dir: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((model_dir / STAMP_FILE).read_text(encoding="utf-8"))
        return data
    except (OSError, ValueError):
        return None


def is_valid(model_dir: Path, want: BuildStamp) -> bool:
    """True if `model_dir` holds a complete artifact stamped exactly like `want`."""
    stamp = read_stamp(model_dir)
    if stamp is None:
        return False
    if any(not (model_dir / f).is_file() for f in ("model.safetensors", "tokenizer.json", "config.json")):
        return False
    return all(stamp.get(k) == v for k, v in asdict(want).items())


def _token_embeddings(
    minilm: MiniLMEmbedder,
    token_ids: list[int],
    batch_size: int,
    progress: Callable[[int, int], None] | None,
) -> FloatArray:
    """model2vec's per-token forward: mean of the outputs of `[CLS] t [SEP]`."""
    out = np.empty((len(token_ids), minilm.hidden), dtype=np.float32)
    ids_all = np.asarray(token_ids, dtype=np.int64)
    for start in range(0, len(ids_all), batch_size):
        chunk = ids_all[start : start + batch_size]
        seq = np.empty((len(chunk), 3), dtype=np.int64)
        seq[:, 0], seq[:, 1], seq[:, 2] = minilm.cls_id, chunk, minilm.sep_id
        out[start : start + len(chunk)] = minilm.hidden_states(seq).mean(axis=1)
        if progress is not None:
            progress(start + len(chunk), len(ids_all))
    return out


def _pca(x: FloatArray, dims: int) -> tuple[FloatArray, float]:
    """model2vec's PCA fit_transform (float64 covariance eigh), and the kept variance ratio."""
    x64 = x.astype(np.float64)
    xc = x64 - x64.mean(axis=0)
    cov = xc.T @ xc / max(len(x64) - 1, 1)
    evals, evecs = np.linalg.eigh(cov)
    evals, evecs = np.clip(evals[::-1], 0.0, None), evecs[:, ::-1]
    scores = xc @ evecs[:, :dims]
    # Deterministic signs: each component's largest-magnitude score is positive.
    signs = np.sign(scores[np.abs(scores).argmax(axis=0), np.arange(dims)])
    scores *= np.where(signs == 0, 1.0, signs)
    ratio = float(evals[:dims].sum() / evals.sum())
    return scores.astype(np.float32), ratio


def _sif_weights(n: int, sif_coefficient: float) -> FloatArray:
    """model2vec: Zipf frequency estimate by vocabulary rank, then SIF a / (a + p)."""
    inv_rank = 1.0 / np.arange(2, n + 2, dtype=np.float64)
    proba = inv_rank / inv_rank.sum()
    out: FloatArray = (sif_coefficient / (sif_coefficient + proba)).astype(np.float32)
    return out


@contextlib.contextmanager
def _build_lock(out_dir: Path) -> Iterator[None]:
    """Serialise builders of one artifact across processes (worker + tests, several workers)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with (out_dir.parent / f".{out_dir.name}.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_static_model(
    out_dir: Path | str,
    minilm: MiniLMEmbedder | None = None,
    *,
    force: bool = False,
    batch_size: int = 1024,
    max_tokens: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BuildReport:
    """Distil `static-minilm-256` into `out_dir` unless a valid build is already there.

    `max_tokens` distils only the first N vocabulary entries (tests); such a build is stamped
    and never mistaken for a full one. The artifact is written to a temporary sibling and
    renamed into place, so a crash never leaves a half-written model that looks valid.
    """
    out = Path(out_dir).resolve()
    t0 = time.perf_counter()
    minilm = minilm or MiniLMEmbedder()
    want = BuildStamp(
        source_sha256=file_sha256(minilm.model_dir / "model.safetensors"), max_tokens=max_tokens
    )
    with _build_lock(out):
        if not force and is_valid(out, want):
            return BuildReport(out, False, time.perf_counter() - t0, 0, 0, None)

        vocab = minilm.tokenizer.get_vocab(with_added_tokens=True)
        id_to_tok = {i: t for t, i in vocab.items()}
        n_vocab = minilm.word_emb.shape[0]
        if max_tokens is not None:
            n_vocab = min(n_vocab, max_tokens)
        remove = re.compile(TOKEN_REMOVE_PATTERN)
        specials = {t.content for t in minilm.tokenizer.get_added_tokens_decoder().values() if t.special}
        dropped = (specials - {"[PAD]", "[UNK]"}) | {t for t in vocab if remove.match(t)}
        keep = [i for i in range(n_vocab) if id_to_tok.get(i, "") not in dropped]
        if len(keep) <= PCA_DIMS:
            raise ValueError(f"need more than {PCA_DIMS} tokens to distil, got {len(keep)}")

        emb = _token_embeddings(minilm, keep, batch_size, progress)
        reduced, ratio = _pca(emb, PCA_DIMS)
        reduced *= _sif_weights(len(keep), SIF_COEFFICIENT)[:, None]
        table = np.zeros((minilm.word_emb.shape[0], PCA_DIMS), dtype=np.float32)
        table[keep] = reduced

        seconds = time.perf_counter() - t0
        _write_artifact(out, table, minilm, want, seconds=seconds, tokens=len(keep), ratio=ratio)
        log.info("built %s: %d tokens x %d dims in %.1fs", out, len(keep), PCA_DIMS, seconds)
        return BuildReport(out, True, seconds, len(keep), PCA_DIMS, ratio)


def _write_artifact(
    out: Path,
    table: FloatArray,
    minilm: MiniLMEmbedder,
    stamp: BuildStamp,
    *,
    seconds: float,
    tokens: int,
    ratio: float,
) -> None:
    from safetensors.numpy import save_file

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        save_file({"embeddings": table}, str(tmp / "model.safetensors"))
        tok = json.loads((minilm.model_dir / "tokenizer.json").read_text(encoding="utf-8"))
        tok["truncation"], tok["padding"] = None, None  # static models take any length
        (tmp / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
        config = {
            "model_type": "model2vec",
            "architectures": ["StaticModel"],
            "tokenizer_name": "sentence-transformers/all-MiniLM-L6-v2",
            "apply_pca": PCA_DIMS,
            "sif_coefficient": SIF_COEFFICIENT,
            "hidden_dim": PCA_DIMS,
            "seq_length": 1000000,
            "normalize": True,
            "unk_token": "[UNK]",
        }
        (tmp / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        meta = {
            **asdict(stamp),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(seconds, 2),
            "tokens": tokens,
            "explained_variance_ratio": round(ratio, 4),
        }
        (tmp / STAMP_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp makes it 0700; the worker may run as another user
        for f in tmp.iterdir():
            f.chmod(0o644)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def ensure_static_model(out_dir: Path, minilm: MiniLMEmbedder) -> Path:
    """A valid static model directory: `out_dir`, a valid default-location build, or a new build."""
    want = BuildStamp(source_sha256=file_sha256(minilm.model_dir / "model.safetensors"))
    if is_valid(out_dir, want):
        return out_dir
    fallback = default_models_dir() / STATIC_MODEL_NAME
    if fallback != out_dir and is_valid(fallback, want):
        log.info("static model missing at %s; using the build at %s", out_dir, fallback)
        return fallback
    log.warning(
        "static embedding model missing or stale at %s; distilling it from MiniLM now "
        "(one-off, about a minute; `rb-streams models build` does it ahead of time)",
        out_dir,
    )
    build_static_model(out_dir, minilm)
    return out_dir
