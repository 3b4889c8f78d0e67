"""What a tool result says about its step: did it fail, how badly, which tests, which error.

The patterns are the ones tools print whatever the agent (shell, Python, JVM compilers and
builds, the common test runners), matched on a bounded head and tail of the text (summaries sit
at the end), each in time linear in what it reads (tests/unit/core/test_regex_cost.py): the
cost of reading an observation does not grow with its size past HEAD_CHARS + TAIL_CHARS, at
most ~1.5 ms on adversarial text (bench.regex_cost); a text of nothing but whitespace is the
one read whole, by a C scan (0.25 ms at the 256 KB event limit). Plain substring tests come
first and the few regular expressions run only where those found a candidate, which keeps a
step's reading to tens of microseconds.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from ..routing import COUNT_MAX

HEAD_CHARS = 4000
TAIL_CHARS = 4000
EXIT_CHARS = 300  # where a wrapper reports the exit status: the first or last few lines
NOT_FOUND_CHARS = 600  # "nothing found" is a short message; a long output found something

# Severity of a failed step, 0 (fine) .. 1 (worst). Why each level: a timeout or a missing
# command blocks the agent whatever it tries next; a crash or a build error says the code is
# wrong; tool misuse and a bare non-zero exit say less; a search that found nothing is often
# just the answer ("not used anywhere"), so it is mild and not a failure.
SEV_TIMEOUT = 1.0
SEV_MISSING = 1.0
SEV_CRASH = 0.9
SEV_FLAGGED = 0.8  # the agent's framework says it failed, nothing more specific is visible
SEV_USAGE = 0.7
SEV_EXIT = 0.6
SEV_TESTS = 0.6  # one failing test; each further failing test adds SEV_PER_TEST up to 1.0
SEV_PER_TEST = 0.1
SEV_NOT_FOUND = 0.25

_M = re.MULTILINE
# Looked for in the lower-cased text.
_TIMEOUT = ("timed out", "timeouterror", "timeoutexpired", "deadline exceeded", "time limit exceeded")
# Substrings that make a line-anchored look worthwhile (the text itself may just be a file or
# search result that mentions them: only a message in a tool's own format counts).
_MISSING_HINTS = ("not found", "no module named", "modulenotfounderror", "importerror", "not recognized")
_CRASH_HINTS = (
    "syntax error",
    "permission denied",
    "segmentation fault",
    "core dumped",
    "can't open",
    "build fail",
)
_NOT_FOUND = (
    "no matches found",
    "no match found",
    "no matches for",
    "no results",
    "found 0 matches",
    "not found",
    "no such file or directory",
    "does not exist",
    "could not find",
    "cannot find",
    "cannot access",
)
# "0 matches" as a count of its own: a substring test took "Found 10 matches" for nothing found.
_ZERO_MATCHES = re.compile(r"(?<![\d.,])0 matches\b")
# Line-anchored, case-sensitive: what tools print at the start of a line when something broke.
# "bash: line 3: ", "sh: 1: ", "[INFO] ", "bash: line 1: 4242 ": one way to read each part (no backtracking blow-up)
_PREFIX = r"(?:\[\w+\] |[^\s:]+: |line \d+: )*(?:\d+ )?"
_MISSING_LINE = re.compile(
    rf"^(?:ModuleNotFoundError: |ImportError: |{_PREFIX}No module named |{_PREFIX}[^\s:]+: (?:command )?not found$"
    r"|\S+: command not found: |.* is not recognized as an internal or external command)",
    _M,
)
_SHELL_ERROR = re.compile(
    rf"^{_PREFIX}(?:syntax error|segmentation fault|aborted \(core dumped\)|can't open file|build fail(?:ure|ed))"
    r"|: permission denied\s*$",
    _M | re.IGNORECASE,
)
_CRASH_LINE = re.compile(
    r"^(?:Traceback \(most recent call last\):|Exception in thread |[^\S\n]*+Caused by: [\w.$]+"
    r"|(?:E\s+)?(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure)\b(?::|$)"
    r"|[^\s:]+:\d+(?::\d+)?: (?:fatal )?error\b|(?:fatal )?error(?:\[\w+\])?: |\[ERROR\]"
    r"|FAILURE: Build failed|npm ERR!|fatal: |Killed$)",
    _M,
)
_USAGE = re.compile(r"\A\s*usage: ", re.IGNORECASE)
_BAD_OPTION = re.compile(r"^\w[\w -]*: (?:invalid|unrecognized) (?:option|argument)", _M)
_TOOL_ERROR = re.compile(r"\A\s*(?:(?:Error|ERROR|error)\b[:!]|\{\s*\"error\"\s*:)")
# An exit status as wrappers print it: at the start of a line, or "finished with exit code N".
_EXIT = re.compile(
    r"^[^\S\n]*+\[?(?:<returncode>|exit ?code:?|exit status:?|return ?code:?)\s*(-?\d+)"
    r"|(?:finished|exited|terminated) with (?:exit )?(?:code|status):? (-?\d+)",
    _M | re.IGNORECASE,
)
# Markup and exit statuses, what is left of an output once `strip_markup` removed them: a tag,
# or an exit status with its note `(...)`; `<returncode>...</returncode>` on one line whole.
_MARKUP = re.compile(r"</?\w+>|(\bexit ?code:?\s*-?\d+)", re.IGNORECASE)
_RETURNCODE = re.compile(r"<returncode>", re.IGNORECASE)
_RETURNCODE_END = re.compile(r"</returncode>", re.IGNORECASE)

# Test runner summaries: (failed, passed). The last match wins (the final summary).
_PYTEST = re.compile(r"^=*+[^\S\n]*+(\d+ [a-z]+(?:, \d+ [a-z]+)*) in [\d.]+s\b.*$", _M)
_PYTEST_PART = re.compile(r"(?<!\d)(\d++) (failed|passed|errors?)\b")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", _M)
_UNITTEST_END = re.compile(r"^(OK|FAILED)\b(?: \(([^)]*)\))?", _M)
_UNITTEST_BAD = re.compile(r"(?:failures|errors)=(\d+)")
_JUNIT = re.compile(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+)")
_JEST = re.compile(r"^Tests:\s+(?:(\d+) failed, )?(?:\d+ skipped, )?(?:(\d+) passed, )?\d+ total", _M)
_CARGO = re.compile(r"test result: \w+\. (\d+) passed; (\d+) failed")
_MOCHA = re.compile(r"^[^\S\n]*+(\d+) (passing|failing)\b", _M)
_GO_FAIL = re.compile(r"^--- FAIL: ", _M)

_ERROR_LINE = re.compile(
    r"^(?:E\s+)?(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b.*$|^.*(?:command not found|error: |Error: ).*$",
    _M,
)
_DIGITS_TO_HASH = str.maketrans("0123456789", "##########")
# `digest`'s reading of an ASCII byte: a digit is "#", a letter lower case, and every character
# `str.split` splits on a space (bytes.split() does not split on \x1c-\x1f, str.split() does).
_DIGEST_BYTES = bytes(
    0x23 if chr(c).isdigit() else 0x20 if chr(c).isspace() else ord(chr(c).lower()) for c in range(128)
) + bytes(range(128, 256))


@dataclass(frozen=True, slots=True)
class Outcome:
    """One observation, read."""

    failed: bool
    severity: float
    kind: str  # ok | timeout | missing | crash | tests | usage | exit | flagged | not_found
    tests: tuple[int, int] | None = None  # (failed, passed) when a test summary is visible
    fingerprint: int | None = None  # the normalised error line, hashed: same error, same value


OK = Outcome(False, 0.0, "ok")


# What a tool or framework answers when the call never ran: a busy terminal (the previous
# command still running), a reply it could not parse (a format error: no single action, code
# it could not find), a call refused. Looked for in the lower-cased head.
NOT_RUN_CHARS = 400
_NOT_RUN = (
    "is not executed",
    "was not executed",
    "previous command is still running",
    "exactly one action",
    "error in code parsing",
    "call was refused",
    "call was denied",
    "was refused:",
)


# IPython's answer to a cell it could not parse: the cell's line, a caret, a SyntaxError (or its
# subclasses), and no traceback: a cell that ran and raised prints one (`Traceback (most recent
# call last)`, `---->`). Nothing in the cell ran, an edit it holds included.
_CELL_PARSE_ERRORS = ("syntaxerror:", "indentationerror:", "taberror:")


def not_run(observation: str | None) -> bool:
    """The result says the call itself never ran: what it would have printed is unknown (not
    empty, not the same as before)."""
    head = (observation or "")[:NOT_RUN_CHARS].lower()
    return any(p in head for p in _NOT_RUN) or _unparsed(head)


def cell_unparsed(observation: str | None) -> bool:
    """IPython could not parse the cell: it failed, and nothing in it ran."""
    return _unparsed((observation or "")[:NOT_RUN_CHARS].lower())


def _unparsed(head: str) -> bool:
    return (
        "cell in[" in head
        and any(p in head for p in _CELL_PARSE_ERRORS)
        and "traceback" not in head
        and "---->" not in head
    )


def window(text: str) -> str:
    """Head and tail of a long text (errors show up first, summaries last)."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text
    return text[:HEAD_CHARS] + "\n" + text[-TAIL_CHARS:]


