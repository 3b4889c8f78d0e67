"""A step's cost is bounded whatever its texts hold: a 1 MB observation, a thought at its cut
and a 1 MB tool input cost a small multiple of a 2 KB step (both measured here, in the same
test, so the bound holds on a slow or busy machine). A monitor that starts reading a whole
text, or a regex over all of it, fails this (BENCHMARKS.md section 11)."""

from __future__ import annotations

import random
import re
import time

import orjson

from streams.core.engine import Engine
from streams.core.etrace_rules import Answer
from streams.core.events import Limits
from streams.core.monitors import contradiction, drift
from streams.core.results import Decided, Incoming
from streams.core.scoring import heuristic
from streams.core.state import TraceState
from tests.factories import run_start, step
from tests.models import semantics

# Wide enough for a 1 MB event: what the core does with one, not the size check, is tested.
LIMITS = Limits(max_event_bytes=4 * 1024 * 1024)
WORDS = [
    "the",
    "a",
    "of",
    "to",
    "fix",
    "error",
    "test",
    "file",
    "config",
    "request",
    "import",
    "module",
    "failed",
]
PROSE = (
    "I think the bug is in `parse()`; see src/app/io.py. Maybe the config is stale, so the "
    'test fails with "KeyError: x". Therefore I will switch to the loader instead. '
)


def _text(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(WORDS) if rng.random() < 0.9 else PROSE
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def _cpu_per_step(engine: Engine, thought: str, obs: str, command: str, steps: int = 6) -> float:
    """The least CPU seconds of `steps` steps of one run (read, step, seal)."""
    run = f"r{random.random()}"
    start = engine.read(orjson.dumps(run_start(run)), 1.0)
    assert isinstance(start, Incoming)
    st: TraceState | None = engine.seal(engine.step(None, start, 1.0)).state
    best = float("inf")
    for k in range(1, steps + 1):
        raw = orjson.dumps(
            step(run, k, thought=thought, action="bash", action_input={"command": command}, observation=obs)
        )
        t0 = time.process_time()
        read = engine.read(raw, 1.0 + k)
        assert isinstance(read, Incoming)
        out = engine.step(st, read, 1.0 + k)
        plan = out.effects.answer_now if isinstance(out, Decided) else None
        sealed = engine.seal(out, [Answer(q.tier) for q in plan.queries] if plan else [])
        best = min(best, time.process_time() - t0)
        assert sealed.decision is not None and sealed.rejection is None
        st = sealed.state
    return best


def test_a_huge_step_costs_a_small_multiple_of_a_2kb_step() -> None:
    engine = Engine(None, semantics(), LIMITS)
    rng = random.Random(7)
    small = _cpu_per_step(engine, _text(rng, 600), _text(rng, 1400), "pytest -q tests/")
    huge = _cpu_per_step(engine, _text(rng, 60_000), _text(rng, 1_000_000), _text(rng, 1_000_000))
    # measured (BENCHMARKS.md section 11): ~3x; a monitor reading a whole 1 MB text: >50x
    assert huge < 15 * small, f"1 MB step {huge * 1000:.1f} ms vs 2 KB step {small * 1000:.2f} ms"


def _without(pattern: re.Pattern[str], lookahead: str) -> re.Pattern[str]:
    assert lookahead in pattern.pattern
    return re.compile(pattern.pattern.replace(lookahead, "", 1), pattern.flags)


def test_the_first_letter_lookaheads_change_no_match() -> None:
    """The lookaheads that speed up drift's and contradiction's searches name every first
    letter of their alternatives, case folding included (a long s is an `s`, a dotless i an `i`)."""
    cases = [
        (drift.ACK, "(?=[abcdfilmnpst])"),
        (contradiction.CONCLUSION, "(?=[chirstw])"),
        (contradiction.HEDGE, "(?=[achilmnpsuw])"),
    ]
    rng = random.Random(3)
    alphabet = "aAsS\u017fiI\u0131\u0130kK\u212atTcChHwW ,.:'?\n" + "".join(chr(c) for c in range(0x61, 0x7B))
    texts = [
        PROSE,
        "\u017fwitch to X",
        "\u0131nstead we'll",
        "Thu\u017f",
        "TH\u0130S MEANS",
        "\u017feems",
        "\u0130f it",
        "x ?",
    ]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(3000)]
    for pattern, lookahead in cases:
        plain = _without(pattern, lookahead)
        # each alternative, as written, still matches (a first letter missing from the set
        # would make its alternative unreachable)
        body = plain.pattern.split("\\b(", 1)[1]
        for word in re.findall(r"(?:^|\|)\(?([a-z][a-z' ]+)", body):
            texts.append(word)
            texts.append(word.upper())
        for t in texts:
            a, b = plain.search(t), pattern.search(t)
            assert (a and a.span()) == (b and b.span()), (pattern.pattern[:30], t)


def test_entities_are_counted_up_to_their_cap_as_before() -> None:
    rng = random.Random(5)
    for _ in range(300):
        t = _text(rng, rng.randint(0, 3000)) + rng.choice(["", " a/b", " x.y", ' "q"', " 'qq'", " `c`"])
        assert heuristic._entities(t) == min(len(heuristic._ENTITY.findall(t)), heuristic.ENTITY_CAP)


def test_words_are_read_as_the_word_pattern_reads_them() -> None:
    rng = random.Random(9)
    alphabet = "aZ09_' \t\n\x0b\x0c\x1c\x1f\x7f-.,/\"" + "\u00e9\u00a0\u2019\u212a"
    texts = [_text(rng, 2000).lower(), "", " ", "it's_9 x--y", "a\x1cb"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(3000)]
    for t in texts:
        assert heuristic._words(t) == heuristic._WORD.findall(t), repr(t)
