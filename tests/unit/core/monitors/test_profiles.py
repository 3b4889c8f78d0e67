"""Weight profiles, override rules and the composite."""

from __future__ import annotations

import pytest

from streams.core.monitors import MONITORS, composite, parse_profiles
from streams.core.policy import Policy

resolve_weights = Policy().weights  # the default policy: the built-in profiles


def test_builtin_profiles_have_the_spec_weights():
    assert resolve_weights("coding", None) == {
        "claim_contradiction": 0.30,
        "semantic_loop": 0.25,
        "verification_skip": 0.15,
        "cyclic_compression": 0.10,
        "late_sprawl": 0.10,
        "silent_topic_drift": 0.10,
        "data_instruction": 0.10,
    }
    pr = resolve_weights("pr_review", None)
    assert [pr[m] for m in MONITORS] == [0.20, 0.30, 0.10, 0.15, 0.15, 0.10, 0.10]
    qa = resolve_weights("qa", None)
    assert [qa[m] for m in MONITORS] == [0.40, 0.15, 0.05, 0.05, 0.10, 0.25, 0.10]


def test_overrides_drop_unknown_names_zero_negatives_and_cap_at_one():
    w = resolve_weights(
        "qa", {"semantic_loop": 2.5, "late_sprawl": -1, "made_up": 0.9, "silent_topic_drift": 0.5, "x": "y"}
    )
    assert w["semantic_loop"] == 1.0
    assert w["late_sprawl"] == 0.0
    assert w["silent_topic_drift"] == 0.5
    assert w["claim_contradiction"] == 0.40  # untouched: from the profile
    assert "made_up" not in w and "x" not in w


def test_composite_is_the_weighted_sum_clipped_to_one():
    w = resolve_weights("coding", None)
    scores = dict.fromkeys(MONITORS, 0.0) | {"semantic_loop": 0.8, "claim_contradiction": 0.5}
    assert composite(scores, w) == pytest.approx(0.25 * 0.8 + 0.30 * 0.5)
    heavy = resolve_weights("coding", dict.fromkeys(MONITORS, 1.0))
    assert composite(dict.fromkeys(MONITORS, 0.9), heavy) == 1.0


def test_unknown_profile_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown task_profile 'nope'"):
        resolve_weights("nope", None)


def test_custom_profiles_start_from_the_coding_weights():
    sre = parse_profiles({"sre": {"semantic_loop": 0.5, "silent_topic_drift": 0.4}})["sre"]
    assert sre == {**resolve_weights("coding", None), "semantic_loop": 0.5, "silent_topic_drift": 0.4}


def test_custom_profile_with_unknown_monitor_is_rejected():
    with pytest.raises(ValueError, match=r"profile 'bad': unknown monitors \['semantic_lop'\]"):
        parse_profiles({"bad": {"semantic_lop": 0.3}})


@pytest.mark.parametrize("data", [["sre"], {"sre": 0.5}, {"": {"semantic_loop": 0.5}}])
def test_what_is_not_a_mapping_of_named_profiles_is_rejected(data):
    with pytest.raises(ValueError, match=r"expected a mapping|non-empty string"):
        parse_profiles(data)
