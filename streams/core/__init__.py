"""The pure core: no I/O. The worker and `replay` drive `Engine` through `streams.pipeline`."""

from .engine import Decided, Duplicate, Effects, Engine, Finished, Outcome, Refused, Sealed
from .events import Limits, Rejected
from .fsm import DifficultyFSM, FSMParams, FSMState
from .policy import Policy
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
