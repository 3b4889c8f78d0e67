"""Check a run's steering options before its run_start leaves the process.

The worker validates the same fields at run_start and dead-letters a bad one (the run is then
never steered, and the agent only sees late decisions). Checking here turns that silent
outcome into a `ValueError` at `start()`, with the same reason, where the caller can fix it.

Agent side only: the monitor names are copied from the core (`MONITORS` in
`streams.core.monitors.builtin`, a unit test keeps the two equal) so this module needs nothing
from the core's monitor suite.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["ESCALATION_KEYS", "MONITOR_NAMES", "validate_run_fields"]

MONITOR_NAMES: tuple[str, ...] = (
    "claim_contradiction",
    "semantic_loop",
    "verification_skip",
    "cyclic_compression",
    "late_sprawl",
    "silent_topic_drift",
)
ESCALATION_KEYS = ("enabled", "escalate_model_after", "stop_after", "escalation_model")
_MAX_MODEL_ID = 256


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and not math.isnan(v)


def _monitor(field: str, name: Any) -> None:
    if name not in MONITOR_NAMES:
        raise ValueError(f"{field} names no monitor: {name!r} (known: {', '.join(MONITOR_NAMES)})")


def _rung(field: str, v: Any) -> None:
    if v is not None and (type(v) is not int or v < 1):
        raise ValueError(f"escalation.{field} must be an integer >= 1 or null, got {v!r}")


def validate_escalation(policy: Any) -> None:
    """The `escalation` object: known keys only, each of its type (see the wire contract)."""
    if policy is None:
        return
    if not isinstance(policy, Mapping):
        raise ValueError(f"escalation must be an object, got {type(policy).__name__}")
    for key in policy:
        if key not in ESCALATION_KEYS:
            raise ValueError(f"escalation has an unknown key {key!r} (known: {', '.join(ESCALATION_KEYS)})")
    if "enabled" in policy and not isinstance(policy["enabled"], bool):
        raise ValueError(f"escalation.enabled must be true or false, got {policy['enabled']!r}")
    _rung("escalate_model_after", policy.get("escalate_model_after"))
    _rung("stop_after", policy.get("stop_after"))
    model = policy.get("escalation_model")
    if model is not None and (not isinstance(model, str) or not model or len(model) > _MAX_MODEL_ID):
        raise ValueError(
            f"escalation.escalation_model must be a model id (1-256 characters) or null, got {model!r}"
        )


def validate_run_fields(fields: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first bad field among the run's escalation and monitor
    options (`escalation`, `monitors_off`, `monitor_thresholds`, `monitor_weights`)."""
    validate_escalation(fields.get("escalation"))
    off = fields.get("monitors_off")
    if off is not None:
        if not isinstance(off, list | tuple):
            raise ValueError(f"monitors_off must be a list of monitor names, got {off!r}")
        for name in off:
            _monitor("monitors_off", name)
    thresholds = fields.get("monitor_thresholds")
    if thresholds is not None:
        if not isinstance(thresholds, Mapping):
            raise ValueError(f"monitor_thresholds must be an object, got {type(thresholds).__name__}")
        for name, level in thresholds.items():
            _monitor("monitor_thresholds", name)
            if not _is_number(level) or not 0 < level <= 1:
                raise ValueError(f"monitor_thresholds.{name} must be a number in (0, 1], got {level!r}")
    weights = fields.get("monitor_weights")
    if weights is not None:
        if not isinstance(weights, Mapping):
            raise ValueError(f"monitor_weights must be an object, got {type(weights).__name__}")
        for name, w in weights.items():
            _monitor("monitor_weights", name)
            if not _is_number(w):
                raise ValueError(f"monitor_weights.{name} must be a number, got {w!r}")
