"""What a deployment may change about steering: scorers, FSM transitions, monitor weight
profiles, the monitor suite. Built once at the composition root (the worker, `replay`) from the defaults plus
plugins, handed to the engine, never changed afterwards: the core reads no module-level
registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from .difficulty import BUILTIN_SCORERS, StepScorer, TextScorer, on_thought
from .fsm import BUILTIN_TRANSITIONS, TransitionFn
from .holdout import NO_EXPERIMENTS, Experiments
from .ladder import NO_DEFAULTS, Defaults
from .monitors import loop
from .monitors.base import Monitor
from .monitors.builtin import DEFAULT_MONITORS
from .monitors.profiles import BUILTIN_PROFILES, clean_weights, parse_profiles
from .prices import NO_PRICES, PriceTable


def _frozen(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


def _named(name: str, fn: object, what: str) -> None:
    if not name or not isinstance(name, str):
        raise ValueError(f"{what} name must be a non-empty string")
    if not callable(fn):
        raise TypeError(f"{what} {name!r} must be callable, got {type(fn).__name__}")


@dataclass(frozen=True)
class Policy:
    """Name -> implementation, for each thing a run_start may select by name."""

    # The built-in mappings are read-only (a dataclass refuses them as plain defaults).
    scorers: Mapping[str, StepScorer] = field(default_factory=lambda: BUILTIN_SCORERS)
    transitions: Mapping[str, TransitionFn] = field(default_factory=lambda: BUILTIN_TRANSITIONS)
    profiles: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: BUILTIN_PROFILES)
    # The monitors every step runs through, in the order of a decision's monitor scores.
    monitors: tuple[Monitor[Any], ...] = DEFAULT_MONITORS
    # The escalation ladder's org-wide defaults (settings RB_ESCALATION, RB_ORG_ESCALATION):
    # here, so that the worker and replay resolve a run's policy alike.
    escalation: Defaults = NO_DEFAULTS
    # The user's price table (RB_PRICES_FILE): cache-aware routing prices its switches with it
    # (core.routing); empty, the documented prior.
    prices: PriceTable = NO_PRICES
    # The held-out arms (settings RB_EXPERIMENT, RB_ORG_EXPERIMENT; core.holdout): a run's
    # experiment is resolved at its run_start from these, as the worker and replay both do.
    experiments: Experiments = NO_EXPERIMENTS

    @property
    def monitor_names(self) -> tuple[str, ...]:
        """The names per-run `monitor_weights`, `monitors_off` and `monitor_thresholds` may use
        (others are refused at run_start)."""
        return tuple(m.name for m in self.monitors)

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
        return {**base, **clean_weights(overrides or {}, self.monitor_names)}

    def with_scorer(self, name: str, fn: StepScorer) -> Policy:
        """This policy plus a step scorer: (StepFeatures, memory) -> (difficulty, memory). It
        must be pure: the worker and replay must get the same scores."""
        _named(name, fn, "scorer")
        return replace(self, scorers=_frozen({**self.scorers, name: fn}))

    def with_text_scorer(self, name: str, fn: TextScorer) -> Policy:
        """This policy plus a scorer of the step's thought (cut to the limit; no memory)."""
        _named(name, fn, "scorer")
        return self.with_scorer(name, on_thought(fn))

    def with_transition(self, name: str, fn: TransitionFn) -> Policy:
        """This policy plus a transition: (current, difficulty window, params) -> next state;
        returning END makes the run terminal."""
        _named(name, fn, "fsm_transition")
        return replace(self, transitions=_frozen({**self.transitions, name: fn}))

    def with_wait_budget(self, seconds: float) -> Policy:
        """This policy with the built-in loop monitor advising on a wait once it has lasted
        `seconds` (RB_WAIT_BUDGET_S; docs/monitors.md). A plugin's own loop monitor is kept."""
        suite = tuple(
            loop.monitor(seconds) if m.name == loop.MONITOR.name and m.state is loop.LoopState else m
            for m in self.monitors
        )
        return replace(self, monitors=suite)

    def with_escalation(self, defaults: Defaults) -> Policy:
        """This policy with the org-wide escalation defaults."""
        return replace(self, escalation=defaults)

    def with_experiments(self, experiments: Experiments) -> Policy:
        """This policy with the deployment's experiments (held-out control arms)."""
        return replace(self, experiments=experiments)

    def with_prices(self, prices: PriceTable) -> Policy:
        """This policy with the user's price table (routing's switches are priced with it)."""
        return replace(self, prices=prices)

    def with_profiles(self, profiles: Mapping[str, Mapping[str, Any]]) -> Policy:
        """This policy plus weight profiles {name: {monitor: weight}}: unlisted monitors keep
        the `coding` weights; an unknown monitor is a ValueError."""
        added = {name: MappingProxyType(w) for name, w in parse_profiles(profiles).items()}
        return replace(self, profiles=_frozen({**self.profiles, **added}))
