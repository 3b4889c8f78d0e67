"""The product's four-signal heuristic (SPEC section 4): how hard a step looks from its wording.

Kept exactly as documented so runs that select `heuristic` score as they always did; the
`trajectory` scorer uses it as one of its inputs.
"""

from __future__ import annotations

import math
import re
from collections import Counter

HEDGE_WORDS = frozenset(
    [
        "maybe",
        "perhaps",
        "might",
        "possibly",
        "probably",
        "unsure",
        "unclear",
        "hmm",
        "hm",
        "reconsider",
        "guess",
        "seems",
        "seem",
        "apparently",
        "presumably",
        "wonder",
        "confused",
        "confusing",
        "uncertain",
    ]
)
HEDGE_PHRASES = ("not sure", "not certain", "i think", "could be", "let me rethink", "on second thought")
ERROR_WORDS = frozenset(
    [
        "error",
        "errors",
        "exception",
        "exceptions",
        "traceback",
        "failed",
        "fail",
        "fails",
        "failing",
        "failure",
        "crash",
        "crashed",
        "crashes",
        "panic",
        "segfault",
        "fatal",
        "broken",
        "bug",
        "timeout",
        "denied",
        "undefined",
        "refused",
    ]
)
_WORD = re.compile(r"[A-Za-z0-9_']+")
# `_WORD` on ASCII text, in C: every other byte becomes a space, and the text splits on spaces
# (a 20,000-character thought: ~0.15 ms instead of ~0.6 ms).
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_'")
_NON_WORD_TO_SPACE = bytes(c if c in _WORD_BYTES else 0x20 for c in range(256))
# File paths (a/b.c, ./x, /x/y), dotted identifiers (pkg.mod.fn), quoted strings. A path is
# only tried where a run of name characters starts: the search passed that start first, and
# from any later position in the run the run ends the same way, so retrying there (a rescan
# per character, as before: 0.6-1.4 s for a 20,000-character thought) finds nothing new.
_ENTITY = re.compile(
    r"""(?:(?<![\w.-])[\w.-]*+/[\w./-]+)|(?:\b[A-Za-z_]\w*+(?:\.[A-Za-z_]\w*+)+\b)|(?:"[^"\n]{1,200}")|(?:'[^'\n]{2,200}')|(?:`[^`\n]{1,200}`)"""
)

W_HEDGE, W_LENGTH, W_ERROR, W_ENTITY = 0.30, 0.25, 0.25, 0.20
LENGTH_CAP = 500
ENTITY_CAP = 10
ERROR_CAP = 3
HEDGE_DENSITY_FULL = 0.10  # one hedge every ten words saturates the signal
# Scoring cost must not depend on how much text an agent sends.
MAX_SCORED_CHARS = 20_000
# Every entity holds one of these, or a dot that a name goes on after (`_DOTTED`): a text
# without any has none (no scan of it needed; a sentence's full stop is not such a dot).
_ENTITY_CHARS = ("/", '"', "'", "`")
_DOTTED = re.compile(r"\.[A-Za-z_]")


def signals(text: str) -> dict[str, float]:
    """The four normalised signals in [0, 1]."""
    text = text[:MAX_SCORED_CHARS]
    lower = text.lower()
    words = _words(lower)
    n = len(words)
    # Counted in C (a 20,000-character thought has ~3,000 words), and looked up for the listed
    # words the thought holds only: looking up all 41 went through the Counter's Python-level
    # `__missing__` for every absent one (half the cost of the signals).
    counts = Counter(words)
    hedges = sum(map(counts.__getitem__, HEDGE_WORDS.intersection(counts)))
    hedges += sum(map(lower.count, HEDGE_PHRASES))
    errors = sum(map(counts.__getitem__, ERROR_WORDS.intersection(counts)))
    entities = _entities(text)
    return {
        "hedging": min(1.0, (hedges / max(n, 1)) / HEDGE_DENSITY_FULL),
        "length": min(n, LENGTH_CAP) / LENGTH_CAP,
        "error": min(errors, ERROR_CAP) / ERROR_CAP,
        "entity": min(entities, ENTITY_CAP) / ENTITY_CAP,
    }


def _words(text: str) -> list[str]:
    """`_WORD.findall(text)`: its word characters are ASCII, so every other character, a
    non-ASCII one too (encoded as "?"), only separates words."""
    return text.encode("ascii", "replace").translate(_NON_WORD_TO_SPACE).decode("ascii").split()


def _entities(text: str) -> int:
    """How many entities the text names, counted up to ENTITY_CAP (all the signal reads): a
    long thought stops being scanned at its tenth, and one with no entity character is not
    scanned at all (the scan was ~4 ms of a 20,000-character thought's step)."""
    if not any(c in text for c in _ENTITY_CHARS) and _DOTTED.search(text) is None:
        return 0
    n = 0
    for _ in _ENTITY.finditer(text):
        n += 1
        if n >= ENTITY_CAP:
            break
    return n


def heuristic_score(text: str | None) -> float:
    """Hedging 0.30, length 0.25, error language 0.25, entities 0.20, squashed; empty text 0.5."""
    if not text or not text.strip() or not _WORD.search(text):
        return 0.5
    s = signals(text)
    raw = W_HEDGE * s["hedging"] + W_LENGTH * s["length"] + W_ERROR * s["error"] + W_ENTITY * s["entity"]
    return 1.0 / (1.0 + math.exp(-6.0 * (raw - 0.5)))