def digest(text: str) -> int:
    """A stable hash of text with digits masked and whitespace collapsed (line numbers, timings
    and addresses vary between otherwise identical outputs)."""
    if text.isascii():  # the same bytes, from one C translate of the encoded text
        return zlib.crc32(b" ".join(text.encode("ascii").translate(_DIGEST_BYTES).split()))
    norm = " ".join(text.translate(_DIGITS_TO_HASH).lower().split())
    return zlib.crc32(norm.encode("utf-8", "replace"))


def exit_code(text: str) -> int | None:
    """The exit status a tool wrapper reports (`<returncode>1</returncode>`, `exitcode: 1`, ...)."""
    # wrappers put it first or last; a short text is both, and read once
    for part in (text[:EXIT_CHARS], text[-EXIT_CHARS:]) if len(text) > EXIT_CHARS else (text,):
        if m := _exit_search(part):
            return int(m.group(1) or m.group(2))
    return None


# Where an `_EXIT` match can start: at the start of a line that holds a word of its first
# branch (`<returncode>`, `exit ...`, `return ...`), or at a word of its second.
_EXIT_LINE_WORDS = ("exit", "return")
_EXIT_WORDS = ("finished", "exited", "terminated")
# The pattern these words were read from: a pattern put in its place (`bench.regex_cost` puts
# the old one back) is searched for everywhere.
_EXIT_READ = _EXIT


