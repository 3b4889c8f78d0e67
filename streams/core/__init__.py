"""The pure core: no I/O. The worker and `replay` drive `Engine` through `streams.pipeline`."""

from .engine import Engine
from .events import Limits, Rejected
from .fsm import DifficultyFSM, FSMParams, FSMState
from .policy import Policy
from .results import Decided, Duplicate, Effects, Finished, Outcome, Refused, Sealed
from .state import RunConfig, TraceState

__all__ = [
    "Decided",
    "DifficultyFSM",
    "Duplicate",
    "Effects",
    "Engine",
    "FSMParams",
    "FSMState",
    "Finished",
    "Limits",
    "Outcome",
    "Policy",
    "Refused",
    "Rejected",
    "RunConfig",
    "Sealed",
    "TraceState",
]
