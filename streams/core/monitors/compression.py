"""cyclic_compression: summarising again and again, arriving at the same place.

A summary step is a context condensation (a condense/summarize tool) or a thought that opens
as a recap. Each is compared with the previous summary (MiniLM: summaries are rare, so the
full model is affordable); near-identical state with no progress in between (no file changed,
no new test result, no new file looked at) counts as one more cycle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...untrusted import fenced
from ..reading.features import StepFeatures
from .base import NOTHING, Context, Finding, Monitor
from .semantics import Semantics

SUMMARY_CHARS = 400
SAME_STATE = 0.85
FAST_HI = 0.97  # static-model cosine this high: the same summary, no need to ask MiniLM
FAST_LO = 0.6  # this low: clearly a different state
MIN_PROGRESS = 2
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


def is_summary(f: StepFeatures) -> bool:
    return f.condenses or bool(RECAP.match(f.thought))


def summary_text(f: StepFeatures) -> str:
    text = f.thought if f.thought.strip() else f.observation
    if f.condenses and f.observation and len(f.thought) < 80:
        text = f"{f.thought}\n{f.observation}"
    return " ".join(text.split())[:SUMMARY_CHARS]


def evaluate(
    st: CompressionState, f: StepFeatures, ctx: Context, sem: Semantics
) -> tuple[CompressionState, Finding]:
    """Progress since the last summary: a change, or a file late_sprawl saw for the first time."""
    sprawl = ctx.found.get(SPRAWL)
    progressed = f.modifies or bool(sprawl and sprawl.facts and sprawl.facts.get("new_files", 0) > 0)
    if not is_summary(f):
        return (
            CompressionState(
                st.last_summary, st.last_summary_step, st.progress_since + progressed, st.cycles
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
    new = CompressionState(text, f.step, 0, cycles)
    if not cycles:
        return new, NOTHING
    score = 0.9 if cycles >= 3 else 0.7 if cycles == 2 else 0.45
    return new, Finding(
        score,
        f"You have re-summarised your context {cycles + 1} times and arrived at essentially the same "
        f"state ({fenced(text, 90)}) with no new changes or findings in between. Stop re-deriving it: "
        "pick the next unresolved item from that summary and act on it.",
    )


MONITOR = Monitor(
    "cyclic_compression", "context_churn", "compression", CompressionState, evaluate, after=(SPRAWL,)
)
