"""The `trajectory` scorer: how hard a step is from what happened, not only from its wording.

Agents that are stuck often write short, confident thoughts ("Let me run the test again."), so
the wording alone routes them to the cheap model exactly while they fail. This scorer reads the
step as a whole and carries a little memory from one step of a run to the next. It reads the
step's `StepFeatures` (`reading/features.py`), the reading the monitors get too: the same files
touched, the same tool input as text, the same reading of the result. Its inputs, each in [0, 1]:

* thought: the product's four-signal heuristic on the thought (0.1 for a tool call that comes
  without text; 0.5 for a step with nothing at all); scaled by (1 - calm) when the call plainly
  worked, since a successful result is evidence the step was easier than its wording says;
* failure: how badly the observation failed (`observation.read`: a timeout or a missing command
  1.0, a crash or build error 0.9, the framework's error flag alone 0.8, tool misuse 0.7,
  failing tests 0.6 plus 0.1 per further failing test, a bare non-zero exit 0.6, "not found"
  0.25 and not counted as a failure); cut to a tenth when the thought announced it ("reproduce the
  bug", "this should fail"), for a first crash, test failure or exit only;
* streak: consecutive failed steps, 0 for the first, 1 from the fourth on;
* repetition: a failure repeating (the same failing call with the same result, or the same
  error line again) -- and, separately, a loop: a successful call with the same result for the
  third time within the last 8 calls;
* struggle: a level carried from earlier steps; each failure adds half of its evidence, each
  other step keeps 30% of it, a loop holds it at 0.2 at least;
* progress: 1.0 for tests failing less or passing more (0.5 while some still fail), or a call
  that failed now succeeding; 0.3 for a successful step on a file not touched recently.

They combine as independent pieces of evidence (noisy-OR), then progress discounts:

    evidence   = 1 - (1 - 0.75 failure)(1 - 0.35 streak)(1 - 0.5 repetition)(1 - 0.3 loop)
    difficulty = [1 - (1 - thought)(1 - evidence)(1 - 0.7 struggle)] * (1 - 0.5 progress)

so a quiet step scores what its thought scores, any one piece alone can raise the score, and
none can push it past 1. Why these weights, and how they were checked on real runs: QUALITY.md,
"Routing". Memory is a few counters and fixed-size windows of hashes, so per-step
work and state size do not grow with the run.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..reading.features import StepFeatures
from ..reading.observation import Outcome
from .heuristic import heuristic_score

ACTION_WINDOW = 8  # recent calls compared for repetition
ERROR_WINDOW = 8  # recent error fingerprints
FILES_KEPT = 32  # recently touched files (hashed)
MEMORY_VERSION = 1


@dataclass(frozen=True, slots=True)
class Weights:
    """How much each input moves the score (see the module docstring for the formula)."""

    failure: float = 0.75  # times the observation's severity in [0, 1]
    streak: float = 0.35  # consecutive failures: 0 for the first, full at 1 + streak_full
    streak_full: int = 3
    repetition: float = 0.5  # a failure repeating: the same failing call and result, or the same error
    loop: float = 0.3  # a successful call and result seen twice already in the last few calls
    loop_level: float = 0.2  # struggle a loop holds up (a loop alone stays below SLOW)
    struggle: float = 0.7  # the level carried from earlier steps
    struggle_gain: float = 0.5  # share of a failing step's evidence the level takes on
    struggle_decay: float = 0.3  # kept per step that neither fails nor repeats
    progress: float = 0.5  # tests improving, a failed call now passing, new files touched
    new_file: float = 0.3  # progress credited for touching a file not seen recently
    expected: float = 0.1  # failure weight kept when the thought anticipated it (a reproduction)
    no_thought: float = 0.1  # thought score of a tool call that comes without any text
    calm: float = 0.3  # share of the thought score dropped when the call plainly worked


@dataclass(slots=True)
class Memory:
    """What the scorer carries between steps of one run (stored in the run state)."""

    fails: int = 0  # consecutive failed steps up to the last one
    struggle: float = 0.0
    calls: list[list[int]] = field(default_factory=list)  # [call signature, result digest, failed]
    errors: list[int] = field(default_factory=list)  # error fingerprints
    tests: list[int] | None = None  # [failed, passed] of the last test summary seen
    files: list[int] = field(default_factory=list)
    v: int = MEMORY_VERSION

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Memory:
        if not d or d.get("v") != MEMORY_VERSION:
            return cls()
        return cls(**{k: d[k] for k in _MEMORY_FIELDS if k in d})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values for the run state (no deep copy: the lists are rebuilt per step)."""
        return {
            "fails": self.fails,
            "struggle": self.struggle,
            "calls": self.calls,
            "errors": self.errors,
            "tests": self.tests,
            "files": self.files,
            "v": self.v,
        }


_MEMORY_FIELDS = tuple(f.name for f in fields(Memory))
# The agent announcing that this run should fail: reproducing the bug, seeing the failure. Not
# a bare "run the reproduction script", which is as often the check that a fix works.
_TROUBLE = r"(?:bug|issue|error|problem|failure|exception|crash|behaviou?r)"
_EXPECT = re.compile(
    rf"\breproduc\w* (?:the |this |that )?(?:\w+ )?{_TROUBLE}|\b{_TROUBLE} (?:is |gets )?reproduced"
    r"|\b(?:should|expect(?:ed|ing)? (?:it |this |them )?to|will|would) (?:still )?(?:fail|error|raise|break|crash)"
    rf"|\b(?:see|observe|confirm|show|trigger|hit) (?:the |that |if |whether |it )?(?:\w+ )?(?:fail\w*|{_TROUBLE})"
    r"|\bas expected\b",
    re.IGNORECASE,
)
# Failures a reproduction produces; a missing command, a timeout or tool misuse never is the plan.
_EXPECTABLE = frozenset({"crash", "tests", "exit"})
INTENT_CHARS = 400  # a thought ends with what the agent is about to do
PATHS_READ = 3  # files of one call remembered


