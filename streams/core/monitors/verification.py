"""verification_skip: finishing after changes that nothing has checked.

Tracks, incrementally, which files changed since the last verification: a run of a test, a
build, a compiler or the changed script (what real agents run: `pytest`, `./tests/runtests.py`,
`python reproduce.py`, `mvn test`, `javac`/`java`, `go test`, ...). An attempt that could not
run ("command not found") verifies nothing. Reading a file back is not a verification, and
neither are changes to documentation or housekeeping (`rm reproduce.py`).

It fires at a finish (a finish/submit tool, a submit command, a final answer) while changes
are unverified, and when the agent says the tests pass although none has run since its last
change. A finding on a finishing step reaches no model call (the run ends there): it is
reported, and it is said again on the next step if the run goes on after all. Hedged or
mid-run words ("this should work", "fixed") are plans, not claims, and never fire it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .base import NOTHING, Context, Finding, Monitor, quote
from .features import StepFeatures
from .semantics import Semantics

MAX_FILES = 8
UNNAMED = "(unnamed change)"

TESTS_CLAIM = re.compile(
    r"\b((all|the) (\w+ )?tests? (now |still )?(pass|passed|are passing|succeed(ed)?)|tests (now )?pass(ed)?|"
    r"tests are (now )?(passing|green)|verified (the fix|that it works)|confirmed (the fix|that it works))\b",
    re.IGNORECASE,
)
GUARD = re.compile(
    r"\b(not|n't|once|when|after|until|before|if|whether|almost|nearly|yet|be|get|gets|getting|can|will|"
    r"to|make|ensure|verify|check|sure|should|would|expect|hope|hopefully)\W+(\w+\W+){0,2}$",
    re.IGNORECASE,
)
DOC_FILE = re.compile(
    r"(\.(md|rst|txt|adoc|rdoc)$|(^|/)docs?/|(^|/)(changelog|changes|news|readme|authors)[^/]*$)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class VerificationState:
    pending: list[str] = field(default_factory=list)  # files changed since the last check
    tested_since_change: bool = True
    current_file: str = ""  # the file an editor has open: SWE-agent's `edit` names no file
    change_step: int | None = None  # step of the first change not verified since
    finish_step: int | None = None  # a finish came while changes were unverified
    not_run: str = ""  # the last verification attempt that could not run


def _claims_tests(thought: str) -> str:
    for m in TESTS_CLAIM.finditer(thought):
        if not GUARD.search(thought[max(0, m.start() - 30) : m.start()]):
            return m.group(0)
    return ""


def _changed(st: VerificationState, f: StepFeatures) -> list[str]:
    if not f.modifies:
        return []
    named = list(f.changed)
    if not named and f.current_file_edit and st.current_file:
        named = [st.current_file]
    kept = [p for p in named if not DOC_FILE.search(p)]
    if named and not kept:
        return []  # documentation only
    return kept or [UNNAMED]


def _what(pending: list[str], step: int | None) -> str:
    named = [p for p in pending if p != UNNAMED]
    if named:
        return ", ".join(f"`{p}`" for p in named[-3:])
    return f"the code (your edit at step {step})" if step is not None else "the code"


def evaluate(
    st: VerificationState, f: StepFeatures, ctx: Context, sem: Semantics
) -> tuple[VerificationState, Finding]:
    pending_before = st.pending
    changed = _changed(st, f)
    pending = list(pending_before)
    tested = st.tested_since_change
    change_step = st.change_step
    not_run = st.not_run
    if f.could_not_run:
        not_run = quote(f.command or f.action_label, 50)
    if f.verifies:
        pending, tested, change_step, not_run = [], True, None, ""
    for p in changed:
        if p in pending:
            pending.remove(p)
        pending.append(p)
    if changed:
        pending = pending[-MAX_FILES:]
        tested = False
        change_step = change_step if change_step is not None else f.step
    current = st.current_file
    if len(f.paths) == 1 and (f.reads or f.modifies):
        current = f.paths[0]
    new = VerificationState(pending, tested, current, change_step, None, not_run)

    if f.verifies or not pending:
        return new, NOTHING
    what = _what(pending, change_step)
    blocked = (
        f" Your last attempt (`{not_run}`) could not run here: if no test can run, say so in your final answer and re-read the diff."
        if not_run
        else ""
    )
    tests_words = _claims_tests(f.thought)
    if f.finishes:
        new = replace(new, finish_step=f.step)
        lead = (
            f'You say the tests pass ("{quote(tests_words, 60)}") but no test has run since you changed {what}.'
            if tests_words and not st.tested_since_change
            else f"You are finishing ({f.action_label or 'final answer'}) but {what} changed and nothing has run "
            "since to check it."
        )
        return new, Finding(
            1.0 if tests_words else 0.9,
            f"{lead} Run the relevant tests or the reproduction script before finishing.{blocked}",
        )
    if st.finish_step is not None:
        return new, Finding(
            0.85,
            f"You tried to finish at step {st.finish_step} although {what} changed and nothing had checked "
            f"it; the run goes on, so run the relevant tests or the reproduction script now.{blocked}",
        )
    if tests_words and pending_before and not st.tested_since_change:
        return new, Finding(
            0.9,
            f'You say the tests pass ("{quote(tests_words, 60)}") but no test has run since you changed '
            f"{_what(pending_before, st.change_step)}. Run them before you rely on that.{blocked}",
        )
    return new, NOTHING


MONITOR = Monitor("verification_skip", "verification_skip", "verification", VerificationState, evaluate)
