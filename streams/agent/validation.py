"""Check a run's steering options before its run_start leaves the process.

The worker validates the same fields at run_start and dead-letters a bad one (the run is then
never steered, and the agent only sees late decisions). Checking here turns that silent
outcome into a `ValueError` at `start()`, with the same reason, where the caller can fix it.

Agent side only: the monitor names are copied from the core (`MONITORS` in
`streams.core.monitors.builtin`, a unit test keeps the two equal) so this module needs nothing
from the core's monitor suite.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ESCALATION_KEYS", "MONITOR_NAMES", "validate_escalation", "validate_run_fields"]

MONITOR_NAMES: tuple[str, ...] = (
    "claim_contradiction",
    "semantic_loop",
    "verification_skip",
    "cyclic_compression",
    "late_sprawl",
    "silent_topic_drift",
)
ESCALATION_KEYS = ("enabled", "escalate_model_after", "stop_after", "escalation_model")
ESCALATION_MODEL_CHARS = 256
MONITORS_OFF_MAX = 64
_MAX_COUNT = 2**31 - 1  # the schema's bound on a rung's count


def _known(field: str, names: Any) -> None:
    for name in names:
        if name not in MONITOR_NAMES:
            raise ValueError(
                f"{field}: unknown monitor {str(name)[:100]!r} (known: {', '.join(MONITOR_NAMES)})"
            )


def _count(policy: Mapping[str, Any], key: str) -> None:
    v = policy.get(key)
    if v is not None and (type(v) is not int or not 1 <= v <= _MAX_COUNT):
        raise ValueError(f"escalation.{key} must be an integer >= 1 or null")


def validate_escalation(policy: Any) -> None:
    """The `escalation` object: known keys only, each of its type (see the wire contract)."""
    if policy is None:
        return
    if not isinstance(policy, Mapping):
        raise ValueError("escalation must be an object")
    unknown = sorted(set(policy) - set(ESCALATION_KEYS))
    if unknown:
        raise ValueError(f"escalation: unknown field {unknown[0]!r} (known: {', '.join(ESCALATION_KEYS)})")
    if type(policy.get("enabled", True)) is not bool:
        raise ValueError("escalation.enabled must be true or false")
    model = policy.get("escalation_model")
    if model is not None and (not isinstance(model, str) or not model or len(model) > ESCALATION_MODEL_CHARS):
        raise ValueError(
            f"escalation.escalation_model must be a non-empty string of at most "
            f"{ESCALATION_MODEL_CHARS} characters, or null"
        )
    _count(policy, "escalate_model_after")
    _count(policy, "stop_after")


def validate_run_fields(fields: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first bad field among the run's escalation and monitor
    options (`escalation`, `monitors_off`, `monitor_thresholds`, `monitor_weights`), with the
    worker's dead-letter reason (`invalid_run_start: <reason>`)."""
    validate_escalation(fields.get("escalation"))
    off = fields.get("monitors_off")
    if off is not None:
        if not isinstance(off, list | tuple) or len(off) > MONITORS_OFF_MAX:
            raise ValueError(f"monitors_off must be a list of at most {MONITORS_OFF_MAX} monitor names")
        _known("monitors_off", off)
    thresholds = fields.get("monitor_thresholds")
    if thresholds is not None:
        if not isinstance(thresholds, Mapping):
            raise ValueError("monitor_thresholds must be an object {monitor: level}")
        _known("monitor_thresholds", thresholds)
        for name, level in thresholds.items():
            if isinstance(level, bool) or not isinstance(level, int | float) or not 0.0 < float(level) <= 1.0:
                raise ValueError(f"monitor_thresholds.{name} must be a number in (0, 1]")
    weights = fields.get("monitor_weights")
    if weights is not None:
        if not isinstance(weights, Mapping):
            raise ValueError("monitor_weights must be an object {monitor: weight}")
        _known("monitor_weights", weights)
        for name, w in weights.items():
            if isinstance(w, bool) or not isinstance(w, int | float):
                raise ValueError(f"monitor_weights.{name} must be a number")
