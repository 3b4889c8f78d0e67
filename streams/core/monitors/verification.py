"""verification_skip: claiming success after changes nothing has checked.

Tracks, incrementally, which files changed since the last verifying action (a test / lint /
type-check / build run, running the changed script, or re-reading the changed file). A
completion claim (a finish/submit tool, or "fixed" / "all tests pass" / "task complete"
language) while changes are unverified is the failure; a claim that tests pass when no test
ran since the change is the worst case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .base import NOTHING, Finding, quote
from .features import StepFeatures

MAX_FILES = 8
UNNAMED = "(unnamed change)"

STRONG_CLAIM = re.compile(
    r"\b(all (the )?(unit |integration )?tests (now )?(pass|passed|are passing|succeed)|tests (now )?pass|"
    r"tests are (now )?(passing|green)|(the )?(bug|issue|problem|error|failure) (is|has been) (now )?"
    r"(fixed|resolved|solved)|i(?:'ve| have) (now )?(fixed|resolved|solved|completed|finished|implemented)|"
    r"task (is )?(now )?(complete|completed|done|finished)|final answer|(the )?fix is (complete|in place|done)|"
    r"successfully (fixed|implemented|resolved|completed)|everything (works|is working))\b",
    re.IGNORECASE,
)
WEAK_CLAIM = re.compile(
    r"\b(done|fixed|should (now )?work|that should (fix|do) it|works now|now works|is working now|complete)\b",
    re.IGNORECASE,
)
TESTS_CLAIM = re.compile(r"\btests?\b[^.]{0,30}\b(pass|passed|passing|green|succeed)", re.IGNORECASE)
GUARD = re.compile(
    r"\b(not|n't|once|when|after|until|before|if|whether|almost|nearly|yet|be|get|gets|getting|can|will|"
    r"to|make|ensure|verify|check|sure)\W+(\w+\W+){0,2}$",
    re.IGNORECASE,
)


@dataclass
class VerificationState:
    pending: list[str] = field(default_factory=list)  # files changed since the last check
    tested_since_change: bool = True


def claim_strength(f: StepFeatures) -> tuple[float, str]:
    """0 no claim, 0.7 a soft claim, 0.9 a firm one; with the words that made it."""
    if f.finishes:
        return 0.9, f"{f.action_label} called"
    m = STRONG_CLAIM.search(f.thought)
    if m and not GUARD.search(f.thought[max(0, m.start() - 30) : m.start()]):
        return 0.9, m.group(0)
    for m in WEAK_CLAIM.finditer(f.thought):
        if not GUARD.search(f.thought[max(0, m.start() - 30) : m.start()]):
            return 0.7, m.group(0)
    return 0.0, ""


def evaluate(st: VerificationState, f: StepFeatures) -> tuple[VerificationState, Finding]:
    pending = list(st.pending)
    tested = st.tested_since_change
    if f.verifies:
        pending, tested = [], True
    elif f.reads and pending:
        pending = [p for p in pending if not any(p.endswith(r) or r.endswith(p) for r in f.paths)]
    if f.modifies:
        for p in f.paths or (UNNAMED,):
            if p in pending:
                pending.remove(p)
            pending.append(p)
        pending = pending[-MAX_FILES:]
        tested = False
    new = VerificationState(pending=pending, tested_since_change=tested)

    strength, words = claim_strength(f)
    if not strength or not pending:
        return new, NOTHING
    claims_tests = bool(TESTS_CLAIM.search(f.thought))
    score = 1.0 if claims_tests and not tested else strength
    named = [p for p in pending if p != UNNAMED]
    what = ", ".join(f"`{p}`" for p in named[-3:]) if named else "your changes"
    reread = f"re-read {f'`{named[-1]}`' if named else 'the changed code'}"
    lead = (
        f'You claim the tests pass ("{quote(words, 60)}") but no test has run since you changed {what}.'
        if claims_tests and not tested
        else f'You are concluding ("{quote(words, 60)}") but {what} changed and nothing has verified '
        "the change since."
    )
    return new, Finding(
        score,
        f"{lead} Before finishing, run the relevant tests (or {reread}) and confirm the change does "
        "what the task asks.",
    )
