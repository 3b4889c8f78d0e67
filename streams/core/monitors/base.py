"""Shared shapes for the monitors: a finding, and the one protocol every monitor follows.

A monitor is a `Monitor` value: its name (as decisions, weights and profiles spell it), the
failure type it reports, the key its state is stored under in the run state, its state's
class, and one `evaluate(state, features, context, semantics) -> (state, finding)`. Its state
is its own bounded window of the run. The suite is a tuple of monitors (`builtin.py`); adding
one is a new module that defines `MONITOR` plus one line in that tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ...shared.untrusted import clean
from ..budget import WaitBudget
from ..evolve import rebuild
from ..prices import ModelPrice
from ..reading.features import StepFeatures
from .semantics import Semantics

FIRE_AT = 0.6


@dataclass(frozen=True, slots=True)
class Finding:
    """One monitor's verdict on one step: a score in [0, 1] and, when it fires, what to say.
    `facts`: what it learnt that a monitor evaluated after it may read (`Monitor.after`).
    `advice`: a hint, not a failure (a wait that is getting long): sent like a warning, but the
    escalation ladder never counts it as ignored.
    `kind`: which of its monitor's failures it is, when the monitor tells them apart (the loop
    monitor: "repeat", "not_run", "wait"): what a ladder restricted to some failure types reads
    (`ladder.EscalationPolicy.failure_types`)."""

    score: float
    text: str | None = None
    facts: Mapping[str, int] | None = None
    advice: bool = False
    kind: str = ""

    @property
    def fired(self) -> bool:
        return self.score >= FIRE_AT


NOTHING = Finding(0.0)


@dataclass(frozen=True, slots=True)
class Context:
    """What a monitor may read besides the step and its own state: the run's task, and the
    findings of the monitors evaluated before it on this step, by name (filled in as the suite
    goes; a monitor reads only those it names in `after`)."""

    task: str | None
    found: Mapping[str, Finding]
    # the run's wait budget (its org's, resolved at run_start; None: the monitor's own) and its
    # model's price (None: not in the price table), for what a wait's calls are estimated at
    wait_budget: WaitBudget | None = None
    price: ModelPrice | None = None


S = TypeVar("S")


@dataclass(frozen=True, eq=False)
class Monitor(Generic[S]):
    """One monitor. Pure: the same state, step and context give the same result (the worker and
    replay must agree), and the state stays bounded whatever the run length. Compared and
    hashed by identity (eq=False): the suite's per-suite orders are cached by it, and hashing
    seven fields of six monitors on every step cost more than the lookup saves."""

    name: str  # as decisions, weights and profiles spell it
    failure_type: str  # the decision's `failure_type` when this monitor fires strongest
    key: str  # its state's key in the run state (stable: renaming it forgets every stored state)
    # Its state's class (a dataclass, not a dict): `state()` is a new run's state and
    # `state(**stored)` decodes the JSON object the run state holds.
    state: Callable[..., S]
    evaluate: Callable[[S, StepFeatures, Context, Semantics], tuple[S, Finding]]
    after: tuple[str, ...] = ()  # monitors whose findings it reads: they are evaluated first
    to_embed: Callable[[S], list[str]] | None = None  # texts its next step embeds with the full model

    def initial(self) -> S:
        return self.state()

    def decode(self, stored: Mapping[str, Any]) -> S:
        return rebuild(self.state, stored)


def clip01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def quote(text: str, n: int = 80) -> str:
    """A short, single-line quotation of event text, made data (`untrusted.clean`): put it in a
    steering text only inside a fence (`untrusted.fenced` does both)."""
    return clean(text, n)
