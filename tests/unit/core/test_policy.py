"""The Policy: what a run_start may name, fixed once built."""

from __future__ import annotations

import pytest

from streams.core.policy import Policy
from streams.core.reading.features import extract


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


def test_with_adds_a_name_to_a_new_policy_and_leaves_the_old_one_alone() -> None:
    base = Policy()
    p = (
        base.with_scorer("const", lambda f, mem: (0.5, mem))
        .with_text_scorer("shouting", lambda text: 1.0 if text and text.isupper() else 0.1)
        .with_transition("stay", lambda current, history, params: current)
        .with_profiles({"oncall": {"semantic_loop": 0.5}})
    )
    assert p.scorer("const")(extract({}, 10), {"k": 1}) == (0.5, {"k": 1})
    # a text scorer reads the thought cut to the limit, and keeps no memory
    assert p.scorer("shouting")(extract({"thought": "LOUD quiet"}, 4), {"k": 1}) == (1.0, None)
    assert p.scorer("shouting")(extract({"thought": None}, 4), None) == (0.1, None)
    assert "stay" in p.transitions
    assert p.weights("oncall", None)["semantic_loop"] == 0.5
    assert p.weights("oncall", None)["claim_contradiction"] == 0.30  # unlisted: the coding weight
    assert set(p.scorers) - set(base.scorers) == {"const", "shouting"}
    assert "oncall" not in base.profiles and "stay" not in base.transitions


def test_with_refuses_what_no_run_could_use() -> None:
    p = Policy()
    with pytest.raises(ValueError, match="non-empty string"):
        p.with_scorer("", lambda f, mem: (0.5, mem))
    with pytest.raises(TypeError, match="must be callable"):
        p.with_transition("x", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown monitors \['semantic_lop'\]"):
        p.with_profiles({"bad": {"semantic_lop": 0.3}})
