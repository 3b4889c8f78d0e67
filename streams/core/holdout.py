"""A held-out arm (issue 50): which runs get steering, and which are only watched.

An experiment is set for every org (setting RB_EXPERIMENT), per org (RB_ORG_EXPERIMENT: an
org's own entry wins; null opts the org out), or per run (run_start `experiment`, which wins
over both). A run's arm is a deterministic hash of (org, name, seed, run_id), so the worker and
`rb-streams replay` assign the same arm, a restarted worker assigns the arm it assigned before,
and anyone holding the ids can recompute it. It is resolved once, at run_start, into the run's
config (`RunConfig.experiment`, `RunConfig.arm`), and never changes.

A control run is evaluated in full (FSM, monitors, ladder, routing, cost): the decision it
receives is unsteered (`mask`), and what it would have received is the run's shadow (the run
state evolves from it: its step log shows the would-be decision).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .decision import Arm, DecisionRecord

ARMS: tuple[Arm, ...] = ("treatment", "control")
NAME_CHARS = 64
SEED_CHARS = 64
HOLDOUT_MAX = 0.5
KEYS = ("name", "holdout", "seed")
_SEP = "\x1f"


class InvalidExperiment(ValueError):
    """An experiment that cannot be applied; the message names the field and what is wrong."""


@dataclass(frozen=True)
class Experiment:
    """One experiment: its name, the share of runs held out as control, and the hash's seed."""

    name: str
    holdout: float
    seed: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "holdout": self.holdout, "seed": self.seed}


def parse(raw: Any, where: str = "experiment") -> Experiment:
    """{"name": str (1-64 chars), "holdout": number in [0, 0.5], "seed": str (<= 64 chars,
    optional)} -> Experiment, or InvalidExperiment naming the field."""
    if not isinstance(raw, Mapping):
        raise InvalidExperiment(f"{where} must be an object {{name, holdout, seed}}")
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise InvalidExperiment(f"{where}: unknown field {str(unknown[0])[:64]!r} (known: {', '.join(KEYS)})")
    name, holdout, seed = raw.get("name"), raw.get("holdout"), raw.get("seed", "")
    if not isinstance(name, str) or not 0 < len(name) <= NAME_CHARS:
        raise InvalidExperiment(f"{where}.name must be a string of 1 to {NAME_CHARS} characters")
    if (
        isinstance(holdout, bool)
        or not isinstance(holdout, int | float)
        or not 0.0 <= float(holdout) <= HOLDOUT_MAX
    ):
        raise InvalidExperiment(f"{where}.holdout must be a number from 0 to {HOLDOUT_MAX}")
    if not isinstance(seed, str) or len(seed) > SEED_CHARS:
        raise InvalidExperiment(f"{where}.seed must be a string of at most {SEED_CHARS} characters")
    return Experiment(name, float(holdout), seed)


def assign_arm(org: str, exp: Experiment, run_id: str) -> Arm:
    """The run's arm: sha256 of `org \\x1f name \\x1f seed \\x1f run_id`, its first 8 bytes as a
    big-endian uint64 over 2**64, below the holdout -> control."""
    key = _SEP.join((org, exp.name, exp.seed, run_id)).encode("utf-8", "surrogatepass")
    u = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
    return "control" if u / 2**64 < exp.holdout else "treatment"


_UNSET: Any = object()


@dataclass(frozen=True)
class Experiments:
    """The deployment's experiments (settings RB_EXPERIMENT, RB_ORG_EXPERIMENT), carried in the
    `Policy` so that the worker and replay resolve a run's experiment alike. `by_org`: an org's
    own entry (None: the org is in no experiment) wins over `default`."""

    default: Experiment | None = None
    by_org: Mapping[str, Experiment | None] = field(default_factory=lambda: MappingProxyType({}))

    def for_org(self, org_id: str) -> Experiment | None:
        got = self.by_org.get(org_id, _UNSET)
        return self.default if got is _UNSET else got

    def resolve(self, raw: Any, org_id: str) -> Experiment | None:
        """The run's experiment: its run_start's `experiment` (null or absent: the org's)."""
        return parse(raw) if raw is not None else self.for_org(org_id)

    @classmethod
    def parse(cls, default: Any = None, by_org: Any = None) -> Experiments:
        """From the settings' decoded JSON (None: not set); InvalidExperiment when bad."""
        base = None if default is None else parse(default, "RB_EXPERIMENT")
        orgs: dict[str, Experiment | None] = {}
        if by_org is not None:
            if not isinstance(by_org, Mapping):
                raise InvalidExperiment("RB_ORG_EXPERIMENT must be an object {org_id: experiment or null}")
            for org, raw in by_org.items():
                where = f"RB_ORG_EXPERIMENT[{str(org)[:64]!r}]"
                orgs[str(org)] = None if raw is None else parse(raw, where)
        return cls(base, MappingProxyType(orgs))


NO_EXPERIMENTS = Experiments()


def mask(d: DecisionRecord, model: str | None) -> DecisionRecord:
    """A control run's decision as sent: unsteered. The run's own `model`, no text, no
    injections, no taint or sanctioned list (the gate allows every call), action continue; the
    evaluation itself (FSM state, difficulty, monitor scores, what was suppressed, the token
    count) is kept, so the two arms' decisions compare field by field. A new dict: the shadow
    `d` is not changed."""
    out: DecisionRecord = {
        **d,
        "model": model,
        "inject": False,
        "injection_text": None,
        "injections": [],
        "action": "continue",
        "action_reason": None,
    }
    out.pop("taint", None)
    out.pop("sanctioned", None)
    out.pop("routing_reason", None)
    return out