def _exit_search(part: str) -> re.Match[str] | None:
    """`_EXIT.search(part)`, with the pattern tried only where a match can start (found by C
    substring searches of the lower-cased text): the search tried it at every character, ~10 us
    for 300 characters, and three outputs in four hold no "code" or "status" at all. ASCII
    only: there lower-casing keeps every index, and IGNORECASE folds only A-Z."""
    if _EXIT is not _EXIT_READ or not part.isascii():
        return _EXIT.search(part)
    low = part.lower()
    if "code" not in low and "status" not in low:  # every match holds one of them
        return None
    starts: set[int] = set()
    for word in _EXIT_LINE_WORDS:
        i = low.find(word)
        while i >= 0:
            starts.add(low.rfind("\n", 0, i) + 1)
            i = low.find(word, i + 1)
    for word in _EXIT_WORDS:
        i = low.find(word)
        while i >= 0:
            starts.add(i)
            i = low.find(word, i + 1)
    for s in sorted(starts):
        if (m := _EXIT.match(part, s)) is not None:
            return m
    return None


def _count(digits: str) -> int:
    """A count a summary prints, clamped to COUNT_MAX (a producer's text may print any number
    of digits: past 64 bits no encoder holds it, past 4300 `int` refuses it)."""
    digits = digits.lstrip("0") or "0"
    return min(int(digits), COUNT_MAX) if len(digits) <= 16 else COUNT_MAX


def test_counts(text: str) -> tuple[int, int] | None:
    """(failed, passed) from the last test-runner summary in the text, if any; each clamped to
    COUNT_MAX."""
    found = _test_counts(text)
    return None if found is None else (min(found[0], COUNT_MAX), min(found[1], COUNT_MAX))


def _test_counts(text: str) -> tuple[int, int] | None:
    found: tuple[int, int] | None = None
    if " in " in text and ("passed" in text or "failed" in text or "error" in text):
        for m in _PYTEST.finditer(text):
            counts = {"failed": 0, "passed": 0, "error": 0}
            for n, word in _PYTEST_PART.findall(m.group(1)):
                counts["error" if word.startswith("error") else word] += _count(n)
            if any(counts.values()):
                found = (counts["failed"] + counts["error"], counts["passed"])
    if "Tests run:" in text:
        for m in _JUNIT.finditer(text):
            run, failures, errors = (_count(g) for g in m.groups())
            found = (failures + errors, max(run - failures - errors, 0))
    if "Ran " in text:
        ran, end = _UNITTEST_RAN.findall(text), _UNITTEST_END.findall(text)
        if ran and end:
            status, detail = end[-1]
            bad = sum(_count(n) for n in _UNITTEST_BAD.findall(detail)) if status == "FAILED" else 0
            found = (bad, max(_count(ran[-1]) - bad, 0))
    if "Tests:" in text:
        for m in _JEST.finditer(text):
            found = (_count(m.group(1) or "0"), _count(m.group(2) or "0"))
    if "test result:" in text:
        for m in _CARGO.finditer(text):
            found = (_count(m.group(2)), _count(m.group(1)))
    if "passing" in text or "failing" in text:
        mocha = {w: _count(n) for n, w in _MOCHA.findall(text)}
        if mocha:
            found = (mocha.get("failing", 0), mocha.get("passing", 0))
    if found is None and "--- FAIL: " in text:
        found = (len(_GO_FAIL.findall(text)), 0)
    return found


