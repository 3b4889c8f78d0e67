"""Injection guardrails and the monitor fields of decisions, through the engine."""

from __future__ import annotations

import itertools

import pytest

from streams.core.monitors import COOLDOWN, hold_back
from streams.replay import Replayer
from tests.factories import b, run_start, step


def test_cap_comes_first_then_cooldown_then_duplicate():
    assert hold_back("NORMAL", 50, "t", 5, 10, "x") == "cap"
    assert hold_back("NORMAL", 12, "t", 1, 10, "x") == "cooldown"
    assert hold_back("NORMAL", 13, "t", 1, 10, "t") == "duplicate"
    assert hold_back("NORMAL", 13, "t", 1, 10, "x") is None
    assert hold_back("NORMAL", 1, "t", 0, None, None) is None


@pytest.mark.parametrize(("state", "cooldown"), [("FAST", 5), ("NORMAL", 3), ("SLOW", 2), ("SKIP", 2)])
def test_cooldown_depends_on_the_state(state, cooldown):
    assert COOLDOWN[state] == cooldown
    assert hold_back(state, 10 + cooldown - 1, "new", 1, 10, "old") == "cooldown"
    assert hold_back(state, 10 + cooldown, "new", 1, 10, "old") is None


def _looping_run(sem, n, difficulty=0.5, **start):
    """A run whose agent keeps running the same failing command: semantic_loop fires every step."""
    r = Replayer(sem=sem)
    # the guardrails alone: the default ladder sends an ignored warning past them (test_ladder.py)
    start.setdefault("escalation", {"enabled": False})
    r.feed(b(run_start("g", task="Fix the build", **start)))
    out = []
    for i in range(1, n + 1):
        d, dl = r.feed(
            b(
                step(
                    "g",
                    i,
                    thought=f"Trying the build again (attempt {i}).",
                    action="execute_bash",
                    action_input={"command": "make build"},
                    observation="make: *** [Makefile:12: build] Error 2",
                    observation_is_error=True,
                    difficulty=difficulty,
                )
            )
        )
        assert dl is None
        out.append(d)
    return r, out


def test_injections_respect_cooldown_then_cap(sem):
    # SLOW (difficulty 0.9): cooldown 2, and the growing repeat count keeps each text new.
    r, ds = _looping_run(sem, 30, difficulty=0.9)
    injected = [d["step"] for d in ds if d["inject"]]
    assert len(injected) == 5  # hard cap
    assert all(b - a >= COOLDOWN[ds[b - 1]["fsm_state"]] for a, b in itertools.pairwise(injected))
    between = [d for d in ds if injected[0] < d["step"] < injected[-1] and not d["inject"]]
    assert between and all(d["suppressed"] == "cooldown" for d in between if d["monitors"]["fired"])
    after_cap = [d for d in ds if d["step"] > injected[-1] and d["monitors"]["fired"]]
    assert after_cap and all(d["suppressed"] == "cap" for d in after_cap)
    assert r.states["g"].monitor_injections == 5


def test_back_to_back_identical_text_is_held_as_duplicate(sem):
    # The repeat count saturates at the loop window (12), after which the steering text no
    # longer changes: the next proposal equals the last injection and is held back (FAST's
    # cooldown of 5 reaches that point before the cap).
    r, ds = _looping_run(sem, 30, difficulty=0.1)
    injected = [d for d in ds if d["inject"]]
    texts = [d["injections"][0]["text"] for d in injected]
    assert all(a != b for a, b in itertools.pairwise(texts))
    dups = [d for d in ds if d["suppressed"] == "duplicate"]
    assert dups and all(d["step"] > injected[-1]["step"] for d in dups)
    assert r.states["g"].monitor_injections == len(injected) < 5


def test_decision_carries_monitor_fields_and_reasonblocks_block(sem):
    _, ds = _looping_run(sem, 6)
    d = next(d for d in ds if d["inject"])
    assert d["monitors"]["failure_type"] == "loop"
    assert d["monitors"]["composite"] > 0.15
    assert set(d["monitors"]["scores"]) == {
        "claim_contradiction",
        "semantic_loop",
        "verification_skip",
        "cyclic_compression",
        "late_sprawl",
        "silent_topic_drift",
        "data_instruction",
    }
    assert d["injection_text"].startswith("[REASONBLOCKS]\n")
    assert d["injections"][0]["source"] == "monitor"
    assert "make build" in d["injections"][0]["text"]


def test_monitors_disabled_means_empty_monitor_fields(sem):
    _, ds = _looping_run(sem, 8, monitors_enabled=False)
    assert all(d["monitors"]["fired"] == [] and not d["inject"] for d in ds)


def test_monitors_do_not_feed_the_fsm(sem):
    _, on = _looping_run(sem, 30, difficulty=0.9)
    _, off = _looping_run(sem, 30, difficulty=0.9, monitors_enabled=False)
    assert [d["fsm_state"] for d in on] == [d["fsm_state"] for d in off]
    assert any(d["fsm_state"] == "SLOW" for d in on)


def test_slow_state_uses_the_shorter_cooldown(sem):
    _, ds = _looping_run(sem, 30, difficulty=0.9)
    injected = [d["step"] for d in ds if d["inject"] and d["fsm_state"] == "SLOW"]
    assert len(injected) >= 2
    assert min(b - a for a, b in itertools.pairwise(injected)) == COOLDOWN["SLOW"]
