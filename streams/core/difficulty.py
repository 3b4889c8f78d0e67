"""Per-step difficulty scoring (SPEC section 4): the registry of scorers, selectable per run.

Two kinds of scorer register here. A *text* scorer reads a step's thought: the product's
four-signal `heuristic`, and anything given to `register_scorer`. A *step* scorer reads the
whole step event (thought, action, observation, error flag) and carries a small memory from
one step of a run to the next: the built-in `trajectory`, the default since a thought's wording
alone routes a failing agent to the cheap model (`streams/core/scoring/trajectory.py`). The
engine calls every scorer the same way, through `get_step_scorer`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .scoring import trajectory
from .scoring.heuristic import (
    ENTITY_CAP,
    ERROR_CAP,
    ERROR_WORDS,
    HEDGE_DENSITY_FULL,
    HEDGE_PHRASES,
    HEDGE_WORDS,
    LENGTH_CAP,
    MAX_SCORED_CHARS,
    W_ENTITY,
    W_ERROR,
    W_HEDGE,
    W_LENGTH,
    heuristic_score,
    signals,
)

__all__ = [
    "DEFAULT_SCORER",
    "ENTITY_CAP",
    "ERROR_CAP",
    "ERROR_WORDS",
    "HEDGE_DENSITY_FULL",
    "HEDGE_PHRASES",
    "HEDGE_WORDS",
    "LENGTH_CAP",
    "MAX_SCORED_CHARS",
    "W_ENTITY",
    "W_ERROR",
    "W_HEDGE",
    "W_LENGTH",
    "Scorer",
    "ScorerMemory",
    "StepScorer",
    "TextScorer",
    "clamp01",
    "get_scorer",
    "get_step_scorer",
    "heuristic_score",
    "register_scorer",
    "register_step_scorer",
    "score_step",
    "scorer_names",
    "signals",
]

DEFAULT_SCORER = "trajectory"  # what a run_start without `scorer` gets

TextScorer = Callable[[str | None], float]
Scorer = TextScorer  # the name this module has always exported
# A step scorer's memory is kept in the run state and written to the changelog with it: plain
# JSON values, bounded whatever the run length. None: nothing to remember.
ScorerMemory = dict[str, Any] | None
# (step event, memory after the previous step, max thought chars) -> (difficulty, new memory).
# Must be pure: the worker and replay feed it the same steps and must get the same scores.
StepScorer = Callable[[Mapping[str, Any], ScorerMemory, int], tuple[float, ScorerMemory]]


def score_step(text: str | None) -> float:
    """The product's four-signal heuristic on a thought (what the `heuristic` scorer returns)."""
    return heuristic_score(text)


def on_thought(fn: TextScorer) -> StepScorer:
    """A text scorer as a step scorer: the step's thought, cut to the limit, and no memory."""

    def step_scorer(
        step: Mapping[str, Any], memory: ScorerMemory, max_chars: int
    ) -> tuple[float, ScorerMemory]:
        thought = step.get("thought")
        return fn(thought[:max_chars] if isinstance(thought, str) else None), None

    return step_scorer


_TEXT: dict[str, TextScorer] = {"heuristic": heuristic_score}
_STEP: dict[str, StepScorer] = {
    "heuristic": on_thought(heuristic_score),
    "trajectory": trajectory.score,
}


def register_scorer(name: str, scorer: TextScorer) -> None:
    """Register a scorer of thought text under `name` (selectable by `run_start.scorer`)."""
    _TEXT[name] = scorer
    _STEP[name] = on_thought(scorer)


def register_step_scorer(name: str, scorer: StepScorer) -> None:
    """Register a scorer of whole steps, with memory, under `name`."""
    _TEXT.pop(name, None)
    _STEP[name] = scorer


def get_scorer(name: str) -> TextScorer:
    """The text scorer registered as `name`."""
    if name in _TEXT:
        return _TEXT[name]
    if name in _STEP:
        raise ValueError(f"scorer {name!r} scores whole steps, not text: use get_step_scorer")
    raise ValueError(f"unknown scorer {name!r} (registered: {', '.join(scorer_names())})")


def get_step_scorer(name: str) -> StepScorer:
    """Any registered scorer, called the way the engine calls it."""
    try:
        return _STEP[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r} (registered: {', '.join(scorer_names())})") from None


def builtin_scorers() -> dict[str, StepScorer]:
    """The scorers a Policy starts from."""
    return dict(_STEP)


def scorer_names() -> list[str]:
    return sorted(_STEP)


def clamp01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else float(x)
