"""silent_topic_drift: the agent wanders off the original task without saying so.

Every CHECK_EVERY steps (past the early phase) the last few step texts are compared with the
task and with the run's early focus. The static embedder screens every checkpoint; MiniLM
only confirms when the screen shows a clear drop, both in absolute terms and against this
run's own first checkpoint (runs differ in how alike their on-task steps look to the static
model), and at most once per FULL_EVERY steps while the run stays on topic. So the expensive
model runs on a small fraction of checkpoints of a healthy run. Its verdict lands one step
later: the checkpoint keeps the texts to compare (`confirm`) and the run's next step compares
them, so the worker can embed them in the background meanwhile (`to_embed`) and the decision
path finds the vectors cached; replay computes them inline, with the same result. A thought
that acknowledges a change of direction ("switching to", "first I need to", "the user now
wants") makes the new direction the focus instead of a drift. A step that checks or tests the
work, or names a file the run changed, is on topic however unlike the task's prose it reads.
A verdict is said once, on the step it lands on, not carried to the steps after it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, fields
from typing import Any

from ..evolve import evolve
from ..quoting import quoted
from ..reading.features import StepFeatures, topic_text
from ..reading.scan import leftmost, names
from .base import NOTHING, Context, Finding, Monitor, clip01
from .semantics import Semantics
from .sprawl import MAX_EDITED, edited_stems, same_front

FOCUS_STEPS = 5
RECENT_STEPS = 5
CHECK_EVERY = 5
START_AFTER = 8
FAST_ON_TOPIC = 0.75  # static-model cosine above which the recent steps are clearly on topic
FAST_DROP = 0.1  # ... or less than this below the run's first checkpoint: no clear drop
FULL_EVERY = 15  # steps between MiniLM confirmations
LOW_CHECKS = 1  # checkpoints a drop must hold before MiniLM is asked (more: fewer calls, later alerts)
FAST_MOVED = 0.05  # ... and only once the static screen has moved this far since the last one
CONFIRM_STEPS = 3  # recent / early steps whose text MiniLM compares
CONFIRM_CHARS = 80  # chars of each
TASK_CHARS = 200
# MiniLM cosine of the recent steps to task/focus: on-topic work sits well above ON_TOPIC,
# unrelated work near 0; the score ramps between the two.
ON_TOPIC = 0.4
OFF_TOPIC = 0.12
# The lookahead names the first letters of the alternatives (so it changes no match): word
# starts that cannot begin one are passed over at once (2-3x faster on a 20,000-char thought).
ACK = re.compile(
    r"\b(?=[abcdfilmnpst])(switch(ing)? (to|focus|over)|instead,? (i|we)(?:'ll| will| should)|change (of )?(plan|direction|approach)|"
    r"new approach|pivot(ing)?|the user (now )?(asked|wants|requested)|moving on to|(first|before that),? "
    r"(i|we) (need|have|must) to|as a (prerequisite|side note)|let me (now )?(turn|move) to|detour|"
    r"to unblock|this is needed (for|because)|in order to (fix|finish|complete))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DriftState:
    focus: list[str] = field(default_factory=list)
    recent: list[str] = field(default_factory=list)
    steps: int = 0
    score: float = 0.0
    text: str | None = None
    baseline: float | None = None  # static-model similarity at the run's first checkpoint
    last_full: int = -FULL_EVERY  # step of the last MiniLM confirmation
    full_fast: float | None = None  # the static screen's value at that confirmation
    low: int = 0  # consecutive checkpoints with a clear drop
    areas: list[str] = field(default_factory=list)  # folders the run worked in before the check
    recent_areas: list[str] = field(default_factory=list)  # folders of the recent steps
    recent_names: bool = False  # a recent step named something the task names
    # A MiniLM check planned at the last checkpoint, made on the next step: [recent texts,
    # reference text, the quote for the message].
    confirm: list[str] | None = None
    edited: list[str] = field(default_factory=list)  # stems of the files the run changed

    def evolve(self, **changes: Any) -> DriftState:
        """This state with `changes` (`core.evolve`: ~1 us, not `dataclasses.replace`'s ~20 us)."""
        return evolve(self, _FIELDS, changes)


_FIELDS = frozenset(f.name for f in fields(DriftState))


MIN_THOUGHT = 20
MAX_AREAS = 24
# `code`, CamelCase or snake_case names, then file names (`\b[\w-]+\.[a-z]{1,4}\b`, which
# `scan.leftmost` finds in linear time). Each name is read one way (possessive, the first
# capital after the first letter): as written before, `A_A_A...é` took quadratic time.
IDENT = re.compile(r"`([^`\s]{3,60})`|\b([A-Za-z_][a-z]*+[A-Z_][A-Za-z0-9_]*+|[a-z]++_[a-z0-9_]++)\b")
IDENT_FILE = re.compile(names(r"\.[a-z]{1,4}\b"))


def step_text(f: StepFeatures) -> str:
    # A condensation restates the run and a routing message ("Next speaker: Coder") moves no
    # topic; a step without a thought (a bare tool call) says nothing of where the run is going.
    if f.condenses or f.coordination or len(f.thought.strip()) < MIN_THOUGHT:
        return ""
    return topic_text(f)


def names_in(text: str) -> set[str]:
    """Code names and file names a text mentions: what ties a step to the task."""
    text = text[:2000]
    return {
        (m[1] or m[2] if m else text[s:e]).lower().strip(".") for s, e, m in leftmost(IDENT, IDENT_FILE, text)
    }


@functools.lru_cache(maxsize=1024)
def _task_names(task: str) -> frozenset[str]:
    """`names_in` of a run's task, which every step of the run asks for again (up to 2000
    characters through the regex per step otherwise)."""
    return frozenset(names_in(task))


def names_task(text: str, task: str | None) -> bool:
    """Whether `text` names something `task` names (`names_in` of both share a name).

    Most steps share none, and finding a text's names costs ~25 us (two scans of up to 2000
    characters): an ASCII text none of the task's names occurs in (lower-cased; every name
    `names_in` finds is a piece of the lower-cased text) shares none, found in ~3 us. Other
    text is scanned as before."""
    wanted = _task_names(task) if task else frozenset()
    if not wanted:
        return False
    text = text[:2000]
    if text.isascii():
        low = text.lower()
        if not any(n in low for n in wanted):
            return False
    return not wanted.isdisjoint(names_in(text))


def task_names_kept() -> tuple[int, int]:
    """(tasks whose names are kept, the bound): the worker's `task_names` cache gauge."""
    info = _task_names.cache_info()
    return info.currsize, info.maxsize or 0


def _areas(f: StepFeatures) -> list[str]:
    return [p.rsplit("/", 1)[0] if "/" in p else "" for p in f.paths]


def to_embed(st: DriftState) -> list[str]:
    """The texts the run's next step embeds with MiniLM (a planned check), else none."""
    return st.confirm[:2] if st.confirm else []


def _confirmed(st: DriftState, sem: Semantics, task: str | None) -> DriftState:
    """The verdict of the check the last checkpoint planned."""
    assert st.confirm is not None
    now, ref, recent = st.confirm
    on_topic = sem.full_sims(now, [ref])[0]
    score = round(clip01((ON_TOPIC - on_topic) / (ON_TOPIC - OFF_TOPIC)), 4)
    message = None
    if score >= 0.6:
        goal = f"the task ({quoted(task, 120, 'task')})" if task else "what you set out to do"
        message = (
            f"Your recent steps ({quoted(recent, 80, 'step')}) have moved away from {goal} and you "
            "have not said why. Return to the task, or state explicitly why this detour is needed "
            "for it before continuing."
        )
    return st.evolve(confirm=None, score=score, text=message)


def evaluate(st: DriftState, f: StepFeatures, ctx: Context, sem: Semantics) -> tuple[DriftState, Finding]:
    task = ctx.task
    # A verdict is said once, on the step it lands on; later steps do not repeat it (the
    # score and text stay in the state: an inconclusive verdict is looked at again).
    said = NOTHING
    if st.confirm is not None:
        st = _confirmed(st, sem, task)
        said = Finding(st.score, st.text)
    text = step_text(f)
    # tied to the task: it names what the task names, checks or tests the work, or names what
    # the run changed (the tests of the serializer being fixed are the task's own work). Only
    # an edit or a step with text reads it.
    tied = same_front(f, st.edited) or (
        (f.modifies or bool(text)) and names_task(f.thought + " " + " ".join(f.paths), task)
    )
    if f.modifies and (tied or len(st.focus) < FOCUS_STEPS or any(a in st.areas for a in _areas(f))):
        # the run's own work (an edit on the task's names, tests or folders): naming it later is on topic
        mine = edited_stems(f)
        st = st.evolve(edited=[*(x for x in st.edited if x not in mine), *mine][-MAX_EDITED:])
    steps = st.steps + 1
    keep = st.evolve(steps=steps)
    if not text:
        return keep, said
    if ACK.search(f.thought):
        # An announced change of direction: the new direction is the focus from here on.
        return DriftState(focus=[text], recent=[text], steps=steps, edited=st.edited), NOTHING
    here = [a for a in _areas(f) if a]
    opening = len(st.focus) < FOCUS_STEPS  # the folders of the run's opening steps are its own
    recent = [*st.recent, text][-RECENT_STEPS:]
    keep = keep.evolve(
        recent=recent,
        recent_areas=[*st.recent_areas, here[0] if here else ""][-RECENT_STEPS:],  # one per step
        areas=list(dict.fromkeys([*st.areas, *here]))[-MAX_AREAS:] if opening else st.areas,
        recent_names=tied if len(recent) == 1 else (st.recent_names or tied),
        focus=[*st.focus, text] if opening else st.focus,
    )
    if steps < START_AFTER or steps % CHECK_EVERY or len(keep.focus) < FOCUS_STEPS:
        return keep, said

    # Work in a folder the run already worked in, or on names the task itself mentions (the tests
    # of the function to fix), is on the task however unlike the prose it reads: the
    # static screen is not needed then, except for the run's first checkpoint (its baseline).
    own = keep.recent_names or any(a and a in keep.areas for a in keep.recent_areas)
    if own and st.baseline is not None:
        return keep.evolve(score=0.0, text=None, low=0, recent_names=False), NOTHING
    fast = max(sem.fast_centroid_sims(keep.recent, [keep.focus] + ([[task]] if task else [])))
    baseline = fast if st.baseline is None else st.baseline
    if own:
        return keep.evolve(score=0.0, text=None, baseline=baseline, low=0, recent_names=False), NOTHING
    if fast >= FAST_ON_TOPIC or fast >= baseline - FAST_DROP:
        # on topic: the folders of these steps are the run's own from now on
        areas = list(dict.fromkeys([*keep.areas, *(a for a in keep.recent_areas if a)]))[-MAX_AREAS:]
        return keep.evolve(
            score=0.0, text=None, baseline=baseline, full_fast=None, low=0, areas=areas
        ), NOTHING
    low = st.low + 1
    if (
        low < LOW_CHECKS
        or steps - st.last_full < FULL_EVERY
        or (
            st.full_fast is not None
            and abs(fast - st.full_fast) < FAST_MOVED
            and not 0.3 <= st.score < 0.6  # an inconclusive verdict is looked at again
        )
    ):
        # Still low, and MiniLM was asked recently or the screen has not moved since: its
        # verdict stands until the evidence changes (it was said when it landed).
        return keep.evolve(baseline=baseline, low=low), said
    # MiniLM on compact texts: its cost grows with tokens (~0.4 ms each on 2 cores).
    # The task when there is one (short, and shared by the runs of a fleet, so usually cached),
    # else the run's early focus. Compared on the next step (`_confirmed`).
    now = " ".join(t[:CONFIRM_CHARS] for t in keep.recent[-CONFIRM_STEPS:])
    ref = task[:TASK_CHARS] if task else " ".join(t[:CONFIRM_CHARS] for t in keep.focus[:CONFIRM_STEPS])
    return keep.evolve(
        baseline=baseline, last_full=steps, full_fast=fast, low=low, confirm=[now, ref, keep.recent[-1]]
    ), said


MONITOR = Monitor("silent_topic_drift", "drift", "drift", DriftState, evaluate, to_embed=to_embed)
