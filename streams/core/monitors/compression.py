"""cyclic_compression: summarising again and again, arriving at the same place.

A summary step is a context condensation (a condense/summarize tool) or a thought that opens
as a recap. Each is compared with the previous summary (MiniLM: summaries are rare, so the
full model is affordable); near-identical state with less than MIN_PROGRESS steps of progress in
between counts as one more cycle. A step progresses when it changes a file, looks at a file for
the first time, or finds something: a call not made before, or a result not seen before, that
brings content (neither empty nor an error: a directory listed, a file read). The text says how
much came between, never "nothing" when something did.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..quoting import quoted
from ..reading.features import StepFeatures
from .base import NOTHING, Context, Finding, Monitor
from .semantics import Semantics

SUMMARY_CHARS = 400
SAME_STATE = 0.85
FAST_HI = 0.97  # static-model cosine this high: the same summary, no need to ask MiniLM
FAST_LO = 0.6  # this low: clearly a different state
MIN_PROGRESS = 2
SEEN_KEPT = 64  # hashes of calls and results remembered to tell a finding from a repeat
SPRAWL = "late_sprawl"  # whose finding says which files this step touched first
RECAP = re.compile(
    r"^\s*(#+\s*)?(summary|recap|to summari[sz]e|let me summari[sz]e|summari[sz]ing|so far|progress so far|"
    r"current (state|status)|status update|here is what (i|we) (know|have)|context summary|where (i|we) are)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CompressionState:
    last_summary: str | None = None
    last_summary_step: int | None = None
    progress_since: int = 0
    cycles: int = 0
    seen: list[str] = field(default_factory=list)  # the last SEEN_KEPT calls' and results' hashes
    quiet: bool = True  # no progress at all between the summaries of the current chain


def is_summary(f: StepFeatures) -> bool:
    return f.condenses or bool(RECAP.match(f.thought))


def summary_text(f: StepFeatures) -> str:
    text = f.thought if f.thought.strip() else f.observation
    if f.condenses and f.observation and len(f.thought) < 80:
        text = f"{f.thought}\n{f.observation}"
    return " ".join(text.split())[:SUMMARY_CHARS]


def _finding(seen: list[str], f: StepFeatures) -> tuple[bool, list[str]]:
    """Whether this call found something: it brings content (neither empty nor an error) and
    either the call or its result is new to the run (listing another directory is a finding
    even when it holds the same names; the same read again is not). Also the hashes kept."""
    if not f.action or f.is_error or f.obs_empty:
        return False, seen
    keys = [f"c{f.sig[:8]}", f"r{f.obs_hash[:8]}"]
    new = [k for k in keys if k not in seen]
    return bool(new), [*seen, *new][-SEEN_KEPT:] if new else seen


def evaluate(
    st: CompressionState, f: StepFeatures, ctx: Context, sem: Semantics
) -> tuple[CompressionState, Finding]:
    """Progress since the last summary: a change, a file late_sprawl saw for the first time, or
    a finding (`_finding`)."""
    if not is_summary(f):
        sprawl = ctx.found.get(SPRAWL)
        found, seen = _finding(st.seen, f)
        new_file = bool(sprawl and sprawl.facts and sprawl.facts.get("new_files", 0) > 0)
        progressed = f.modifies or found or new_file
        return (
            CompressionState(
                st.last_summary,
                st.last_summary_step,
                st.progress_since + progressed,
                st.cycles,
                seen,
                st.quiet,
            ),
            NOTHING,
        )
    text = summary_text(f)
    cycles = 0
    if (
        st.last_summary is not None
        and st.progress_since < MIN_PROGRESS
        and text
        and sem.matches(text, [st.last_summary], FAST_HI, FAST_LO)[0] >= SAME_STATE
    ):
        cycles = st.cycles + 1
    quiet = (st.quiet if st.cycles else True) and not st.progress_since
    new = CompressionState(text, f.step, 0, cycles, st.seen, quiet if cycles else True)
    if not cycles:
        return new, NOTHING
    score = 0.9 if cycles >= 3 else 0.7 if cycles == 2 else 0.45
    between = (
        "with no new changes or findings in between"
        if quiet
        else f"with at most {MIN_PROGRESS - 1} step of new work (a change or a finding) between each"
    )
    return new, Finding(
        score,
        f"You have re-summarised your context {cycles + 1} times and arrived at essentially the same "
        f"state ({quoted(text, 90, 'state')}) {between}. Stop re-deriving it: "
        "pick the next unresolved item from that summary and act on it.",
    )


MONITOR = Monitor(
    "cyclic_compression", "context_churn", "compression", CompressionState, evaluate, after=(SPRAWL,)
)
