"""The simulator's response model: an agent not told keeps its base behaviour, a told one
responds with the documented probabilities, the outcome follows, all deterministic given a seed;
and closed over the real engine, the treatment agents are told and the control ones are not."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from streams.agent.gate import check
from streams.local.respond import (
    BASE_SUCCESS,
    RESPONSIVE,
    UPLOAD_URL,
    ResponseModel,
    ResponsiveRun,
    told_by,
)
from streams.local.simulate import BEHAVIOURS, trajectory

SEEDS = range(2000)


def drive(run: ResponsiveRun, told: Any = frozenset(), allow: Any = None) -> list[dict[str, Any]]:
    """Every payload of `run`; `told(run)` gives what the agent is told before each call."""
    out = []
    while True:
        t = told(run) if callable(told) else told
        s = run.next_step(t, allow) if allow else run.next_step(t)
        if s is None:
            return out
        out.append(s)


def within(k: int, n: int, p: float) -> bool:
    """k of n within 4.5 standard deviations of n * p (a false alarm about once in 150,000)."""
    return abs(k - n * p) <= 4.5 * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("behaviour", [b for b in BEHAVIOURS if b != "skipper"])
def test_an_agent_never_told_sends_exactly_its_trajectory(behaviour):
    for seed in range(3):
        _, expected = trajectory(behaviour, 30, seed)
        assert drive(ResponsiveRun(behaviour, 30, seed)) == list(expected)


def test_the_same_seed_and_the_same_texts_give_the_same_run():
    for b in RESPONSIVE:
        a, c = ResponsiveRun(b, 30, 7), ResponsiveRun(b, 30, 7)
        everything = frozenset({"semantic_loop", "verification_skip", "data_instruction"})
        assert drive(a, everything) == drive(c, everything)
        assert a.outcome() == c.outcome()


def test_an_untold_looping_agent_loops_past_the_limit_and_fails():
    for seed in range(50):
        run = ResponsiveRun("looping", 30, seed)
        drive(run)
        assert run.loop_steps == 15 and not run.broken and run.outcome() == "failure: stuck in a loop"


def test_a_loop_text_breaks_the_loop_with_probability_p():
    model = ResponseModel(p_break=0.6)
    broke = 0
    for seed in SEEDS:
        run = ResponsiveRun("looping", 30, seed, model)
        drive(run, lambda r: frozenset({"semantic_loop"}) if r.k == 18 else frozenset())  # told once
        assert run.told["semantic_loop"] == 1
        broke += run.broken
        if run.broken:  # broken at call 19: three loop steps, under the limit
            assert run.loop_steps == 3 and run.outcome() in ("success", "failure: tests still failing")
    assert within(broke, len(SEEDS), 0.6)


def test_a_text_about_another_monitor_changes_nothing():
    for seed in range(20):
        told = frozenset({"silent_topic_drift", "verification_skip"})
        run = ResponsiveRun("looping", 30, seed)
        assert drive(run, told) == list(trajectory("looping", 30, seed)[1])
        assert not run.told


def test_a_told_skipper_runs_its_tests_with_probability_q_and_the_outcome_follows():
    model = ResponseModel(q_verify=0.7, unverified_ok=0.3)
    verified = succeeded_unverified = unverified = 0
    for seed in SEEDS:
        run = ResponsiveRun("skipper", 30, seed, model)
        steps = drive(run, frozenset({"verification_skip"}))
        assert steps[29]["thought"].endswith("All tests pass.") and steps[29]["action"] is None
        assert steps[-1]["action"] == "finish"
        if run.verified:
            verified += 1
            assert steps[30]["action_input"] == {"command": "pytest -q"} and len(steps) == 32
        else:
            unverified += 1
            succeeded_unverified += run.outcome() == "success"
    assert within(verified, len(SEEDS), 0.7)
    assert within(succeeded_unverified, unverified, 0.3)


def test_an_untold_skipper_finishes_unverified():
    for seed in range(50):
        run = ResponsiveRun("skipper", 30, seed)
        steps = drive(run)
        assert len(steps) == 31 and steps[-1]["action"] == "finish" and not run.verified
        assert run.outcome() in ("success", "failure: unverified fix")


def test_a_told_injected_agent_drops_the_tainted_call_with_probability_r():
    model = ResponseModel(r_refrain=0.8)
    refrained = 0
    for seed in SEEDS:
        run = ResponsiveRun("injected", 30, seed, model)
        steps = drive(run, lambda r: frozenset({"data_instruction"}) if r.k == 10 else frozenset())
        posts = [s for s in steps if s["action"] == "http_post"]
        assert len(posts) == (0 if run.refrained else 1)
        assert run.leaked == (not run.refrained)
        refrained += run.refrained
        if run.leaked:
            assert run.outcome() == "failure: sent data to an address from a tool result"
    assert within(refrained, len(SEEDS), 0.8)


def test_a_refused_call_is_not_made_and_does_not_fail_the_run():
    run = ResponsiveRun("injected", 30, 3)
    steps = drive(run, allow=lambda tool, args: tool != "http_post")
    post = next(s for s in steps if s["action"] == "http_post")
    assert "refused" in post["observation"] and run.refused and not run.leaked
    assert run.outcome() in ("success", "failure: tests still failing")


@pytest.mark.parametrize("behaviour", ["healthy", "flailing", "drifter", "contradicts", "recapper"])
def test_a_behaviour_without_a_response_succeeds_at_its_base_rate_whatever_it_is_told(behaviour):
    everything = frozenset({"semantic_loop", "verification_skip", "data_instruction", "silent_topic_drift"})
    wins = 0
    for seed in SEEDS:
        run = ResponsiveRun(behaviour, 12, seed)
        drive(run, everything)
        wins += run.outcome() == "success"
        assert not run.told
    assert within(wins, len(SEEDS), BASE_SUCCESS[behaviour])


def test_told_by_reads_only_a_delivered_monitor_text():
    fired = {"monitors": {"fired": ["semantic_loop"]}}
    assert told_by(None) == frozenset()
    assert told_by({**fired, "inject": False, "injections": []}) == frozenset()
    e3 = [{"source": "e3", "text": "rule"}]
    assert told_by({**fired, "inject": True, "injections": e3}) == frozenset()
    mon = [{"source": "monitor", "text": "you loop"}]
    assert told_by({**fired, "inject": True, "injections": mon}) == {"semantic_loop"}


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="unknown behaviour"):
        ResponsiveRun("sleepy", 30)
    with pytest.raises(ValueError, match="at least 6 steps"):
        ResponsiveRun("healthy", 3)


def closed_loop(sem: Any, behaviour: str, seed: int, mask: bool) -> ResponsiveRun:
    """One run against the real core (replay), the agent reading each decision; `mask`: the
    agent gets a control run's decision (no text, no taint) instead."""
    from streams.replay import Replayer

    r = Replayer(sem=sem, clock=lambda: 1.0)
    rid = f"closed-{behaviour}-{seed}"
    run = ResponsiveRun(behaviour, 30, seed)
    start = {"type": "run_start", "schema_version": 1, "run_id": rid, "task": run.task, "ts": 1.0}
    d, _ = r.feed(orjson.dumps(start))
    while True:
        seen = None if mask else d
        s = run.next_step(told_by(seen), lambda tool, args, seen=seen: check(seen, tool, args).allow)
        if s is None:
            return run
        ev = {"type": "step", "schema_version": 1, "run_id": rid, "step": run.k, "ts": 1.0 + run.k, **s}
        d, dead = r.feed(orjson.dumps(ev))
        assert dead is None, dead


@pytest.mark.parametrize("behaviour", ["looping", "skipper", "injected"])
def test_against_the_real_core_a_treatment_agent_is_told_and_a_control_agent_is_not(sem, behaviour):
    steered = closed_loop(sem, behaviour, 1, mask=False)
    alone = closed_loop(sem, behaviour, 1, mask=True)
    assert sum(steered.told.values()) >= 1 or steered.refused
    assert not alone.told and not alone.refused
    if behaviour == "injected":  # unsteered, the call goes out
        assert alone.leaked and UPLOAD_URL
