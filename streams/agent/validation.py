"""Check a run's steering options before its run_start leaves the process.

The worker validates the same fields at run_start and dead-letters a bad one (the run is then
never steered, and the agent only sees late decisions). Checking here turns that silent
outcome into a `ValueError` at `start()`, with the same reason, where the caller can fix it.

Agent side only: the names and bounds are copied from the core (the monitor suite, the FSM
parameters, the built-in scorers, transitions and weight profiles; a unit test keeps each
equal to the core's), so the client imports nothing of the core.

Scorers, transitions and profiles can be added to a worker (plugins, RB_MONITOR_PROFILES):
the client accepts those names when they are listed in `extra_names` (RB_CLIENT_EXTRA_NAMES;
`*` accepts any name, leaving the check to the worker).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping
from typing import Any

__all__ = [
    "ESCALATION_KEYS",
    "FSM_PARAMS",
    "MONITOR_NAMES",
    "RUN_FIELDS",
    "check_run_field_names",
    "validate_escalation",
    "validate_fsm_thresholds",
    "validate_run_fields",
]

MONITOR_NAMES: tuple[str, ...] = (
    "claim_contradiction",
    "semantic_loop",
    "verification_skip",
    "cyclic_compression",
    "late_sprawl",
    "silent_topic_drift",
    "data_instruction",
)
# The built-in names a run_start may select (`streams.core.difficulty.BUILTIN_SCORERS`,
# `streams.core.fsm.BUILTIN_TRANSITIONS`, `streams.core.monitors.profiles.BUILTIN_PROFILES`).
SCORERS: tuple[str, ...] = ("heuristic", "trajectory")
TRANSITIONS: tuple[str, ...] = ("default", "end_on_skip")
TASK_PROFILES: tuple[str, ...] = ("coding", "pr_review", "qa")
# `fsm_thresholds`: the FSM parameters and their defaults (`streams.core.fsm.FSMParams`); the
# thresholds are in [0, 1], the windows integers in [1, FSM_MAX_WINDOW].
FSM_PARAMS: dict[str, float | int] = {
    "fast_threshold": 0.2,
    "slow_threshold": 0.6,
    "skip_threshold": 0.85,
    "hysteresis_margin": 0.1,
    "fast_window": 6,
    "slow_window": 5,
    "skip_window": 35,
}
FSM_THRESHOLDS = ("fast_threshold", "slow_threshold", "skip_threshold", "hysteresis_margin")
FSM_MAX_WINDOW = 1000
ESCALATION_KEYS = ("enabled", "escalate_model_after", "stop_after", "escalation_model")
ESCALATION_MODEL_CHARS = 256
MONITORS_OFF_MAX = 64
_MAX_COUNT = 2**31 - 1  # the schema's bound on a rung's count
# What a caller may set of a run_start (`streams/schemas/run_start.schema.json`'s properties
# but the envelope: type, schema_version, run_id, ts); a unit test keeps it equal to the schema.
RUN_FIELDS: tuple[str, ...] = (
    "agent_name",
    "cross_provider_tool_switch",
    "e_traces_enabled",
    "escalation",
    "experiment",
    "extensions",
    "framework",
    "fsm_thresholds",
    "fsm_transition",
    "metadata",
    "model",
    "model_routing",
    "monitor_thresholds",
    "monitor_weights",
    "monitors_enabled",
    "monitors_off",
    "org_id",
    "project_id",
    "scorer",
    "task",
    "task_profile",
    "token_budget",
)


def check_run_field_names(owner: str, fields: Mapping[str, Any], own: Collection[str] = ()) -> None:
    """TypeError for a keyword that is neither one of `owner`'s own options nor a run_start
    field. The adapters pass unknown keywords on as run fields, and the worker ignores a
    run_start field it does not know: a typo (`modle_routing=`, `on_descision=`) would
    otherwise be silently dropped."""
    for name in fields:
        if name in RUN_FIELDS:
            continue
        known = sorted({*own, *RUN_FIELDS})
        close = difflib.get_close_matches(name, known, n=1)
        hint = (
            f"; did you mean {close[0]!r}?"
            if close
            else f" (its options: {', '.join(sorted(own))}; run fields: {', '.join(RUN_FIELDS)})"
        )
        raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}{hint}")


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


def validate_fsm_thresholds(overrides: Any) -> None:
    """`fsm_thresholds`: known parameters, each of its type and range, the thresholds in order
    (what the worker dead-letters `invalid_fsm_thresholds`)."""
    if overrides is None:
        return
    if not isinstance(overrides, Mapping):
        raise ValueError("fsm_thresholds must be an object")
    unknown = sorted(set(overrides) - set(FSM_PARAMS), key=str)
    if unknown:
        raise ValueError(
            f"unknown fsm_thresholds parameter(s): {', '.join(str(u)[:100] for u in unknown[:5])} "
            f"(known: {', '.join(FSM_PARAMS)})"
        )
    for name, value in overrides.items():
        if name in FSM_THRESHOLDS:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"fsm_thresholds.{name} must be a number, got {type(value).__name__}")
            if not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"fsm_thresholds.{name} must be within [0, 1], got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"fsm_thresholds.{name} must be an integer, got {type(value).__name__}")
        elif not 1 <= value <= FSM_MAX_WINDOW:
            raise ValueError(f"fsm_thresholds.{name} must be within [1, {FSM_MAX_WINDOW}], got {value!r}")
    p = {**FSM_PARAMS, **overrides}
    if p["fast_threshold"] >= p["slow_threshold"]:
        raise ValueError(
            f"fsm_thresholds: fast_threshold ({p['fast_threshold']}) must be below "
            f"slow_threshold ({p['slow_threshold']})"
        )
    if p["skip_threshold"] < p["slow_threshold"]:
        raise ValueError(
            f"fsm_thresholds: skip_threshold ({p['skip_threshold']}) must not be below "
            f"slow_threshold ({p['slow_threshold']})"
        )


def _named(field: str, value: Any, builtin: tuple[str, ...], extra: Collection[str]) -> None:
    """A name the worker must know: a built-in one, or one the deployment added (`extra`).
    None (and for scorer and transition "") is the default."""
    if value is None or (value == "" and field != "task_profile"):
        return
    if not isinstance(value, str) or not value:
        raise ValueError(f"{field} must be a non-empty string")
    if "*" in extra:
        return
    if value not in builtin and value not in extra:
        raise ValueError(
            f"unknown {field} {value[:100]!r} (known: {', '.join(builtin)}; a name a plugin or "
            f"RB_MONITOR_PROFILES adds to the worker: list it in RB_CLIENT_EXTRA_NAMES)"
        )


def validate_run_fields(fields: Mapping[str, Any], extra_names: Collection[str] = ()) -> None:
    """Raise ValueError naming the first bad field among the run's settings the worker would
    refuse at run_start (it would dead-letter the run: `invalid_fsm_thresholds`,
    `invalid_config`, `invalid_run_start`), with the reason it would give. `extra_names`:
    scorer, transition and profile names the worker has beyond the built-in ones. Each field's
    type and bounds are the run_start schema's (`token_budget="x"`, `org_id=5` are refused)."""
    validate_fsm_thresholds(fields.get("fsm_thresholds"))
    _named("fsm_transition", fields.get("fsm_transition"), TRANSITIONS, extra_names)
    _named("scorer", fields.get("scorer"), SCORERS, extra_names)
    _named("task_profile", fields.get("task_profile"), TASK_PROFILES, extra_names)
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
    _schema_types(fields)


def _schema_types(fields: Mapping[str, Any]) -> None:
    """Each known field against the run_start schema (types, lengths, bounds): a value the
    worker would dead-letter is a ValueError here, naming the field. Unknown names are
    `check_run_field_names`'s (with a suggestion), so they are left out."""
    from fastjsonschema import JsonSchemaValueException

    from ..shared.contract import SCHEMA_VERSION, fast_validator

    known = {k: v for k, v in fields.items() if k in RUN_FIELDS and v is not None}
    try:
        fast_validator("run_start")(
            {"type": "run_start", "schema_version": SCHEMA_VERSION, "run_id": "r", **known}
        )
    except JsonSchemaValueException as exc:
        raise ValueError(f"invalid run_start: {exc.message}") from None  # names the field: data.token_budget
