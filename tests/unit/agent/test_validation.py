"""Run options are checked before a run_start is sent, with the reason the worker would give."""

from __future__ import annotations

import re
from typing import Any

import pytest

from streams.agent import validation
from streams.agent.validation import MONITOR_NAMES, validate_run_fields


def test_the_agent_side_monitor_names_are_the_cores() -> None:
    from streams.core.monitors.builtin import MONITORS

    assert MONITOR_NAMES == MONITORS


def test_the_agent_side_names_and_fsm_bounds_are_the_cores() -> None:
    """The client keeps its own copy (it imports nothing of the core): kept equal here."""
    from dataclasses import asdict

    from streams.core import fsm
    from streams.core.difficulty import BUILTIN_SCORERS
    from streams.core.monitors.profiles import BUILTIN_PROFILES

    assert set(validation.SCORERS) == set(BUILTIN_SCORERS)
    assert set(validation.TRANSITIONS) == set(fsm.BUILTIN_TRANSITIONS)
    assert set(validation.TASK_PROFILES) == set(BUILTIN_PROFILES)
    assert asdict(fsm.FSMParams()) == validation.FSM_PARAMS
    assert validation.FSM_THRESHOLDS == fsm._THRESHOLDS
    assert validation.FSM_MAX_WINDOW == fsm.MAX_WINDOW


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
    {"task_profile": "qa", "scorer": "heuristic", "fsm_transition": "end_on_skip"},
    {"scorer": "", "fsm_transition": None},
    {"fsm_thresholds": {"slow_threshold": 0.7, "skip_window": 1000, "fast_threshold": 0}},
    {"fsm_thresholds": {"fast_threshold": 0.5, "slow_threshold": 0.9, "skip_threshold": 0.9}},
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
    ({"task_profile": "nonexistent"}, "unknown task_profile 'nonexistent' \\(known: coding, pr_review, qa"),
    ({"task_profile": ""}, "task_profile must be a non-empty string"),
    ({"scorer": "trajectorie"}, "unknown scorer 'trajectorie'"),
    ({"fsm_transition": "end_on_skipp"}, "unknown fsm_transition 'end_on_skipp'"),
    ({"fsm_thresholds": {"slow_treshold": 0.5}}, "unknown fsm_thresholds parameter\\(s\\): slow_treshold"),
    ({"fsm_thresholds": [0.5]}, "fsm_thresholds must be an object"),
    ({"fsm_thresholds": {"slow_threshold": 1.5}}, "fsm_thresholds.slow_threshold must be within \\[0, 1\\]"),
    ({"fsm_thresholds": {"slow_threshold": "0.5"}}, "fsm_thresholds.slow_threshold must be a number"),
    ({"fsm_thresholds": {"slow_window": 0}}, "fsm_thresholds.slow_window must be within \\[1, 1000\\]"),
    ({"fsm_thresholds": {"slow_window": 2.0}}, "fsm_thresholds.slow_window must be an integer"),
    ({"fsm_thresholds": {"fast_threshold": 0.6}}, "fast_threshold \\(0.6\\) must be below slow_threshold"),
    ({"fsm_thresholds": {"skip_threshold": 0.5}}, "skip_threshold \\(0.5\\) must not be below"),
]


@pytest.mark.parametrize(("fields", "reason"), INVALID)
def test_invalid_options_are_refused_with_the_reason(fields: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        validate_run_fields(fields)


def test_the_client_refuses_a_bad_run_start_before_sending_it() -> None:
    import asyncio

    from streams.agent.client import SteeringClient
    from streams.kafka.client_settings import ClientSettings

    c = SteeringClient(ClientSettings.from_env({}))  # never connected: nothing may be sent
    with pytest.raises(ValueError, match="monitor_weights: unknown monitor 'loop'"):
        asyncio.run(c.start_run("r", monitor_weights={"loop": 0.5}))
    with pytest.raises(ValueError, match="escalation: unknown field"):
        asyncio.run(c.start_run("r", escalation={"stop_after": 2, "block_after": 1}))
    with pytest.raises(ValueError, match="unknown task_profile 'nonexistent'"):
        asyncio.run(c.start_run("r", task_profile="nonexistent"))
    with pytest.raises(ValueError, match="unknown fsm_thresholds parameter"):
        asyncio.run(c.start_run("r", fsm_thresholds={"slow": 0.5}))
    # what the schema refuses: a field of the wrong type, a text too long
    with pytest.raises(ValueError, match=r"invalid run_start: data\.token_budget must be"):
        asyncio.run(c.start_run("r", token_budget="lots"))
    with pytest.raises(ValueError, match=r"invalid run_start: data\.model must be"):
        asyncio.run(c.start_run("r", model="m" * 10_000))
    assert "r" not in c._runs  # the run id stays free for a corrected start


@pytest.mark.parametrize(
    "fields",
    [{"token_budget": "lots"}, {"token_budget": 1.0}, {"model": "m" * 10_000}, {"e_traces_enabled": "yes"}],
)
def test_what_the_client_refuses_by_schema_the_worker_dead_letters(fields: dict[str, Any]) -> None:
    """The client's schema check is the worker's: the same schema, the same exact integers."""
    from streams.agent.client import check_run_start

    with pytest.raises(ValueError, match="invalid run_start"):
        check_run_start({"type": "run_start", "schema_version": 1, "run_id": "r", **fields})
    verdict = worker_verdict(fields)
    assert verdict is not None and verdict[0] == "schema_violation", verdict


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
    elif verdict[0] in ("invalid_fsm_thresholds", "invalid_config"):  # the same finding, worded
        # for the agent (the field, the known names): the worker's words are all in it
        assert set(re.findall(r"\w+", verdict[1])) <= set(re.findall(r"\w+", str(info.value))), (
            verdict,
            info.value,
        )
    else:  # caught earlier by the run_start schema (types, unknown keys, bounds)
        assert verdict[0] == "schema_violation", verdict


def test_names_the_workers_add_are_accepted_once_listed() -> None:
    fields = {"task_profile": "security", "scorer": "my_scorer", "fsm_transition": "mine"}
    with pytest.raises(ValueError, match="list it in RB_CLIENT_EXTRA_NAMES"):
        validate_run_fields(fields)
    validate_run_fields(fields, ("security", "my_scorer", "mine"))
    validate_run_fields(fields, ("*",))
    with pytest.raises(ValueError, match="unknown scorer 'my_scorer'"):
        validate_run_fields(fields, ("security", "mine"))


def test_the_client_takes_the_extra_names_from_its_settings() -> None:
    from streams.agent.client import SteeringClient
    from streams.kafka.client_settings import ClientSettings

    c = SteeringClient(ClientSettings.from_env({"RB_CLIENT_EXTRA_NAMES": " security, my_scorer ,"}))
    assert c.extra_names == ("security", "my_scorer")
