"""The difficulty state machine (SPEC section 5): pure, exact, strict comparisons."""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

# Windows are kept in the run state, so an override may not make them unbounded.
MAX_WINDOW = 1000


class FSMState(enum.StrEnum):
    """A StrEnum: stored and sent as its name ("FAST"), and equal to it."""

    INIT = "INIT"
    FAST = "FAST"
    NORMAL = "NORMAL"
    SLOW = "SLOW"
    SKIP = "SKIP"
    END = "END"


@dataclass(frozen=True)
class FSMParams:
    fast_threshold: float = 0.2
    slow_threshold: float = 0.6
    skip_threshold: float = 0.85
    hysteresis_margin: float = 0.1
    fast_window: int = 6
    slow_window: int = 5
    skip_window: int = 35

    @property
    def max_window(self) -> int:
        return max(self.fast_window, self.slow_window, self.skip_window)


PARAM_NAMES: tuple[str, ...] = tuple(f.name for f in fields(FSMParams))
_THRESHOLDS = ("fast_threshold", "slow_threshold", "skip_threshold", "hysteresis_margin")
_WINDOWS = ("fast_window", "slow_window", "skip_window")


def validate_params(overrides: Mapping[str, Any] | None) -> FSMParams:
    """Defaults <- overrides, or ValueError naming the offending parameter."""
    if overrides is None:
        return FSMParams()
    if not isinstance(overrides, Mapping):
        raise ValueError("fsm_thresholds must be an object")
    unknown = sorted(set(overrides) - set(PARAM_NAMES))
    if unknown:
        raise ValueError(f"unknown fsm_thresholds parameter(s): {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for name, value in overrides.items():
        if name in _THRESHOLDS:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name} must be a number, got {type(value).__name__}")
            if not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {value!r}")
            values[name] = float(value)
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {type(value).__name__}")
            if not 1 <= value <= MAX_WINDOW:
                raise ValueError(f"{name} must be within [1, {MAX_WINDOW}], got {value!r}")
            values[name] = value
    params = FSMParams(**values)
    if params.fast_threshold >= params.slow_threshold:
        raise ValueError(
            f"fast_threshold ({params.fast_threshold}) must be below slow_threshold ({params.slow_threshold})"
        )
    if params.skip_threshold < params.slow_threshold:
        raise ValueError(
            f"skip_threshold ({params.skip_threshold}) must not be below "
            f"slow_threshold ({params.slow_threshold})"
        )
    return params


def _tail_all(history: Sequence[float], window: int, pred: Callable[[float], bool]) -> bool:
    n = len(history)
    if n < window:
        return False
    return all(pred(history[i]) for i in range(n - window, n))


class DifficultyFSM:
    """Built-in transition. `history` is the difficulty history including the current score.

    Only the last `max_window` scores matter, so callers may pass a bounded window.
    """

    def __init__(
        self,
        *,
        fast_threshold: float = 0.2,
        slow_threshold: float = 0.6,
        skip_threshold: float = 0.85,
        hysteresis_margin: float = 0.1,
        fast_window: int = 6,
        slow_window: int = 5,
        skip_window: int = 35,
    ) -> None:
        self.params = validate_params(
            {
                "fast_threshold": fast_threshold,
                "slow_threshold": slow_threshold,
                "skip_threshold": skip_threshold,
                "hysteresis_margin": hysteresis_margin,
                "fast_window": fast_window,
                "slow_window": slow_window,
                "skip_window": skip_window,
            }
        )

    @classmethod
    def from_params(cls, params: FSMParams) -> DifficultyFSM:
        fsm = cls.__new__(cls)
        fsm.params = params
        return fsm

    def __getattr__(self, name: str) -> Any:
        if name in PARAM_NAMES:
            return getattr(self.__dict__["params"], name)
        raise AttributeError(name)

    def transition(self, current: FSMState, history: Sequence[float]) -> FSMState:
        p = self.params
        if current is FSMState.END:
            return FSMState.END
        if not history:
            return current
        score = history[-1]
        if current is FSMState.INIT:
            return FSMState.NORMAL
        if current is FSMState.NORMAL:
            if _tail_all(history, p.fast_window, lambda s: s < p.fast_threshold):
                return FSMState.FAST
            if _tail_all(history, p.slow_window, lambda s: s > p.slow_threshold):
                return FSMState.SLOW
            return FSMState.NORMAL
        if current is FSMState.FAST:
            if score > p.fast_threshold + p.hysteresis_margin:
                return FSMState.NORMAL
            return FSMState.FAST
        if current is FSMState.SLOW:
            if score < p.slow_threshold - p.hysteresis_margin:
                return FSMState.NORMAL
            if _tail_all(history, p.skip_window, lambda s: s > p.skip_threshold):
                return FSMState.SKIP
            return FSMState.SLOW
        # SKIP
        if score < p.slow_threshold - p.hysteresis_margin:
            return FSMState.NORMAL
        return FSMState.SKIP


TransitionFn = Callable[[FSMState, Sequence[float], FSMParams], FSMState]


def _default_transition(current: FSMState, history: Sequence[float], params: FSMParams) -> FSMState:
    return DifficultyFSM.from_params(params).transition(current, history)


def _end_on_skip(current: FSMState, history: Sequence[float], params: FSMParams) -> FSMState:
    """Example custom transition: a run that reaches SKIP is ended (terminal) instead."""
    nxt = DifficultyFSM.from_params(params).transition(current, history)
    return FSMState.END if nxt is FSMState.SKIP else nxt


# What `run_start.fsm_transition` may name without plugins (streams.plugins adds to a Policy).
# A transition receives (current, history window, params); returning END makes the run terminal.
BUILTIN_TRANSITIONS: Mapping[str, TransitionFn] = MappingProxyType(
    {"default": _default_transition, "end_on_skip": _end_on_skip}
)
