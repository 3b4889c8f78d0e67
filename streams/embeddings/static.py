"""A model2vec-style static embedder: one vector per token, a sentence is the mean of its
token rows. Orders of magnitude cheaper than MiniLM; `streams.embeddings.model_build` distils
ours from MiniLM with the numpy forward pass. A text with no usable token (e.g. empty) embeds
to the zero vector.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .paths import _read_json
from .vectors import FloatArray, l2_normalise

_ASCII_PIECE = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
# BertNormalizer(clean_text) drops control characters; tab, newline and CR are whitespace.
_ASCII_CONTROL = {c: None for c in [*range(0, 9), 11, 12, *range(14, 32), 127]}
_HAS_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # what _ASCII_CONTROL drops
# The per-word caches are bounded in entries and in key length (a producer's 20,000-character
# run of letters is one piece: kept, 200,000 of them would take gigabytes). What is not kept is
# worked out again when met: the same ids.
PIECES_KEPT = 200_000  # pieces (runs of letters and digits, punctuation) -> ids
WORDS_KEPT = 50_000  # whitespace-separated words -> ids
CHARS_KEPT = 32  # longer pieces and words are not kept


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


class StaticEmbedder:
    """A model2vec-format static model: mean of token vectors, then L2 normalisation.

    Reads `model.safetensors` (tensor "embeddings", one row per token id), `tokenizer.json`
    and `config.json` from `model_dir`, as model2vec saves them. Like model2vec, special
    tokens are not added, [UNK] is dropped and at most `max_length` tokens count; a text with
    no token left (e.g. empty) embeds to the zero vector.
    """

    def __init__(self, model_dir: Path | str, *, name: str | None = None, max_length: int = 512) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

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
        self._word_ids: dict[str, tuple[int, ...]] = {}  # piece -> ids
        self._chunk_ids: dict[str, tuple[int, ...]] = {}  # whitespace-separated word -> ids
        self._word_split = _is_uncased_bert(self.model_dir / "tokenizer.json")
        model_cfg = _read_json(self.model_dir / "tokenizer.json").get("model") or {}
        # WordPiece gives a word that is in its vocabulary (and not too long) its one id: a new
        # piece found there needs no tokenizer call (`_words_ids`).
        self._whole: dict[str, int] = self.tokenizer.get_vocab(with_added_tokens=False)
        self._whole_max = int(model_cfg.get("max_input_chars_per_word", 100))
        self._added = [
            t["content"] for t in _read_json(self.model_dir / "tokenizer.json").get("added_tokens", [])
        ]
        self.name = name or self.model_dir.name
        self.dim = int(self.table.shape[1])

    def token_ids(self, text: str) -> list[int]:
        """The tokenizer's ids for `text`, through per-word caches on the common path.

        A BERT (uncased) tokenizer splits ASCII text into lower-cased runs of letters and
        digits and single punctuation characters, then WordPiece works on each piece alone.
        So for ASCII text the ids are the concatenation of cached per-piece ids: exactly what
        the tokenizer returns (tests/unit/embeddings/test_models.py checks it), at a fraction of the
        cost of a full call (~45 us per text, the largest part of a monitor step). No piece
        spans whitespace, so the ids of a whitespace-separated word are cached too: one
        `split` and a lookup per word instead of the piece regex over the whole text. Other
        text, and tokenizers this reasoning does not hold for, go through the tokenizer."""
        if (
            not self._word_split
            or not text.isascii()
            or ("[" in text and any(a in text for a in self._added))  # "[SEP]" is one token
        ):
            return list(self.tokenizer.encode(text, add_special_tokens=False).ids)
        if _HAS_CONTROL.search(text) is not None:
            text = text.translate(_ASCII_CONTROL)
        words = text.lower().split()
        known = self._chunk_ids
        try:
            return [i for w in words for i in known[w]]
        except KeyError:  # a word not seen yet: all of this text's are worked out at once
            new = self._words_ids([w for w in dict.fromkeys(words) if w not in known])
        return [i for w in words for i in (new[w] if w in new else known[w])]

    def _words_ids(self, words: list[str]) -> dict[str, tuple[int, ...]]:
        """The ids of lower-cased, whitespace-free ASCII words, each the concatenation of its
        pieces' ids. A piece no cache holds is a vocabulary word (WordPiece's longest match is
        the whole piece: its one id), or goes to the tokenizer, all of a text's in one call
        (`_encode_pieces`)."""
        cache, whole, most = self._word_ids, self._whole, self._whole_max
        pieces_of = [(w, _ASCII_PIECE.findall(w)) for w in words]
        todo: dict[str, None] = {}
        found: dict[str, tuple[int, ...]] = {}  # worked out here and not kept
        for _w, pieces in pieces_of:
            for p in pieces:
                if p not in cache:
                    tid = whole.get(p) if len(p) <= most else None
                    if tid is None:
                        todo[p] = None
                    elif len(p) <= CHARS_KEPT and len(cache) < PIECES_KEPT:
                        cache[p] = (tid,)
                    else:
                        found[p] = (tid,)  # not kept: its one id all the same
        if todo:
            for p, tids in zip(todo, self._encode_pieces(list(todo)), strict=True):
                found[p] = tids
                if len(p) <= CHARS_KEPT and len(cache) < PIECES_KEPT:
                    cache[p] = tids
        out: dict[str, tuple[int, ...]] = {}
        chunks = self._chunk_ids
        for w, pieces in pieces_of:
            got = out[w] = tuple(i for p in pieces for i in (found[p] if p in found else cache[p]))
            if len(w) <= CHARS_KEPT and len(chunks) < WORDS_KEPT:
                chunks[w] = got
        return out

    def _encode_pieces(self, pieces: list[str]) -> list[tuple[int, ...]]:
        """Each piece's ids, from one tokenizer call over the pieces joined by spaces (one
        call per piece if the tokens do not fall one group per piece, which plain ASCII
        pieces always do)."""
        enc = self.tokenizer.encode(" ".join(pieces), add_special_tokens=False)
        got: list[list[int]] = [[] for _ in pieces]
        ok = True
        for tid, word in zip(enc.ids, enc.word_ids, strict=True):
            if word is None or not 0 <= word < len(pieces):
                ok = False
                break
            got[word].append(tid)
        if ok and all(got):
            return [tuple(g) for g in got]
        return [tuple(self.tokenizer.encode(p, add_special_tokens=False).ids) for p in pieces]

    def _vector(self, text: str) -> FloatArray | None:
        """The mean of `text`'s usable token rows (None: no usable token)."""
        ids = np.array(self.token_ids(text), dtype=np.int64)
        ids = ids[self.usable[ids]][: self.max_length]
        n = len(ids)
        if not n:
            return None
        # `self.table[ids].mean(axis=0)` without its Python-level bookkeeping: the same sum
        # (row after row, float32) divided the same way (by an intp count, into the sum).
        total: FloatArray = np.add.reduce(self.table[ids], axis=0)
        np.true_divide(total, np.intp(n), out=total, casting="unsafe")
        return total

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """Every text computed (no cache here: see `CachedEmbedder`)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            vec = self._vector(text)
            if vec is not None:
                out[row] = vec
        return l2_normalise(out) if self.normalize else out
