"""The synthetic trajectories behave as labelled, so benchmarks and the demo exercise the monitors."""

from __future__ import annotations

import pytest

from streams.local.simulate import BEHAVIOURS, trajectory
from tests.unit.core.monitors.trajectories import Run

EXPECTED = {
    "healthy": set(),
    "looping": {"semantic_loop"},
    "flailing": {"semantic_loop"},
    "skipper": {"verification_skip"},
    "drifter": {"silent_topic_drift", "late_sprawl"},
    "contradicts": {"claim_contradiction"},
    "recapper": {"cyclic_compression", "semantic_loop"},
}


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_behaviour_fires_exactly_its_monitors(sem, behaviour, seed):
    # 41: a drift check planned at step 40 gives its verdict on the next step
    task, steps = trajectory(behaviour, 41, seed)
    run = Run(sem, task=task)
    fired: set[str] = set()
    for s in steps:
        s.pop("tokens")
        fired |= set(run.feed(s).fired)
    assert fired == EXPECTED[behaviour]


def test_texts_vary_from_step_to_step():
    _, steps = trajectory("healthy", 200, 0)
    thoughts = [s["thought"] for s in steps]
    assert len(set(thoughts)) > 100


def test_unknown_behaviour_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown behaviour"):
        trajectory("sleepy", 3)


def test_the_flailing_run_ends_in_a_failure_streak_long_enough_for_slow():
    # the FSM enters SLOW after five hard steps in a row: the demo's run that reaches the strong model
    _, steps = trajectory("flailing", 30, 0)
    errors = [bool(s.get("observation_is_error")) for s in steps]
    assert errors[-8:] == [True] * 8
