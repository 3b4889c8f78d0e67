"""Monitor weight profiles (SPEC section 6) and the composite score."""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .builtin import MONITORS

DEFAULT_PROFILE = "coding"
# What `run_start.task_profile` may name without plugins or a profiles file (streams.plugins
# adds to a Policy). Keyed by monitor name: a monitor a profile leaves out weighs 0 in it (it
# still fires and steers, it does not move the composite).
BUILTIN_PROFILES: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {
        "coding": MappingProxyType(
            {
                "claim_contradiction": 0.30,
                "semantic_loop": 0.25,
                "verification_skip": 0.15,
                "cyclic_compression": 0.10,
                "late_sprawl": 0.10,
                "silent_topic_drift": 0.10,
                "data_instruction": 0.10,
            }
        ),
        "pr_review": MappingProxyType(
            {
                "claim_contradiction": 0.20,
                "semantic_loop": 0.30,
                "verification_skip": 0.10,
                "cyclic_compression": 0.15,
                "late_sprawl": 0.15,
                "silent_topic_drift": 0.10,
                "data_instruction": 0.10,
            }
        ),
        "qa": MappingProxyType(
            {
                "claim_contradiction": 0.40,
                "semantic_loop": 0.15,
                "verification_skip": 0.05,
                "cyclic_compression": 0.05,
                "late_sprawl": 0.10,
                "silent_topic_drift": 0.25,
                "data_instruction": 0.10,
            }
        ),
    }
)


def clean_weights(raw: Mapping[str, Any], known: tuple[str, ...] = MONITORS) -> dict[str, float]:
    """Override rules: names not in `known` (the suite's monitors) dropped, negatives -> 0, each
    weight capped at 1.0."""
    out: dict[str, float] = {}
    for name, w in raw.items():
        if name not in known or isinstance(w, bool) or not isinstance(w, int | float):
            continue
        w = float(w)
        if math.isnan(w):
            continue
        out[name] = min(max(w, 0.0), 1.0)
    return out


def profile_weights(name: str, weights: Mapping[str, Any]) -> dict[str, float]:
    """A custom profile: the default weights, overridden by `weights` (same cleaning rules);
    ValueError for a name that is not a non-empty string or a monitor that does not exist."""
    if not name or not isinstance(name, str):
        raise ValueError("profile name must be a non-empty string")
    if not isinstance(weights, Mapping):
        raise ValueError(f"profile {name!r}: expected a mapping of monitor -> weight")
    unknown = sorted(set(weights) - set(MONITORS))
    if unknown:
        raise ValueError(f"profile {name!r}: unknown monitors {unknown}; known: {list(MONITORS)}")
    return {**BUILTIN_PROFILES[DEFAULT_PROFILE], **clean_weights(weights)}


def parse_profiles(data: Any) -> dict[str, dict[str, float]]:
    """{"name": {"monitor": weight, ...}, ...} (a profiles file, parsed) -> complete weights
    per profile, or ValueError."""
    if not isinstance(data, Mapping) or not all(isinstance(v, Mapping) for v in data.values()):
        raise ValueError("expected a mapping of profile name -> {monitor: weight}")
    return {name: profile_weights(name, weights) for name, weights in data.items()}


def composite(scores: Mapping[str, float], weights: Mapping[str, float]) -> float:
    total = sum(weights.get(name, 0.0) * s for name, s in scores.items())
    return round(min(max(total, 0.0), 1.0), 4)
