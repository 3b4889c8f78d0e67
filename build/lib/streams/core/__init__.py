"""The pure core: no I/O. The worker and `replay` are thin adapters around `engine.handle`."""

from .difficulty import score_step
from .engine import Result, handle
from .events import Limits, Rejected
from .fsm import DifficultyFSM, FSMParams, FSMState, register_transition
from .state import RunConfig, TraceState

__all__ = [
    "DifficultyFSM",
    "FSMParams",
    "FSMState",
    "Limits",
    "Rejected",
    "Result",
    "RunConfig",
    "TraceState",
    "handle",
    "register_transition",
    "score_step",
]
