"""What a deployment may change about steering: scorers, FSM transitions, monitor weight
profiles. Built once at the composition root (the worker, `replay`) from the defaults plus
plugins, handed to the engine, never changed afterwards: the core reads no module-level
registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .difficulty import StepScorer, builtin_scorers
from .fsm import TransitionFn, builtin_transitions
from .monitors.profiles import builtin_profiles, clean_weights


def _frozen(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class Policy:
    """Name -> implementation, for each thing a run_start may select by name."""

    scorers: Mapping[str, StepScorer] = field(default_factory=lambda: _frozen(builtin_scorers()))
    transitions: Mapping[str, TransitionFn] = field(default_factory=lambda: _frozen(builtin_transitions()))
    profiles: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: _frozen(builtin_profiles()))

    def scorer(self, name: str) -> StepScorer:
        try:
            return self.scorers[name]
        except KeyError:
            raise ValueError(f"unknown scorer {name!r} (known: {', '.join(sorted(self.scorers))})") from None

    def transition(self, name: str) -> TransitionFn:
        try:
            return self.transitions[name]
        except KeyError:
            raise ValueError(
                f"unknown fsm_transition {name!r} (known: {', '.join(sorted(self.transitions))})"
            ) from None

    def weights(self, profile: str, overrides: Mapping[str, Any] | None) -> dict[str, float]:
        """defaults <- named profile <- per-run overrides."""
        base = self.profiles.get(profile)
        if base is None:
            raise ValueError(f"unknown task_profile {profile!r}; known: {sorted(self.profiles)}")
        return {**base, **clean_weights(overrides or {})}
