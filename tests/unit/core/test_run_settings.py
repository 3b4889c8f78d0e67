"""Per-run monitor settings and the escalation policy are validated at run_start: a bad value
is dead-lettered (invalid_run_start) with a reason naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from streams.core.ladder import (
    DEFAULT_ESCALATION,
    Defaults,
    EscalationPolicy,
    InvalidRunSettings,
    parse_escalation,
)
from streams.core.policy import Policy
from tests.driving import sealed
from tests.factories import b, run_start
from tests.models import semantics

SEM = semantics()


def start(policy: Policy | None = None, **kw: Any) -> Any:
    return sealed(b(run_start("r", **kw)), lambda _r: None, None, 1.0, SEM, policy=policy)


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"escalation": {"stop_after": 0}}, "escalation.stop_after must be an integer >= 1"),
        ({"escalation": {"escalate_model_after": -2}}, "escalation.escalate_model_after"),
        ({"escalation": {"escalation_model": ""}}, "escalation.escalation_model"),
        ({"monitors_off": ["semantic_loop", "nope"]}, "monitors_off: unknown monitor 'nope'"),
        ({"monitor_thresholds": {"nope": 0.5}}, "monitor_thresholds: unknown monitor 'nope'"),
        ({"monitor_thresholds": {"semantic_loop": 0}}, "monitor_thresholds.semantic_loop must be"),
        ({"monitor_thresholds": {"semantic_loop": 1.5}}, "in (0, 1]"),
        ({"monitor_weights": {"semantic_lop": 0.5}}, "monitor_weights: unknown monitor 'semantic_lop'"),
    ],
)
def test_a_bad_run_setting_is_dead_lettered_with_a_reason_naming_it(
    kw: dict[str, Any], fragment: str
) -> None:
    res = start(**kw)
    assert res.rejection is not None and res.rejection.reason == "invalid_run_start"
    assert fragment in res.rejection.detail
    assert res.state is None


def test_an_unknown_escalation_field_is_a_schema_violation() -> None:
    res = start(escalation={"stop_afterr": 2})
    assert res.rejection is not None and res.rejection.reason == "schema_violation"
    with pytest.raises(InvalidRunSettings, match="unknown field 'stop_afterr'"):
        parse_escalation({"stop_afterr": 2})


def test_valid_settings_are_kept_in_the_run_config() -> None:
    res = start(
        monitors_off=["late_sprawl", "late_sprawl"],
        monitor_thresholds={"semantic_loop": 0.8},
        escalation={"escalate_model_after": 1, "stop_after": 2},
    )
    cfg = res.state.config
    assert cfg.monitors_off == ["late_sprawl"] and cfg.monitor_thresholds == {"semantic_loop": 0.8}
    assert cfg.escalation == EscalationPolicy(escalate_model_after=1, stop_after=2).to_wire()


def test_without_a_policy_or_a_default_the_run_gets_the_built_in_ladder() -> None:
    assert start().state.config.escalation == DEFAULT_ESCALATION.to_wire()


def test_the_orgs_default_applies_unless_the_run_names_its_own() -> None:
    defaults = Defaults.parse({"escalate_model_after": 1}, {"acme": {"stop_after": 3}})
    policy = Policy().with_escalation(defaults)
    assert start(policy).state.config.escalation["escalate_model_after"] == 1
    acme = start(policy, org_id="acme").state.config.escalation
    assert acme["stop_after"] == 3 and acme["escalate_model_after"] is None
    own = start(policy, org_id="acme", escalation={"enabled": False}).state.config.escalation
    assert own["enabled"] is False
