"""The C prechecks and candidate searches in front of the reading's regular expressions give
what the regular expression alone gave (the code before them is written out here as the
reference), on texts made of the pieces the patterns look for, non-ASCII and case-folding
characters among them (the long s matches "s" and the Kelvin sign "k" under IGNORECASE)."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streams.core.monitors import sprawl
from streams.core.reading import features, observation, shell
from streams.core.scoring import heuristic

ODD = ["é", "\u017f", "\u212a", "\u0130", "\x1c", "\u2028", "\t", "\r\n", "\n", " ", "x", "A"]
EXIT_TOKENS = [
    *ODD,
    "exit code",
    "EXIT CODE: ",
    "exitcode",
    "exit status",
    "exit ",
    "return code",
    "Return",
    "<returncode>",
    "</returncode>",
    "[",
    "finished with ",
    "exited with exit ",
    "terminated",
    " with ",
    "code",
    "status:",
    "statu\u017f",
    "codes",
    "-",
    "1",
    "0",
    "[The command completed with exit code 1.]",
    "\nreturn code ",
    "\n  RETURN CODE: ",
    "\n[exit status ",
    "process terminated with status ",
    "Terminated with code ",
    "finished with exit code ",
]
CRASH_TOKENS = [
    *ODD,
    "Traceback (most recent call last):",
    "Exception in thread ",
    "  Caused by: ",
    "a.b",
    "E ",
    "E\n",
    "ValueError",
    "Exception",
    "TestFailure",
    ":",
    "a.py:12: ",
    "error",
    "fatal ",
    "fatal: ",
    "error[E0]: ",
    "[ERROR]",
    "FAILURE: Build failed",
    "npm ERR!",
    "Killed",
    "rror",
]
VOLATILE_TOKENS = [
    *ODD,
    "1",
    "12",
    "0",
    "123",
    ":",
    ".",
    "-",
    "T",
    "ms",
    "m",
    "s",
    "sec",
    "seconds",
    "0x",
    "ff",
    "pid",
    "pid=",
    " pid ",
    "(pid:",
    "p",
    "id",
    "=",
    "2024-01-02",
    "10:00",
    "12:34:56",
    "٣",
]
WORDS = [
    *sorted(heuristic.HEDGE_WORDS)[:6],
    *sorted(heuristic.ERROR_WORDS)[:6],
    "not sure",
    "I think",
    "run",
    "a/b.py",
]
TEST_TOKENS = [
    *ODD,
    "test",
    "Test",
    "TEST",
    "tests",
    "spec",
    "Spec",
    "\u017fpec",
    "pytest",
    "unittest",
    "_",
    "/",
    ".",
    "-",
    "a",
    "py",
]


def _text(tokens: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(tokens), max_size=40).map("".join)


def _old_exit_code(text: str) -> int | None:
    for part in (text[: observation.EXIT_CHARS], text[-observation.EXIT_CHARS :]):
        if m := observation._EXIT.search(part):
            return int(m.group(1) or m.group(2))
    return None


@settings(max_examples=400, deadline=None)
@given(_text(EXIT_TOKENS))
@example("x\nreturn code 2")
@example("x\n [exit status: 3")
@example("it terminated with status 4")
@example("\u017ftatus\nexit status 5")
def test_the_exit_status_is_found_where_the_whole_search_found_it(s):
    old = observation._EXIT.search(s)
    new = observation._exit_search(s)
    assert (new and (new.span(), new.groups())) == (old and (old.span(), old.groups()))
    long = s * 12  # past EXIT_CHARS: head and tail read apart
    assert observation.exit_code(s) == _old_exit_code(s)
    assert observation.exit_code(long) == _old_exit_code(long)


@settings(max_examples=400, deadline=None)
@given(_text(CRASH_TOKENS))
def test_a_crash_line_is_found_exactly_when_the_pattern_finds_one(s):
    assert observation._crash_line(s) == bool(observation._CRASH_LINE.search(s))


@settings(max_examples=300, deadline=None)
@given(_text([*VOLATILE_TOKENS, "Ab", "Z", "\x0b", "\x1f", "\x85"]))
def test_the_digest_is_the_hash_of_the_masked_lower_cased_words(s):
    norm = " ".join(s.translate(observation._DIGITS_TO_HASH).lower().split())
    assert observation.digest(s) == __import__("zlib").crc32(norm.encode("utf-8", "replace"))


@settings(max_examples=400, deadline=None)
@given(_text(VOLATILE_TOKENS))
@example("took 3 ms")
@example("took 3\tseconds")
@example("took 3.5s")
@example("at 12:00:01")
@example("on 2024-01-02 10:00")
@example("at 0x7f")
@example("worker (pid=42)")
def test_an_observation_is_normalised_as_the_pattern_alone_did(s):
    for text in (s, s * 12):  # past VARYING_FROM: the precheck asked first
        masked = features.VOLATILE.sub("#", features.IDS.sub("#", text[: features.OBS_HASHED]))
        assert features.normalise_obs(text) == " ".join(masked.split())
        whole = features.VOLATILE.sub("#", features.IDS.sub("#", text))
        assert features.mask_volatile(text) == whole  # the floor's reading
    if s.isascii() and features.VOLATILE.search(s):
        assert features._may_vary(s)


ID_TOKENS = [
    *ODD,
    "550e8400-e29b-41d4-a716-446655440000",
    "3f2a9c1e",
    "DEADBEEF",
    "deadbeef",
    "01",
    "a",
    "F",
    "t",
    "tmp",
    "tmpk3j2_x9a",
    "tmp.Ab3dE5fG7h",
    "2024-01-02",
    "T12:00",
    ":13",
    ".5",
    "Z",
    "+01:00",
    "1767225637",
    "-",
    "_",
    ".",
    "\n",
    "\r",
    "\x85",
    "é",
]


@settings(max_examples=500, deadline=None)
@given(_text(ID_TOKENS))
@example("run 550e8400-e29b-41d4-a716-446655440000 at 2024-01-02T12:00:13.5Z\nin /tmp/tmpk3j2_x9a")
@example("x\n3f2a9c1e4b5d\ny")
def test_ids_are_masked_as_the_pattern_alone_masks_them(s):
    """`mask_ids` scans only the lines its C searches point at: the same text as the whole scan."""
    for text in (s, s * 12):
        features.mask_ids.cache_clear()
        assert features.mask_ids(text) == features.IDS.sub("#", text)


def _old_signals(text: str) -> dict[str, float]:
    text = text[: heuristic.MAX_SCORED_CHARS]
    lower = text.lower()
    words = re.findall(r"[A-Za-z0-9_']+", lower)
    n = len(words)
    counts = Counter(words)
    hedges = sum(counts[w] for w in heuristic.HEDGE_WORDS) + sum(
        lower.count(p) for p in heuristic.HEDGE_PHRASES
    )
    errors = sum(counts[w] for w in heuristic.ERROR_WORDS)
    entities = min(len(heuristic._ENTITY.findall(text)), heuristic.ENTITY_CAP)
    return {
        "hedging": min(1.0, (hedges / max(n, 1)) / heuristic.HEDGE_DENSITY_FULL),
        "length": min(n, heuristic.LENGTH_CAP) / heuristic.LENGTH_CAP,
        "error": min(errors, heuristic.ERROR_CAP) / heuristic.ERROR_CAP,
        "entity": min(entities, heuristic.ENTITY_CAP) / heuristic.ENTITY_CAP,
    }


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([*WORDS, *ODD, ", ", ".", "HMM", "\ud800", "Ǆ", "ﬁ", "\u2019"]), max_size=60
    ).map("".join)
)
def test_the_heuristic_signals_count_what_they_counted(s):
    assert heuristic.signals(s) == _old_signals(s)


@settings(max_examples=300, deadline=None)
@given(_text(TEST_TOKENS))
def test_a_test_word_is_found_exactly_when_the_pattern_finds_one(s):
    assert sprawl._names_tests(s) == bool(sprawl.TEST_WORD.search(s))
    assert sprawl.stem_of(s) == sprawl.stem_of.__wrapped__(s)


ERROR_TOKENS = [
    *ODD,
    "warning:",
    "WARNING: ",
    "W123",
    "w1",
    " W12 ",
    'File "a.py", line 3',
    "  ~~~^^^",
    "Traceback (most recent call last):",
    "error",
    "ERROR:",
    "Error: ",
    "ValueError: bad",
    "pkg.mod.KeyError",
    "Exception: x",
    "Fault",
    "E ",
    "e\t",
    "failed",
    "cannot",
    "denied",
    "not found",
    "Operations to perform:",
]


def _old_error_line(obs: str) -> str:
    """`features._error_line` as it was before its C prechecks, with the patterns alone (and
    issue 48's reading of a frame with no source line: the raised error right after it, no
    deeper than it, is the error)."""
    kept = [ln for ln in obs.strip().splitlines() if ln.strip()][-features.ERROR_LINES :]
    lines = [ln.strip() for ln in kept]
    indents = [len(ln) - len(ln.lstrip()) for ln in kept]
    useful = [
        i
        for i, ln in enumerate(lines)
        if not (
            features.ERROR_NOISE.search(ln)
            or (
                i
                and features.FRAME.match(lines[i - 1])
                and not (indents[i] <= indents[i - 1] and features.RAISED.match(ln))
            )
        )
    ]
    for i in reversed(useful):
        starts = [m.start() for m in features.RAISED.finditer(lines[i][:2000])]
        if starts:
            return features.normalise_obs(lines[i][starts[-1] :])[: features.ERROR_KEPT]
    for pattern in (features.EXCEPTION_LINE, features.ERROR_WORDS):
        for i in reversed(useful):
            if pattern.search(lines[i]):
                return features._with_message(lines, useful, i)
    if not useful or any(features.FRAME.match(ln) for ln in lines):
        return ""
    first = lines[useful[0]]
    return (
        ""
        if first.endswith(":") and not features.ERROR_LABEL.match(first)
        else features._with_message(lines, useful, useful[0])
    )


@settings(max_examples=400, deadline=None)
@given(_text(ERROR_TOKENS))
@example("x\n" * 40 + "ValueError: late")
@example("build W123 done")
@example("e\tboom")
def test_the_error_line_is_the_one_the_patterns_alone_chose(s):
    line = s.replace("\n", " ")
    assert features._noise(line) == bool(features.ERROR_NOISE.search(line))
    assert features._exception_line(line) == bool(features.EXCEPTION_LINE.search(line))
    assert features._error_words(line) == bool(features.ERROR_WORDS.search(line))
    assert features._error_line(s) == _old_error_line(s)


NOT_RUN_TOKENS = [
    *ODD,
    "bash: x: command not found",
    "sh: 1: x: not found",
    "python: can't open file 'a.py'",
    "'x' is not recognized as an internal or external command",
    "No such file or directory: 'a.py'",
    "Error: Could not find or load main class Foo",
    "No module named pytest",
    "no module named ",
    "NOT FOUND",
    "a" * 300,
]


@settings(max_examples=300, deadline=None)
@given(_text(NOT_RUN_TOKENS))
def test_a_run_that_could_not_start_is_read_as_before(s):
    assert shell.could_not_run(s) == (bool(shell.NOT_RUN.search(s[:600])) and len(s) < 1500)


COORDINATION_TOKENS = [
    *ODD,
    "next speaker",
    "Next Speaker: Coder",
    "TERMINATE",
    "{",
    '"',
    "is_request_satisfied",
    "updated ledger:",
    "plan :",
    "please continue",
    "go ahead",
    "...",
    "group chat manager",
    "Group Chat Manager",
    "let other participants",
    "let other participantx",
    "facts given in the task",
    "facts that we have learned",
    "facts still to look up",
    "Updated list of facts",
    "FACTS",
    "fact",
    "s",
]


@settings(max_examples=400, deadline=None)
@given(_text(COORDINATION_TOKENS))
@example("Hi. let other participants speak")
@example("x group chat manager")
@example("intro\nHere is the new list of facts")
def test_a_coordination_message_is_read_as_the_patterns_alone_read_it(s):
    assert features._coordinates(s) == bool(features.COORDINATION.search(s))
    assert features._surveys_facts(s) == bool(features.FACT_SURVEY.search(s))


ENTITY_TOKENS = [
    *ODD,
    "a",
    "A",
    "_",
    "1",
    ".",
    "-",
    "/",
    '"',
    "'",
    "`",
    "pkg.mod",
    "end. Next",
    "e.g.",
    "x.1",
    "._a",
]


@settings(max_examples=300, deadline=None)
@given(_text(ENTITY_TOKENS))
@example("Run the tests again.")
@example("see np.array")
@example("the Foo.Bar class")
@example("call x._y")
def test_entities_are_counted_as_the_pattern_alone_counted_them(s):
    assert heuristic._entities(s) == min(len(heuristic._ENTITY.findall(s)), heuristic.ENTITY_CAP)
