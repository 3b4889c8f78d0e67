"""The escalation ladder's policy, and the per-run monitor settings a run_start may carry.

Pure. A run's policy comes from its run_start (`escalation`), else from its org's default
(`Defaults`, built from settings at the composition root and handed to the core in the
`Policy`), else there is none: the nudges of before, nothing more. It is resolved once, at
run_start, and kept in the run's config, so the worker and `rb-streams replay` (given the same
settings) climb the same ladder. See docs/escalation.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

ESCALATION_KEYS = ("enabled", "escalate_model_after", "stop_after", "escalation_model")
ESCALATION_MODEL_CHARS = 256
MONITORS_OFF_MAX = 64


class InvalidRunSettings(ValueError):
    """A run setting that cannot be applied; the message names the field and what is wrong."""


@dataclass(frozen=True)
class EscalationPolicy:
    """A run's ladder, counted in ignored warnings. None for a rung: that rung never comes."""

    enabled: bool = True
    escalate_model_after: int | None = None
    stop_after: int | None = None
    escalation_model: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ESCALATION_KEYS}

    @property
    def active(self) -> bool:
        """Whether the ladder can climb past the nudge at all."""
        return self.enabled and (self.escalate_model_after is not None or self.stop_after is not None)


def _count(raw: Mapping[str, Any], key: str, where: str) -> int | None:
    v = raw.get(key)
    if v is None:
        return None
    if type(v) is not int or v < 1:
        raise InvalidRunSettings(f"{where}.{key} must be an integer >= 1 or null")
    return v


def parse_escalation(raw: Any, where: str = "escalation") -> EscalationPolicy:
    """A policy object (run_start `escalation`, RB_ESCALATION, one org's RB_ORG_ESCALATION
    entry) -> EscalationPolicy, or InvalidRunSettings naming the field."""
    if not isinstance(raw, Mapping):
        raise InvalidRunSettings(f"{where} must be an object")
    unknown = sorted(set(raw) - set(ESCALATION_KEYS))
    if unknown:
        raise InvalidRunSettings(
            f"{where}: unknown field {unknown[0]!r} (known: {', '.join(ESCALATION_KEYS)})"
        )
    enabled = raw.get("enabled", True)
    if type(enabled) is not bool:
        raise InvalidRunSettings(f"{where}.enabled must be true or false")
    model = raw.get("escalation_model")
    if model is not None and (not isinstance(model, str) or not model or len(model) > ESCALATION_MODEL_CHARS):
        raise InvalidRunSettings(
            f"{where}.escalation_model must be a non-empty string of at most "
            f"{ESCALATION_MODEL_CHARS} characters, or null"
        )
    return EscalationPolicy(
        enabled=enabled,
        escalate_model_after=_count(raw, "escalate_model_after", where),
        stop_after=_count(raw, "stop_after", where),
        escalation_model=model,
    )


@dataclass(frozen=True)
class Defaults:
    """Org-wide ladder defaults (settings RB_ESCALATION, RB_ORG_ESCALATION): the policy of a
    run whose run_start names none. An org's own entry wins over the deployment's."""

    default: EscalationPolicy | None = None
    by_org: Mapping[str, EscalationPolicy] = field(default_factory=lambda: MappingProxyType({}))

    def for_org(self, org_id: str) -> EscalationPolicy | None:
        return self.by_org.get(org_id, self.default)

    @classmethod
    def parse(cls, default: Any = None, by_org: Any = None) -> Defaults:
        """From the settings' decoded JSON (None: not set); InvalidRunSettings when bad."""
        base = None if default is None else parse_escalation(default, "RB_ESCALATION")
        orgs: dict[str, EscalationPolicy] = {}
        if by_org is not None:
            if not isinstance(by_org, Mapping):
                raise InvalidRunSettings("RB_ORG_ESCALATION must be an object {org_id: policy}")
            for org, pol in by_org.items():
                orgs[str(org)] = parse_escalation(pol, f"RB_ORG_ESCALATION[{org!r}]")
        return cls(base, MappingProxyType(orgs))


NO_DEFAULTS = Defaults()


def resolve(raw: Any, org_id: str, defaults: Defaults) -> EscalationPolicy | None:
    """The run's policy: its run_start's `escalation` (null or absent: the org's default)."""
    if raw is not None:
        return parse_escalation(raw)
    return defaults.for_org(org_id)


def check_names(raw: Any, known: Sequence[str], where: str) -> list[str]:
    """The monitor names a run setting uses, each known, or InvalidRunSettings naming the
    first unknown one."""
    names = list(raw)
    for name in names:
        if name not in known:
            raise InvalidRunSettings(
                f"{where}: unknown monitor {str(name)[:100]!r} (known: {', '.join(known)})"
            )
    return names


def parse_monitors_off(raw: Any, known: Sequence[str]) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MONITORS_OFF_MAX:
        raise InvalidRunSettings(f"monitors_off must be a list of at most {MONITORS_OFF_MAX} monitor names")
    return sorted(set(check_names(raw, known, "monitors_off")))


def parse_thresholds(raw: Any, known: Sequence[str]) -> dict[str, float]:
    """{monitor: fire level in (0, 1]}."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidRunSettings("monitor_thresholds must be an object {monitor: level}")
    out: dict[str, float] = {}
    for name in check_names(raw, known, "monitor_thresholds"):
        v = raw[name]
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 < float(v) <= 1.0:
            raise InvalidRunSettings(f"monitor_thresholds.{name} must be a number in (0, 1]")
        out[name] = float(v)
    return out


def check_weight_names(raw: Any, known: Sequence[str]) -> None:
    """A `monitor_weights` key that names no monitor is refused (it used to be dropped)."""
    if isinstance(raw, Mapping):
        check_names(raw, known, "monitor_weights")