def _thought_score(f: StepFeatures, w: Weights) -> float:
    if f.thought.strip():
        return heuristic_score(f.thought)
    if f.action_label or f.observation or (f.message and f.agent):
        return w.no_thought  # a plain tool call or turn: nothing in the wording suggests difficulty
    return heuristic_score(None)  # nothing at all to go on: the neutral 0.5


def _progress(out: Outcome, mem: Memory, fixed: bool, new_file: bool, w: Weights) -> float:
    """1.0 for tests improving (half while some still fail) or a failed call now passing;
    w.new_file for a successful step on fresh ground."""
    if out.tests is not None and mem.tests is not None:
        (f0, p0), (f1, p1) = mem.tests, out.tests
        if f1 < f0 or (f1 == f0 and p1 > p0):
            return 0.5 if out.failed else 1.0
    if out.failed:
        return 0.0
    if fixed:
        return 1.0
    return w.new_file if new_file else 0.0


DEFAULT_WEIGHTS = Weights()


def score(
    f: StepFeatures, memory: Mapping[str, Any] | None, w: Weights = DEFAULT_WEIGHTS
) -> tuple[float, dict[str, Any]]:
    """(difficulty in [0, 1], the memory to keep for the next step) from the step's features
    (`extract`: its texts already cut, its result already read). Pure."""
    mem = Memory.from_dict(memory)
    thought_score = _thought_score(f, w)
    out = f.outcome

    # Repetition. Only tool calls count (a plain message is not a call). The same call with the
    # same result once more is a loop when it failed; a successful call is often re-run on
    # purpose (tests after an edit), so that takes a third time.
    call = result = 0
    same: list[int] = []  # failed flags of earlier identical calls with the identical result
    if f.action_label and (f.input or f.observation):  # neither input nor result: says nothing
        sig = f"{f.agent}\x00{f.action_label}\x00{f.input}"
        call = zlib.crc32(sig.encode("utf-8", "replace"))
        result = f.obs_digest
        same = [c[2] for c in mem.calls if c[0] == call and c[1] == result]
    same_error = out.failed and out.fingerprint is not None and out.fingerprint in mem.errors
    repetition = 1.0 if out.failed and (same_error or any(same)) else 0.0
    loop = 1.0 if not out.failed and len(same) >= 2 else 0.0

    fails = mem.fails + 1 if out.failed else 0
    failure = out.severity
    expectable = out.failed and out.kind in _EXPECTABLE and mem.fails == 0 and not same_error
    if expectable and _EXPECT.search(f.thought[-INTENT_CHARS:]):
        failure *= w.expected  # a planned reproduction failing is the plan working
    streak = min(1.0, (fails - 1) / w.streak_full) if fails > 1 else 0.0

    paths = [zlib.crc32(p.encode("utf-8", "replace")) for p in f.paths[:PATHS_READ]] if call else []
    new_file = bool(paths) and any(p not in mem.files for p in paths)
    fixed = not out.failed and any(c[0] == call and c[2] for c in mem.calls)
    progress = _progress(out, mem, fixed, new_file, w)
    if call and f.observation and not out.failed and not loop and out.kind == "ok":
        thought_score *= 1.0 - w.calm  # the call worked: easier than the wording alone suggests

    evidence = 1.0 - (
        (1.0 - w.failure * failure)
        * (1.0 - w.streak * streak)
        * (1.0 - w.repetition * repetition)
        * (1.0 - w.loop * loop)
    )
    carried = w.struggle * mem.struggle
    difficulty = 1.0 - (1.0 - thought_score) * (1.0 - evidence) * (1.0 - carried)
    difficulty *= 1.0 - w.progress * progress

    if out.failed:
        level = mem.struggle + (1.0 - mem.struggle) * w.struggle_gain * evidence
    elif loop:
        level = max(mem.struggle * w.struggle_decay, w.loop_level)  # holds, does not climb
    else:
        level = mem.struggle * w.struggle_decay
    mem.struggle = round(level * (1.0 - progress), 6)
    mem.fails = min(fails, 1000)
    if call:
        mem.calls = [*mem.calls[-(ACTION_WINDOW - 1) :], [call, result, int(out.failed)]]
    if progress >= 1.0:  # what was failing works now: seeing it fail again is new trouble
        mem.errors = []
        mem.calls = [[c[0], c[1], 0] for c in mem.calls]
    elif out.failed and out.fingerprint is not None:
        mem.errors = [*mem.errors[-(ERROR_WINDOW - 1) :], out.fingerprint]
    if out.tests is not None:
        mem.tests = list(out.tests)
    if paths:
        kept = [f for f in mem.files if f not in paths]
        mem.files = [*kept, *paths][-FILES_KEPT:]
    return round(min(1.0, max(0.0, difficulty)), 6), mem.to_dict()
