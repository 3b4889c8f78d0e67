"""Per-step difficulty scoring (SPEC section 4): the built-in scorers, selectable per run.

Two kinds of scorer exist. A *text* scorer reads a step's thought: the product's four-signal
`heuristic`. A *step* scorer reads the whole step, as its `StepFeatures` (thought, tool,
files, the result read: the reading the monitors get, computed once per step by the engine),
and carries a small memory from one step of a run to the next: the built-in
`trajectory`, the default since a thought's wording alone routes a failing agent to the cheap
model (`streams/core/scoring/trajectory.py`). The engine calls every scorer the same way, as a
step scorer (a text scorer through `on_thought`), taken from the `Policy` it is given; plugins
add scorers to that Policy (`streams.plugins`), never to this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from .reading.features import StepFeatures
from .scoring import trajectory
from .scoring.heuristic import heuristic_score

__all__ = [
    "BUILTIN_SCORERS",
    "DEFAULT_SCORER",
    "ScorerMemory",
    "StepScorer",
    "TextScorer",
    "clamp01",
    "on_thought",
]

DEFAULT_SCORER = "trajectory"  # what a run_start without `scorer` gets

TextScorer = Callable[[str | None], float]
# A step scorer's memory is kept in the run state and written to the changelog with it: plain
# JSON values, bounded whatever the run length. None: nothing to remember.
ScorerMemory = dict[str, Any] | None
# (the step's features, memory after the previous step) -> (difficulty, new memory). Must be
# pure: the worker and replay feed it the same steps and must get the same scores.
StepScorer = Callable[[StepFeatures, ScorerMemory], tuple[float, ScorerMemory]]


def on_thought(fn: TextScorer) -> StepScorer:
    """A text scorer as a step scorer: the step's thought (cut to the limit; None when there is
    none), and no memory."""

    def step_scorer(f: StepFeatures, memory: ScorerMemory) -> tuple[float, ScorerMemory]:
        return fn(f.thought or None), None

    return step_scorer


# What `run_start.scorer` may name without plugins (streams.plugins adds to a Policy).
BUILTIN_SCORERS: Mapping[str, StepScorer] = MappingProxyType(
    {"heuristic": on_thought(heuristic_score), "trajectory": trajectory.score}
)


def clamp01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else float(x)
