"""No regular expression of the core costs more per KB on long input than on short input.

Every pattern of `streams.core` (module and class attributes, and literal patterns of inline
`re.*` calls: a new one is found without touching this file) runs on adversarial text of 2 and
32 KB: long runs of one kind of character, names, paths, numbers, lines, and strings made from
the pattern's own alternatives, each ending in a character it may then fail on. The CPU cost per
KB at 32 KB must stay within FACTOR of the cost per KB at 2 KB (a quadratic pattern makes it
16x) and under BOUND. The patterns as they were before issue 32 (`bench.regex_cost.OLD`) fail
the same check, and one maximal step (every string field at its limit, 256 KB) goes through
the core within a step budget that the old patterns did not meet.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.regex_cost import (
    OLD,
    STEP_UNITS,
    WORST,
    adversarial,
    core_patterns,
    cpu_per_kb,
    inline_calls,
    maximal_step,
    new_reader,
    old_patterns,
    re_calls,
    step_seconds,
    text,
)
from tests.models import semantics

FACTOR = 4.0  # cost per KB at 32 KB over the cost per KB at 2 KB; linear patterns measure 1-2.5x
FLOOR_US = 5.0  # below this per KB at 32 KB (160 us a call) a ratio is timer noise
BOUND_US = 3000.0  # per KB at any size: the slowest linear pattern costs ~0.7 ms/KB here
STEP_BUDGET_S = 0.25  # one 256 KB maximal step: 10-30 ms now, 1.2-4.8 s with the old patterns

PATTERNS = core_patterns()
# The readers that replaced one-regex scans (`scan.leftmost`, heredocs, markup): linear too.
READERS = {
    f"reader:{name}": new_reader(name)
    for name in (
        "monitors.loop.signal.FACT",
        "monitors.drift.IDENT",
        "reading.shell.HEREDOC",
        "reading.observation._MARKUP",
    )
}


def _scan(p: re.Pattern[str]) -> Callable[[str], object]:
    return lambda s: sum(1 for _ in p.finditer(s))


def _measure(fn: Callable[[str], object], unit: str, tail: str, careful: bool) -> tuple[float, float]:
    """(us per KB at 2 KB, at 32 KB); 32 KB is skipped (inf) when 2 or 8 KB is over BOUND."""
    runs, least = (5, 0.002) if careful else (2, 0.0003)
    small = cpu_per_kb(fn, text(unit, tail, 2048), runs=runs, least_s=least) * 1e6
    if small > BOUND_US or (
        small > 100 and cpu_per_kb(fn, text(unit, tail, 8192), runs=1, least_s=0) * 1e6 > BOUND_US
    ):
        return small, float("inf")  # not worth a 32 KB call of many seconds
    return small, cpu_per_kb(fn, text(unit, tail, 32768), runs=3 if careful else 1, least_s=0) * 1e6


def _too_slow(small: float, big: float) -> bool:
    return big > BOUND_US or (big > FACTOR * small and big > FLOOR_US)


def violations(fn: Callable[[str], object], inputs: list[tuple[str, str]], first: bool = False) -> list[str]:
    """The inputs on which `fn`'s cost per KB grows with length (each confirmed by a careful
    second measurement, so a busy machine does not fail the test)."""
    out = []
    for unit, tail in inputs:
        small, big = _measure(fn, unit, tail, careful=False)
        if _too_slow(small, big):
            if small <= BOUND_US:  # (a busy machine cannot make a call cost 3 ms of CPU per KB)
                small, big = _measure(fn, unit, tail, careful=True)
            if _too_slow(small, big):
                out.append(f"{unit!r}+{tail!r}: {small:.1f} us/KB at 2 KB, {big:.1f} at 32 KB")
                if first:
                    break
    return out


def test_every_re_call_in_the_core_is_measured():
    """A pattern this test cannot see would not be measured: every `re.compile` of the core is
    a module or class attribute, every other `re.*` call has a literal pattern."""
    inline = {where for where, _p, _f in inline_calls()}
    for where, _call, name in re_calls():
        assert (name in PATTERNS) if name else (where in inline), (where, name)
    assert len(PATTERNS) >= 70


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_cost_per_kb_does_not_grow_with_length(name):
    p = PATTERNS[name]
    assert violations(_scan(p), adversarial(p)) == []


@pytest.mark.parametrize("name", sorted(READERS))
def test_the_readers_that_replaced_quadratic_patterns_are_linear(name):
    old = OLD[name.removeprefix("reader:")]
    assert violations(READERS[name], adversarial(old)) == []


@pytest.mark.parametrize("name", sorted(OLD))
def test_the_check_fails_on_the_old_pattern(name):
    """The check can fail: each pattern as it was is caught on the text it was worst on."""
    assert violations(_scan(OLD[name]), [WORST[name]], first=True), name


def test_a_maximal_step_goes_through_the_core_within_the_step_budget():
    sem = semantics()
    step_seconds(maximal_step("a", 4096), sem)  # models loaded, caches warm
    slow = {}
    for unit in STEP_UNITS:
        took = min(step_seconds(maximal_step(unit, 256 * 1024), sem, runs=2))
        if took > STEP_BUDGET_S:
            slow[unit] = took
    assert slow == {}


def test_with_the_old_patterns_a_maximal_step_was_over_the_budget():
    """The budget catches the old core: a 32 KB step of digits, the old patterns put back."""
    sem = semantics()
    with old_patterns():
        took = step_seconds(maximal_step("1", 32 * 1024), sem)[0]
    assert took > STEP_BUDGET_S


def test_reading_an_observation_costs_no_more_at_256_kb_than_at_8_kb():
    """observation.py's promise: past its head and tail, the size of a tool result adds nothing
    (but one C scan of a text that is all whitespace)."""
    from streams.core.reading import observation

    for unit in ("1 passed in 0.1s\n", "a.", "\n", " ", "<returncode>", "exit code 1 (", "Error: x\n"):
        costs = []
        for kb in (8, 256):
            s = text(unit, "", kb * 1024)
            costs.append(
                min(cpu_per_kb(lambda s: observation.read(s, True), s, runs=3) * kb for _ in range(2))
            )
        assert costs[1] <= 2 * costs[0] + 0.001 and costs[1] < 0.01, (unit, costs)


# ---- the same results as before ---------------------------------------------------------------

TOKENS = {
    "scoring.heuristic._ENTITY": ["a", "/", ".", "-", "_", "1", '"', "'", "`", " ", "\n", "é", "pkg.mod", "a/b", "../", "A"],
    "reading.features.VOLATILE": ["1", "12", "123", ":", ".", "-", "T", " ", "ms", "s", "sec", "seconds", "0x", "ff", "pid", "=", "x", "2024-01-02", "10:00", "12:34:56", "é"],
    "reading.features.COORDINATION": ["next speaker", "terminate", "{", '"', " ", "\n", "is_request_satisfied", "ledger", "plan", ":", "please ", "continue", "-", "group chat manager", "let other participant", "s", "x"],
    "monitors.loop.signal.FACT": ["a", "-", "1", "12", ".", ",", "py", "com", "`", '"', " ", "http://", "x.y", "é", "\n", "ab-cd", "_"],
    "monitors.loop.rules.ID": ["a", "1", "#", "-", "_", " ", ".", "é"],
    "monitors.drift.IDENT": ["a", "A", "_", "-", "1", ".", "py", "`", " ", "é", "\n", "Foo", "foo_bar", "x.js", "abcd"],
    "monitors.contradiction.IDENT": ["a", "A", "z", "_", "1", "`", " ", "é", "-", "Foo", "foo_bar"],
    "reading.shell.SUBMIT_WORD": ["SUBMIT", "A", "_", "Z", "1", " ", "é", "FINAL_OUTPUT", "TASK_COMPLETE", "COMPLETE_TASK", "a"],
    "reading.shell.HEREDOC": ["<<", "-", "'", '"', "EOF", "E", "EO", "a", " ", "\n", "\t", ";", "cat ", "EOFX", "\n  EOF\n", "\nEOF", "\nE\n"],
    "reading.observation._CRASH_LINE": ["Caused by: ", "x", "a.b", "\n", " ", "E", "Error", "Exception", ":", "a.py:12: error", "fatal ", "error: ", "Traceback (most recent call last):", "Killed", "[ERROR]", "é"],
    "reading.observation._EXIT": ["exit code", "exit code:", "exitcode", " ", "\n", "\t", "[", "<returncode>", "1", "-", "finished with ", "exit ", "code", "status", ":", "return code", "x"],
    "reading.observation._MARKUP": ["<returncode>", "</returncode>", "<RETURNCODE>", "<a>", "</b>", "<", ">", "exit code", "exitcode", " ", "\n", "1", "-2", " (", ")", "x", "é", "("],
    "reading.observation._PYTEST": ["=", "==", " ", "\n", "\t", "1 passed", "12 failed", ", 2 errors", ", 3 passed", " in 0.12s", " in ", "0.1", "s", "x", "\n==== ", " ===="],
    "reading.observation._PYTEST_PART": ["1", "12", " failed", " passed", " error", " errors", "x", " ", ",", "é", "s"],
    "reading.observation._MOCHA": [" ", "\n", "\t", "1", "12", " passing", " failing", "x", "é", "\r"],
}  # fmt: skip


# What the core takes from each pattern: where its matches differ but that does not (a
# summary line found from its first line rather than from a blank line before it), the test
# compares what is used.
USE: dict[str, Callable[[re.Pattern[str], str], object]] = {
    "reading.features.COORDINATION": lambda p, s: bool(p.search(s)),
    "reading.shell.SUBMIT_WORD": lambda p, s: bool(p.search(s)),
    "reading.observation._CRASH_LINE": lambda p, s: bool(p.search(s)),
    "reading.observation._EXIT": lambda p, s: (m := p.search(s)) and m.groups(),
    "reading.observation._PYTEST": lambda p, s: [m[1] for m in p.finditer(s)],
    "reading.observation._MOCHA": lambda p, s: p.findall(s),
}
FUNCTIONS = (
    "monitors.loop.signal.FACT",
    "monitors.drift.IDENT",
    "reading.shell.HEREDOC",
    "reading.observation._MARKUP",
)


def _old_result(name: str, s: str) -> object:
    p = OLD[name]
    if name == "reading.shell.HEREDOC":
        return p.sub(lambda m: "<<EOF" + m[3], s)
    if name == "reading.observation._MARKUP":
        return p.sub("", s)
    if name == "monitors.drift.IDENT":
        return [(a or b) for a, b in p.findall(s)]
    if name == "monitors.loop.signal.FACT":
        return p.findall(s)
    return USE.get(name, lambda p, s: [(m.span(), m.groups()) for m in p.finditer(s)])(p, s)


def _new_result(name: str, s: str) -> object:
    from streams.core.monitors import drift
    from streams.core.reading.scan import leftmost

    if name == "monitors.drift.IDENT":
        return [m[1] or m[2] if m else s[a:b] for a, b, m in leftmost(drift.IDENT, drift.IDENT_FILE, s)]
    if name in FUNCTIONS:
        return new_reader(name)(s)
    return USE.get(name, lambda p, s: [(m.span(), m.groups()) for m in p.finditer(s)])(PATTERNS[name], s)


@pytest.mark.parametrize("name", sorted(OLD))
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_rewrites_find_what_the_old_patterns_found(name, data):
    """Same matches, same groups, same replacements as the old pattern, on text made of the
    pieces each pattern looks for (the golden decisions hold them on real runs)."""
    s = "".join(data.draw(st.lists(st.sampled_from(TOKENS[name]), max_size=30)))
    assert _new_result(name, s) == _old_result(name, s)
