"""The Policy: what a run_start may name, fixed once built."""

from __future__ import annotations

import pytest

from streams.core.policy import Policy


def test_the_default_policy_knows_the_builtin_names() -> None:
    p = Policy()
    assert {"heuristic", "trajectory"} <= set(p.scorers)
    assert {"default", "end_on_skip"} <= set(p.transitions)
    assert {"coding", "pr_review", "qa"} <= set(p.profiles)


def test_an_unknown_name_is_a_value_error_listing_the_known_ones() -> None:
    p = Policy()
    with pytest.raises(ValueError, match=r"unknown scorer 'nope'.*trajectory"):
        p.scorer("nope")
    with pytest.raises(ValueError, match=r"unknown fsm_transition 'nope'.*end_on_skip"):
        p.transition("nope")
    with pytest.raises(ValueError, match="unknown task_profile 'nope'"):
        p.weights("nope", None)


def test_weights_are_the_profile_overridden_by_cleaned_run_overrides() -> None:
    w = Policy().weights("coding", {"semantic_loop": 2.0, "late_sprawl": -1, "junk": 0.5})
    assert w["semantic_loop"] == 1.0 and w["late_sprawl"] == 0.0 and "junk" not in w
    assert w["claim_contradiction"] == 0.30


def test_a_policy_cannot_be_changed_once_built() -> None:
    p = Policy()
    with pytest.raises(TypeError):
        p.scorers["mine"] = p.scorers["heuristic"]  # type: ignore[index]
