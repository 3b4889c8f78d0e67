"""The Policy a worker or `replay` runs with: the defaults, plus what installed plugins add
(Python entry points), plus the RB_MONITOR_PROFILES file. Built once at the composition root
and handed down; the core never loads anything (tests/unit/test_imports.py checks it).

Entry-point groups (the entry point's name is the name a run_start selects):

* `rb_streams.scorers`: a step scorer, `(StepFeatures, memory) -> (difficulty, memory)`
  (`run_start.scorer`; the step as the engine read it once, `core/reading/features.py`);
* `rb_streams.text_scorers`: a text scorer, `(thought) -> difficulty`, given the step's
  thought cut to RB_MAX_THOUGHT_CHARS (`run_start.scorer`);
* `rb_streams.transitions`: `(current FSMState, difficulty window, FSMParams) -> FSMState`
  (`run_start.fsm_transition`);
* `rb_streams.profiles`: a mapping `{monitor: weight}` (`run_start.task_profile`); unlisted
  monitors keep the `coding` weights.

A plugin that cannot be imported, is not what its group expects, or takes a name already
taken is a `PluginError` naming it: the worker and `replay` refuse to start.
"""

from __future__ import annotations

import inspect
import json
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, cast

from .core.budget import WAIT_BUDGET_S
from .core.difficulty import StepScorer, TextScorer
from .core.fsm import TransitionFn
from .core.ladder import InvalidRunSettings
from .core.monitors.profiles import parse_profiles
from .core.policy import Policy
from .kafka.client_settings import SettingsError
from .settings import Settings

SCORERS = "rb_streams.scorers"
TEXT_SCORERS = "rb_streams.text_scorers"
TRANSITIONS = "rb_streams.transitions"
PROFILES = "rb_streams.profiles"
GROUPS = (SCORERS, TEXT_SCORERS, TRANSITIONS, PROFILES)
_KIND = {SCORERS: "scorer", TEXT_SCORERS: "scorer", TRANSITIONS: "transition", PROFILES: "profile"}
# How many positional arguments each group's callables are given.
_ARITY = {SCORERS: 2, TEXT_SCORERS: 1, TRANSITIONS: 3}


class PluginError(SettingsError):
    """A plugin or profile file the worker cannot run with; the message is one line (the
    command line prints it as an invalid configuration, exit 2)."""


@dataclass(frozen=True)
class Loaded:
    """One thing the Policy took from outside the defaults, for `rb-streams plugins`."""

    group: str  # an entry-point group, or "file" for RB_MONITOR_PROFILES
    name: str
    origin: str  # distribution and object (`dist 1.0, pkg.mod:obj`), or the profile file

    @property
    def kind(self) -> str:
        """What runs name it as: scorer, transition or profile."""
        return _KIND.get(self.group, "profile")


def load_policy(settings: Settings, base: Policy | None = None) -> Policy:
    """The Policy for `settings`: `base` (the defaults) + entry points + the profiles file +
    the escalation ladder's org-wide defaults."""
    return load_plugins(settings, base)[0]


def load_plugins(settings: Settings, base: Policy | None = None) -> tuple[Policy, list[Loaded]]:
    """`load_policy`, and what it loaded."""
    policy, loaded = with_entry_points(base or Policy(), entry_points())
    policy = policy.with_escalation(settings.escalation_defaults)  # RB_ESCALATION, RB_ORG_ESCALATION, ...
    if settings.wait_budget_s != WAIT_BUDGET_S:
        policy = policy.with_wait_budget(settings.wait_budget_s)  # RB_WAIT_BUDGET_S
    policy = policy.with_experiments(settings.experiments)  # RB_EXPERIMENT, RB_ORG_EXPERIMENT
    policy = policy.with_prices(settings.prices)  # RB_PRICES_FILE: routing prices its switches
    if settings.monitor_profiles:
        path = settings.monitor_profiles
        profiles = load_profiles(path)
        policy = policy.with_profiles(profiles)
        loaded += [Loaded("file", name, path) for name in profiles]
    try:  # default monitor settings name monitors of this suite (plugins included)
        policy.escalation.check(policy.monitor_names)
    except InvalidRunSettings as exc:
        raise PluginError(str(exc)) from None
    return policy, loaded


def with_entry_points(policy: Policy, eps: Any) -> tuple[Policy, list[Loaded]]:
    """`policy` plus every entry point of our groups in `eps` (an `EntryPoints` collection)."""
    loaded: list[Loaded] = []
    for group in GROUPS:
        for ep in sorted(_in_group(eps, group), key=lambda e: e.name):
            policy = _add(policy, group, ep)
            loaded.append(Loaded(group, ep.name, _origin(ep)))
    return policy, loaded


def _in_group(eps: Any, group: str) -> Iterable[EntryPoint]:
    return cast(Iterable[EntryPoint], eps.select(group=group))


def _add(policy: Policy, group: str, ep: EntryPoint) -> Policy:
    where = f"plugin {ep.name!r} in {group} ({_origin(ep)})"
    try:
        obj = ep.load()
    except Exception as exc:  # any failure inside the plugin's import is its own
        raise PluginError(f"{where} failed to load: {_one_line(exc)}") from exc
    taken = _taken(policy, group)
    if ep.name in taken:
        raise PluginError(
            f"{where}: the name {ep.name!r} is already taken (known: {', '.join(sorted(taken))})"
        )
    try:
        if group == PROFILES:
            if not isinstance(obj, Mapping):
                raise TypeError(f"expected a mapping of monitor -> weight, got {type(obj).__name__}")
            return policy.with_profiles({ep.name: obj})
        fn = _callable(obj, _ARITY[group])
        if group == SCORERS:
            return policy.with_scorer(ep.name, cast(StepScorer, fn))
        if group == TEXT_SCORERS:
            return policy.with_text_scorer(ep.name, cast(TextScorer, fn))
        return policy.with_transition(ep.name, cast(TransitionFn, fn))
    except (TypeError, ValueError) as exc:  # our own checks: the message says it all
        raise PluginError(f"{where}: {' '.join(str(exc).split())}") from exc


def _taken(policy: Policy, group: str) -> Mapping[str, object]:
    if group == PROFILES:
        return policy.profiles
    if group == TRANSITIONS:
        return policy.transitions
    return policy.scorers


def _callable(obj: object, arity: int) -> Callable[..., Any]:
    """`obj` if it can be called with `arity` positional arguments, else TypeError."""
    if not callable(obj):
        raise TypeError(f"expected a function of {arity} argument(s), got {type(obj).__name__}")
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return cast(Callable[..., Any], obj)  # no signature to check (a builtin): trust it
    try:
        sig.bind(*([None] * arity))
    except TypeError:
        raise TypeError(f"expected a function of {arity} argument(s), got one taking {sig}") from None
    return cast(Callable[..., Any], obj)


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"{dist.name} {dist.version}, {ep.value}" if dist is not None else ep.value


def _one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {msg[:300]}" if msg else type(exc).__name__


def load_profiles(path: str | Path) -> dict[str, dict[str, float]]:
    """The profiles of a JSON or TOML file, `{"name": {"monitor": weight, ...}, ...}`, each
    completed with the `coding` weights; PluginError naming the file if it is not one."""
    p = Path(path)
    try:
        text = p.read_text("utf-8")
        data = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
        return parse_profiles(data)
    except OSError as exc:
        raise PluginError(f"monitor profiles {p}: {exc.strerror or exc}") from exc
    except (ValueError, UnicodeDecodeError) as exc:  # JSON, TOML and our own checks
        raise PluginError(f"monitor profiles {p}: {_one_line(exc)}") from exc
