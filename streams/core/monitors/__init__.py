"""The monitors: SPEC section 6's six trajectory-health monitors and `data_instruction` (prompt
injection, issue 42); guardrails (section 7) and profiles."""

from .base import FIRE_AT, Context, Finding, Monitor
from .builtin import DEFAULT_MONITORS, FAILURE_TYPES, MONITORS
from .guardrails import COOLDOWN, MAX_MONITOR_INJECTIONS, hold_back
from .profiles import (
    clean_weights,
    composite,
    parse_profiles,
)
from .semantics import Semantics
from .suite import MonitorResult, MonitorState, evaluate, to_embed

__all__ = [
    "COOLDOWN",
    "DEFAULT_MONITORS",
    "FAILURE_TYPES",
    "FIRE_AT",
    "MAX_MONITOR_INJECTIONS",
    "MONITORS",
    "Context",
    "Finding",
    "Monitor",
    "MonitorResult",
    "MonitorState",
    "Semantics",
    "clean_weights",
    "composite",
    "evaluate",
    "hold_back",
    "parse_profiles",
    "to_embed",
]
