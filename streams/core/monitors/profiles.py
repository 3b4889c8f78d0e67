"""Monitor weight profiles (SPEC section 6) and the composite score."""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MONITORS = (
    "claim_contradiction",
    "semantic_loop",
    "verification_skip",
    "cyclic_compression",
    "late_sprawl",
    "silent_topic_drift",
)
FAILURE_TYPES = {
    "claim_contradiction": "contradiction",
    "semantic_loop": "loop",
    "verification_skip": "verification_skip",
    "cyclic_compression": "context_churn",
    "late_sprawl": "sprawl",
    "silent_topic_drift": "drift",
}
DEFAULT_PROFILE = "coding"
_BUILTIN: dict[str, dict[str, float]] = {
    "coding": dict(zip(MONITORS, (0.30, 0.25, 0.15, 0.10, 0.10, 0.10), strict=True)),
    "pr_review": dict(zip(MONITORS, (0.20, 0.30, 0.10, 0.15, 0.15, 0.10), strict=True)),
    "qa": dict(zip(MONITORS, (0.40, 0.15, 0.05, 0.05, 0.10, 0.25), strict=True)),
}
_PROFILES: dict[str, dict[str, float]] = {k: dict(v) for k, v in _BUILTIN.items()}


def clean_weights(raw: Mapping[str, Any]) -> dict[str, float]:
    """Override rules: unknown names dropped, negatives -> 0, each weight capped at 1.0."""
    out: dict[str, float] = {}
    for name, w in raw.items():
        if name not in MONITORS or isinstance(w, bool) or not isinstance(w, int | float):
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
    return {**_BUILTIN[DEFAULT_PROFILE], **clean_weights(weights)}


def parse_profiles(data: Any) -> dict[str, dict[str, float]]:
    """{"name": {"monitor": weight, ...}, ...} (a profiles file, parsed) -> complete weights
    per profile, or ValueError."""
    if not isinstance(data, Mapping) or not all(isinstance(v, Mapping) for v in data.values()):
        raise ValueError("expected a mapping of profile name -> {monitor: weight}")
    return {name: profile_weights(name, weights) for name, weights in data.items()}


def register_profile(name: str, weights: Mapping[str, Any]) -> None:
    """A custom profile: the default weights, overridden by `weights` (same cleaning rules)."""
    _PROFILES[name] = profile_weights(name, weights)


def load_profiles(path: str | Path) -> list[str]:
    """Register every profile in a JSON or TOML file: {"name": {"monitor": weight, ...}, ...}."""
    p = Path(path)
    text = p.read_text()
    data = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"{p}: expected a mapping of profile name -> {{monitor: weight}}")
    for name, weights in data.items():
        register_profile(name, weights)
    return list(data)


def builtin_profiles() -> dict[str, dict[str, float]]:
    """The weight profiles a Policy starts from."""
    return {k: dict(v) for k, v in _PROFILES.items()}


def profile_names() -> list[str]:
    return sorted(_PROFILES)


def has_profile(name: str) -> bool:
    return name in _PROFILES


def resolve_weights(profile: str, overrides: Mapping[str, Any] | None) -> dict[str, float]:
    """defaults <- named profile <- per-run overrides."""
    base = _PROFILES.get(profile)
    if base is None:
        raise ValueError(f"unknown task_profile {profile!r}; known: {profile_names()}")
    return {**base, **clean_weights(overrides or {})}


def composite(scores: Mapping[str, float], weights: Mapping[str, float]) -> float:
    total = sum(weights.get(name, 0.0) * s for name, s in scores.items())
    return round(min(max(total, 0.0), 1.0), 4)
