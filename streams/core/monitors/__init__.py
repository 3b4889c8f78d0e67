"""The six trajectory-health monitors (SPEC section 6), guardrails (section 7) and profiles."""

from .base import FIRE_AT, Finding
from .features import StepFeatures, extract
from .guardrails import COOLDOWN, MAX_MONITOR_INJECTIONS, hold_back
from .profiles import (
    FAILURE_TYPES,
    MONITORS,
    clean_weights,
    composite,
    parse_profiles,
)
from .semantics import Semantics
from .suite import MonitorResult, MonitorState, evaluate, to_embed

__all__ = [
    "COOLDOWN",
    "FAILURE_TYPES",
    "FIRE_AT",
    "MAX_MONITOR_INJECTIONS",
    "MONITORS",
    "Finding",
    "MonitorResult",
    "MonitorState",
    "Semantics",
    "StepFeatures",
    "clean_weights",
    "composite",
    "evaluate",
    "extract",
    "hold_back",
    "parse_profiles",
    "to_embed",
]
