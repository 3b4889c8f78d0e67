"""Run options are checked before a run_start is sent, with the reason the worker would give."""

from __future__ import annotations

from typing import Any

import pytest

from streams.agent.validation import MONITOR_NAMES, validate_run_fields


def test_the_agent_side_monitor_names_are_the_cores() -> None:
    from streams.core.monitors.builtin import MONITORS

    assert MONITOR_NAMES == MONITORS


VALID: list[dict[str, Any]] = [
    {},
    {"escalation": None, "monitors_off": None, "monitor_thresholds": None, "monitor_weights": None},
    {"escalation": {}},
    {"escalation": {"enabled": False}},
    {"escalation": {"escalate_model_after": 1, "stop_after": 2, "escalation_model": "claude-opus-4-5"}},
    {"escalation": {"escalate_model_after": None, "stop_after": None, "escalation_model": None}},
    {"monitors_off": ["semantic_loop", "late_sprawl"], "monitor_thresholds": {"semantic_loop": 0.8}},
    {"monitor_thresholds": {"claim_contradiction": 1, "silent_topic_drift": 0.05}},
    {"monitor_weights": {"semantic_loop": 0.5, "verification_skip": 0}},
    {"task": "anything else is left to the worker", "model_routing": {"SLOW": "x"}},
]


@pytest.mark.parametrize("fields", VALID)
def test_valid_options_pass(fields: dict[str, Any]) -> None:
    validate_run_fields(fields)


INVALID: list[tuple[dict[str, Any], str]] = [
    ({"escalation": "on"}, "escalation must be an object"),
    ({"escalation": {"stop": 2}}, "escalation: unknown field 'stop'"),
    ({"escalation": {"enabled": "yes"}}, "escalation.enabled must be true or false"),
    ({"escalation": {"stop_after": 0}}, "escalation.stop_after must be an integer >= 1 or null"),
    ({"escalation": {"stop_after": 2.0}}, "escalation.stop_after must be an integer"),
    ({"escalation": {"stop_after": True}}, "escalation.stop_after must be an integer"),
    ({"escalation": {"escalate_model_after": -1}}, "escalation.escalate_model_after must be"),
    ({"escalation": {"escalation_model": ""}}, "escalation.escalation_model must be a non-empty string"),
    ({"escalation": {"escalation_model": 4}}, "escalation.escalation_model must be a non-empty string"),
    ({"monitors_off": "semantic_loop"}, "monitors_off must be a list"),
    ({"monitors_off": ["semantic_loop"] * 65}, "monitors_off must be a list of at most 64"),
    ({"escalation": {"stop_after": 2**31}}, "escalation.stop_after must be an integer >= 1 or null"),
    ({"monitors_off": ["semantic_loop", "loops"]}, "monitors_off: unknown monitor 'loops'"),
    ({"monitor_thresholds": [0.5]}, "monitor_thresholds must be an object"),
    ({"monitor_thresholds": {"drift": 0.5}}, "monitor_thresholds: unknown monitor 'drift'"),
    (
        {"monitor_thresholds": {"semantic_loop": 0}},
        r"monitor_thresholds.semantic_loop must be a number in \(0, 1\]",
    ),
    ({"monitor_thresholds": {"semantic_loop": 1.5}}, "monitor_thresholds.semantic_loop must be a number"),
    (
        {"monitor_thresholds": {"semantic_loop": "high"}},
        "monitor_thresholds.semantic_loop must be a number",
    ),
    ({"monitor_thresholds": {"semantic_loop": float("nan")}}, "monitor_thresholds.semantic_loop must be"),
    ({"monitor_weights": {"semantic_loops": 0.5}}, "monitor_weights: unknown monitor 'semantic_loops'"),
    ({"monitor_weights": {"semantic_loop": "0.5"}}, "monitor_weights.semantic_loop must be a number"),
    ({"monitor_weights": 0.5}, "monitor_weights must be an object"),
]


@pytest.mark.parametrize(("fields", "reason"), INVALID)
def test_invalid_options_are_refused_with_the_reason(fields: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        validate_run_fields(fields)


def test_the_client_refuses_a_bad_run_start_before_sending_it() -> None:
    import asyncio

    from streams.agent.client import SteeringClient
    from streams.settings import ClientSettings

    c = SteeringClient(ClientSettings.from_env({}))  # never connected: nothing may be sent
    with pytest.raises(ValueError, match="monitor_weights: unknown monitor 'loop'"):
        asyncio.run(c.start_run("r", monitor_weights={"loop": 0.5}))
    with pytest.raises(ValueError, match="escalation: unknown field"):
        asyncio.run(c.start_run("r", escalation={"stop_after": 2, "block_after": 1}))
    assert "r" not in c._runs  # the run id stays free for a corrected start


def worker_verdict(fields: dict[str, Any]) -> tuple[str, str] | None:
    """What the worker's core does with a run_start carrying `fields`: None (accepted) or
    (dead-letter reason, detail)."""
    from tests.driving import sealed
    from tests.factories import b, run_start

    res = sealed(b(run_start("r", **fields)), lambda _r: None, None, 1.0)
    return None if res.rejection is None else (res.rejection.reason, res.rejection.detail)


@pytest.mark.parametrize("fields", VALID)
def test_what_the_agent_side_accepts_the_worker_accepts(fields: dict[str, Any]) -> None:
    assert worker_verdict(fields) is None


@pytest.mark.parametrize(("fields", "reason"), INVALID)
def test_what_the_agent_side_refuses_the_worker_dead_letters_for_the_same_reason(
    fields: dict[str, Any], reason: str
) -> None:
    with pytest.raises(ValueError) as info:
        validate_run_fields(fields)
    verdict = worker_verdict(fields)
    assert verdict is not None, fields
    if verdict[0] == "invalid_run_start":  # the core's own check: the very same sentence
        assert verdict[1] == str(info.value)
    else:  # caught earlier by the run_start schema (types, unknown keys, bounds)
        assert verdict[0] == "schema_violation", verdict