def strip_markup(text: str) -> str:
    r"""`text` without its markup, as `re.sub(r"<returncode>.*?</returncode>|</?\w+>|\bexit
    ?code:?\s*-?\d+(?: \([^)]*\))?", "", text, flags=re.I)` made it (`bench.regex_cost.OLD`),
    in linear time: that pattern looked for the end of the line, or of the text, again from
    each `<returncode>` or `exit code 1 (` that had none (quadratic). Each search below goes
    where none went before: what it passed is taken, or known to hold no end."""
    if " (" not in text and _RETURNCODE.search(text) is None:
        return _MARKUP.sub("", text)  # nothing that a match could extend
    out: list[str] = []
    done = 0
    eol = -1  # the first newline at or after the last `<returncode>`
    bare_from = len(text) + 1  # no `</returncode>` from here to `eol`
    no_paren_from = len(text) + 1  # no `)` from here on
    while (m := _MARKUP.search(text, done)) is not None:
        end = m.end()
        if _RETURNCODE.match(text, m.start()):
            if end > eol:
                eol = text.find("\n", end)
                eol, bare_from = (len(text) if eol < 0 else eol), len(text) + 1
            if not bare_from <= end < eol:
                if (c := _RETURNCODE_END.search(text, end, eol)) is not None:
                    end = c.end()  # through the first `</returncode>` on the same line
                else:
                    bare_from = end
        elif m[1] and text.startswith(" (", end) and end + 2 < no_paren_from:
            if (paren := text.find(")", end + 2)) >= 0:
                end = paren + 1  # `exit code 1 (note)`: through the first `)`
            else:
                no_paren_from = end + 2
        out.append(text[done : m.start()])
        done = end
    out.append(text[done:])
    return "".join(out)


# Every `_CRASH_LINE` match holds one of these (the pattern is case-sensitive): a text without
# any (two outputs in three) is not scanned.
_CRASH_WORDS = (
    "rror",
    "ERR",
    "Exception",
    "Failure",
    "FAILURE",
    "Traceback",
    "Caused by: ",
    "fatal: ",
    "Killed",
)


def _crash_line(text: str) -> bool:
    """`_CRASH_LINE` matches somewhere in the text."""
    if _CRASH_LINE is not _CRASH_READ:  # a pattern put in its place: searched for everywhere
        return _CRASH_LINE.search(text) is not None
    return any(w in text for w in _CRASH_WORDS) and _CRASH_LINE.search(text) is not None


_CRASH_READ = _CRASH_LINE  # the pattern `_CRASH_WORDS` were read from


def _fingerprint(text: str) -> int:
    lines = _ERROR_LINE.findall(text)
    return digest(lines[-1] if lines else text[:300])


def _classify(text: str, lower: str, tests: tuple[int, int] | None, code: int | None) -> tuple[float, str]:
    if any(p in lower for p in _TIMEOUT) or code == 124:
        return SEV_TIMEOUT, "timeout"
    if code == 127 or (any(p in lower for p in _MISSING_HINTS) and _MISSING_LINE.search(text)):
        return SEV_MISSING, "missing"
    if tests is not None and tests[0] > 0:
        return min(1.0, SEV_TESTS + SEV_PER_TEST * (tests[0] - 1)), "tests"
    if _crash_line(text) or (any(p in lower for p in _CRASH_HINTS) and _SHELL_ERROR.search(text)):
        return SEV_CRASH, "crash"
    if _USAGE.match(text) or _TOOL_ERROR.match(text) or ("option" in lower and _BAD_OPTION.search(text)):
        return SEV_USAGE, "usage"
    if code is not None and code != 0 and not (tests is not None and tests[0] == 0):
        if code == 1 and not strip_markup(text).strip():
            return 0.0, "not_found"  # grep and friends: exit 1 and no output = nothing matched
        return SEV_EXIT, "exit"
    return 0.0, "ok"


def read(observation: str | None, flagged: bool) -> Outcome:
    """Read one observation. `flagged` is the step's `observation_is_error`."""
    if not observation or observation.isspace():  # (strip() would copy a long text first)
        return Outcome(True, SEV_FLAGGED, "flagged") if flagged else OK
    text = window(observation)
    lower = text.lower()
    tests = test_counts(text)
    code = exit_code(text)
    sev, kind = _classify(text, lower, tests, code)
    if code == 0 and not flagged and kind != "tests":
        sev, kind = 0.0, "ok"  # the process says it succeeded: printed warnings are not failures
    if flagged and sev < SEV_FLAGGED:
        sev, kind = SEV_FLAGGED, "flagged" if kind in ("ok", "not_found") else kind
    if sev == 0.0:
        short = len(text) <= NOT_FOUND_CHARS and (
            any(p in lower for p in _NOT_FOUND) or bool(_ZERO_MATCHES.search(lower))
        )
        if kind == "not_found" or short:
            return Outcome(False, SEV_NOT_FOUND, "not_found", tests)
        return Outcome(False, 0.0, "ok", tests)
    return Outcome(True, sev, kind, tests, _fingerprint(text))
