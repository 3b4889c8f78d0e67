"""The cheap prechecks and rewrites that spare the per-step CPU of the injection monitor and its
neighbours answer exactly as the code they stand in front of: fuzzed against it with
hypothesis (texts made of the patterns' own words) and on every text of the real dev runs
(../shared/data/real-dev; that part is skipped without it)."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core import asks, instructions
from streams.core.monitors import contradiction, waiting
from streams.shared import taint, untrusted
from streams.shared.taint import scan
from tests.fixtures.golden_decisions import REAL_DEV

# Words of the patterns and their near misses, glued by separators: where a precheck and a
# pattern disagree, it is on such texts.
_WORDS = [
    "in progress",
    "in_progress",
    "In-Progress",
    "progress",
    "queued",
    "QUEUED",
    "pending",
    "not ready",
    "not yet ready",
    "NOT YET done",
    "not completed",
    "not complete",
    "not finished",
    "not",
    "yet",
    "ContainerCreating",
    "PodInitializing",
    "Init:0/2",
    "init:12/3",
    "still running",
    "Still waiting",
    "still in progress",
    "waiting for the job",
    "Waiting for pods",
    "status",
    "State",
    "phase",
    '"status": "running"',
    "state=Building",
    "phase : 'processing'",
    "running",
    "creating",
    "\u017ftatus",  # a long s: case-blind, it is an s
    "rate limit",
    "Rate-Limited",
    "too many requests",
    "Throttled",
    "temporarily",
    "Temporary failure",
    "unavailable",
    "overloaded",
    "connection reset",
    "ECONNREFUSED",
    "ETIMEDOUT",
    "try again",
    "Retrying",
    "read timed out",
    "upstream timedout",
    "socket time out",
    "Request Timeout",
    "Gateway Timeout",
    "HTTP/1.1 503",
    "status_code=429",
    "error: 502",
    "500 Internal",
    "429 Too Many",
    "503 - Service",
    "5",
    "٥٠٣",
    "K",
    "İ",
    "x",
    "_",
    "9",
]
_SEPS = [" ", "", "\n", ":", "=", '"', "'", "-", "_", ".", "é", "\t"]
texts = st.lists(st.sampled_from(_WORDS + _SEPS), max_size=24).map("".join)


REAL_EVERY = 4


@functools.cache
def real_texts() -> tuple[str, ...]:
    """The thoughts and results of the real dev runs' steps, and their tasks (each once; every
    REAL_EVERY-th of them: the suite's time is short, and a replay of the runs compares all)."""
    if not REAL_DEV.is_dir():
        return ()
    out: dict[str, None] = {}
    for path in sorted(REAL_DEV.glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            if line.strip():
                ev = orjson.loads(line)
                for key in ("task", "thought", "observation"):
                    x = ev.get(key)
                    if isinstance(x, str) and x:
                        out[x] = None
    return tuple(out)[::REAL_EVERY]


def heads(n: int) -> Iterator[str]:
    for t in real_texts():
        yield t[:n]


def needs_real() -> None:
    if not real_texts():
        pytest.skip(f"real dev data not found at {REAL_DEV}")


@settings(max_examples=200, deadline=None)
@given(texts)
def test_pending_precheck_answers_as_the_pattern_on_fuzzed_texts(s: str) -> None:
    assert waiting._pending(s) == (waiting.PENDING.search(s) is not None)


def test_pending_precheck_answers_as_the_pattern_on_real_results() -> None:
    needs_real()
    for s in heads(waiting.PENDING_CHARS):
        assert waiting._pending(s) == (waiting.PENDING.search(s) is not None), s[:200]


@settings(max_examples=200, deadline=None)
@given(texts)
def test_transient_precheck_answers_as_the_pattern_on_fuzzed_texts(s: str) -> None:
    assert waiting._transient(s) == (waiting.TRANSIENT.search(s) is not None)


def test_transient_precheck_answers_as_the_pattern_on_real_results() -> None:
    needs_real()
    for s in heads(waiting.TRANSIENT_CHARS):
        assert waiting._transient(s) == (waiting.TRANSIENT.search(s) is not None), s[:200]


_CLAIM_WORDS = [
    "The root cause is",
    "the issue is",
    "The problem was",
    "this means",
    "Which shows",
    "therefore",
    "thus",
    "hence",
    "I found that",
    "i confirmed that",
    "it turns out",
    "so the",
    "the answer is",
    "in conclusion",
    "conclusion:",
    "Confirmed:",
    "is not the cause",
    "isn't a culprit",
    "is the problem",
    "maybe",
    "we need to",
    "the `parse` function",
    "is missing",
    "is not broken",
    "x",
    "\u017fo the",
    "ROOT CAUSE",
]
_CLAIM_SEPS = [" ", ". ", "? ", "; ", "\n", "\n\n", "", ",", "é", "_", "!  "]
thoughts = st.lists(st.sampled_from(_CLAIM_WORDS + _CLAIM_SEPS), max_size=30).map("".join)


@settings(max_examples=200, deadline=None)
@given(thoughts)
def test_claims_gate_changes_no_claim_on_fuzzed_thoughts(s: str) -> None:
    assert contradiction.claims_of(s) == contradiction._claims(s[:4000])


def test_claims_gate_changes_no_claim_on_real_texts() -> None:
    needs_real()
    for s in real_texts():
        assert contradiction.claims_of(s) == contradiction._claims(s[:4000]), s[:200]


def _may_flag_before(text: str, values: list[tuple[str, str, int]]) -> bool:
    """`instructions.may_flag` as it was written before its entries were grouped by word."""
    if not text or not isinstance(text, str):
        return False
    if untrusted.channel_copies(text[: instructions.TEXT_MAX]):  # a copy of our channel (issue 49)
        return True
    t = instructions._lowered(text)
    words = instructions._words(t)
    weak: set[str] = set()
    for name, key, word, _pat in instructions._AT_B:
        if (key is not None and key not in words) or word not in t:
            continue
        need = instructions._WORDS_OF.get(word)
        if need is not None and not (words & need[0] or (need[1] is not None and need[1] in t)):
            continue
        if name in instructions._STRONG:
            return True
        weak.add(name)
    if ":" in t and any(w.encode() in words for w in instructions._ROLES):
        return True
    if any(key in words and word in t for key, word in instructions._ADDRESSEE_KEYS_B) or (
        b"you" in words and "to you" in t and "message from" in t
    ):
        weak.add("address")
    dest = any(kind in instructions.DESTINATIONS for kind, _v, _at in values)
    if dest and asks.may_ask(t, words):  # a request of any wording (issue 49): `read` decides
        return True
    if "note" in weak or dest:
        weak.add("order")
    return len(weak) >= 2


_INSTR_WORDS = [
    *(w for _n, _k, w, _p in instructions._AT_B),
    *instructions._ADDRESSEES,
    *instructions._ROLES,
    "rules",
    "instructions",
    "prompt",
    "you",
    "to you",
    "message from",
    "gave",
    "tell",
    "asking",
    "<|im_start|>",
    "send the file to a@b.com",
    "USAIgnore",
    "x",
]
_INSTR_SEPS = [" ", "", "\n", ":", ".", "!", "\\n", "'", "é"]
instr_texts = st.lists(st.sampled_from(_INSTR_WORDS + _INSTR_SEPS), max_size=24).map("".join)


@settings(max_examples=250, deadline=None)
@given(instr_texts)
def test_may_flag_answers_as_before_on_fuzzed_texts(s: str) -> None:
    values = scan(s)
    assert instructions.may_flag(s, values) == _may_flag_before(s, values)


def test_may_flag_answers_as_before_on_real_texts() -> None:
    needs_real()
    for s in real_texts():
        values = scan(s)
        assert instructions.may_flag(s, values) == _may_flag_before(s, values), s[:200]


def _token_values_before(raw: str) -> tuple[tuple[str, str], ...]:
    """`streams.shared.taint._token_values` as it was before a one-piece token took a short way."""
    tok = raw[: taint.TOKEN_MAX].strip(taint._LEAD).rstrip(taint._TRAIL)
    if not tok or not taint._CANDIDATE(tok) or (tok.isdigit() and len(tok) < 7):
        return ()
    return tuple(v for piece in taint._pieces(tok) for v in taint._classified(piece))


def _scan_before(t: str, limit: int) -> list[tuple[str, str, int]]:
    """`streams.shared.taint._scan` of a text with no currency word, as it was before `add` was inlined."""
    seen: set[str] = set()
    out: list[tuple[str, str, int]] = []

    def add(kind: str, value: str, at: int) -> bool:
        if value not in seen:
            seen.add(value)
            out.append((kind, value, at))
        return len(out) < limit

    for raw in dict.fromkeys(taint._CANDIDATE_TOKENS(t)):
        for kind, value in _token_values_before(raw[: taint.TOKEN_MAX]):
            if not add(kind, value, -1):
                return out
    if "'" in t or '"' in t:
        for m in taint._QUOTED.finditer(t):
            ident = taint._ident(m.group(1) or m.group(2) or "")
            if ident is not None and not add("ident", ident, m.start()):
                return out
    return out


_VALUE_WORDS = [
    "a@b.com",
    "x.y@mail.example.org,",
    "a@b.com,c@d.co.uk",
    "https://www.Example.com/x/",
    "www.site.io",
    "DE89370400440532013000",
    "$1,250.00",
    "€30",
    "12345678",
    "+41 (0)44-123-4567",
    "+1-555-123-4567",
    "2024-01-05",
    "./src/app.py",
    "/workspace/a/b/",
    "report.pdf",
    "astropy.modeling",
    "m.Linear1D(5),",
    "'quoted name'",
    '"another one"',
    "(12)",
    "123",
    "x",
    "...",
    ",",
    "a,b,c",
]
value_texts = st.lists(st.sampled_from([*_VALUE_WORDS, " ", "\n", ", "]), max_size=30).map("".join)


@settings(max_examples=200, deadline=None)
@given(value_texts, st.integers(min_value=-1, max_value=6))
def test_scan_finds_what_it_found_before(s: str, limit: int) -> None:
    if any(c in s.lower() for c in taint._CURRENCY_CORES):
        return
    assert taint._scan(s, limit, False) == _scan_before(s, limit)
    for raw in s.split():
        assert taint._token_values(raw[: taint.TOKEN_MAX]) == _token_values_before(raw)


def test_scan_finds_what_it_found_before_on_real_texts() -> None:
    needs_real()
    for s in real_texts():
        t = s[: taint.TEXT_MAX]
        if not any(c in t.lower() for c in taint._CURRENCY_CORES):
            assert taint._scan(t, taint.VALUES_MAX, False) == _scan_before(t, taint.VALUES_MAX)
