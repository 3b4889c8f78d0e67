"""The guard switches harmful steering to observe-only, deterministically, and only then."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from streams.core.decision import DecisionRecord
from streams.core.guard import ALL, Guard, GuardSettings, mask

from .sim_arms import experiments, first_rejection, log_e_per_run

ON = GuardSettings(enabled=True, alpha=0.05, min_runs=50)
# The documented figure (docs/experiments.md): at a 50% holdout and treatment 15 points worse
# (35% vs 50%), 90% of experiments switch within this many runs.
SWITCH_WITHIN_RUNS = 700


def record(run_id: str, arm: str, success: bool, **kw: Any) -> dict[str, Any]:
    return {
        "type": "outcome",
        "schema_version": 1,
        "run_id": run_id,
        "org_id": kw.pop("org", "acme"),
        "experiment": kw.pop("experiment", "pilot"),
        "arm": arm,
        "outcome": "success" if success else "failure: tests fail",
        "first_fire": kw.pop("first_fire", {}),
        **kw,
    }


def feed_sim(guard: Guard, control: np.ndarray, success: np.ndarray, row: int, **kw: Any) -> int:
    """Feed one simulated experiment; the record index of the first switch (0: none)."""
    for r in range(control.shape[1]):
        arm = "control" if control[row, r] else "treatment"
        if guard.feed(record(f"{row}-{r}", arm, bool(success[row, r]), **kw)):
            return r + 1
    return 0


def test_switches_within_the_documented_runs_when_treatment_is_15_points_worse() -> None:
    rng = np.random.default_rng(20)
    control, success = experiments(rng, 0.35, 0.50, 0.5, runs=1500, n=2000)
    le, n_t, n_c = log_e_per_run(control, success, "worse")
    at = first_rejection(le, n_t, n_c, ON.alpha, ON.min_runs)
    within = ((at > 0) & (at <= SWITCH_WITHIN_RUNS)).mean()
    assert within >= 0.90, within


def test_never_switches_when_the_arms_are_equal_beyond_alpha() -> None:
    rng = np.random.default_rng(21)
    control, success = experiments(rng, 0.6, 0.6, 0.5, runs=2000, n=2000)
    le, n_t, n_c = log_e_per_run(control, success, "worse")
    assert (first_rejection(le, n_t, n_c, ON.alpha, ON.min_runs) > 0).mean() <= ON.alpha


def test_the_guard_fed_record_by_record_switches_at_the_simulated_run() -> None:
    rng = np.random.default_rng(22)
    control, success = experiments(rng, 0.3, 0.55, 0.5, runs=600, n=6)
    le, n_t, n_c = log_e_per_run(control, success, "worse")
    expected = first_rejection(le, n_t, n_c, ON.alpha, ON.min_runs)
    assert (expected > 0).sum() >= 4  # the check below is about switches that happen
    for row in range(6):
        g = Guard(ON)
        assert feed_sim(g, control, success, row) == expected[row]
        if expected[row]:
            assert g.observe_only("acme", "pilot") == {ALL}
            assert g.switches[0].record == expected[row]
            assert "treatment worse than control" in g.switches[0].why


def test_same_records_same_switch_and_replayed_duplicates_count_once() -> None:
    rng = np.random.default_rng(23)
    control, success = experiments(rng, 0.3, 0.6, 0.5, runs=400, n=1)
    a, b = Guard(ON), Guard(ON)
    first = feed_sim(a, control, success, 0)
    assert first > 0
    for r in range(400):  # every record sent twice, as a worker restarted with kill -9 would
        arm = "control" if control[0, r] else "treatment"
        rec = record(f"0-{r}", arm, bool(success[0, r]))
        b.feed(rec)
        b.feed(rec)
        if b.switches:
            break
    assert b.switches[0].run_id == a.switches[0].run_id
    assert b.ignored == b.records // 2


def test_off_never_switches_however_bad() -> None:
    g = Guard(GuardSettings(enabled=False))
    for i in range(500):
        g.feed(record(f"t{i}", "treatment", False))
        g.feed(record(f"c{i}", "control", True))
    assert g.switches == [] and g.observe_only("acme", "pilot") == frozenset()


def test_needs_min_runs_in_each_arm_before_it_switches() -> None:
    g = Guard(GuardSettings(enabled=True, alpha=0.05, min_runs=50))
    for i in range(49):
        g.feed(record(f"t{i}", "treatment", False))
        g.feed(record(f"c{i}", "control", True))
    assert g.switches == []  # e = 1.5**49 already, but 49 runs an arm
    g.feed(record("t49", "treatment", False))
    g.feed(record("c49", "control", True))
    assert [s.monitor for s in g.switches] == [ALL]


def test_one_monitor_is_switched_when_its_runs_do_worse_and_the_org_is_not() -> None:
    g = Guard(ON)
    for i in range(400):
        fired = {"first_fire": {"loop": 3}} if i % 4 == 0 else {}
        # runs the loop monitor steered fail, the others do better: 75% success in both arms
        g.feed(record(f"t{i}", "treatment", not fired, **fired))
        g.feed(record(f"c{i}", "control", i % 4 != 3, **fired))
    assert g.observe_only("acme", "pilot") == {"loop"}
    assert g.observe_only("acme", "other") == frozenset()
    assert g.observe_only("globex", "pilot") == frozenset()


@pytest.mark.parametrize(
    "bad",
    [
        {"arm": None},
        {"experiment": None},
        {"arm": "both"},
        {"org_id": 3},
        {"outcome": None},
        {"run_id": None},
    ],
)
def test_records_without_an_experiment_or_arm_are_ignored_and_counted(bad: dict[str, Any]) -> None:
    g = Guard(ON)
    g.feed({**record("r1", "treatment", False), **bad})
    assert g.ignored == 1 and g.records == 1


def decision(**kw: Any) -> DecisionRecord:
    d: dict[str, Any] = {
        "type": "decision",
        "schema_version": 1,
        "run_id": "r",
        "step": 4,
        "model": "big-model",
        "inject": True,
        "injection_text": "x",
        "injections": [
            {"source": "monitor", "text": "you repeated search", "pattern_id": None, "similarity": None},
            {"source": "e1", "text": "a past run", "pattern_id": "p1", "similarity": 0.9},
        ],
        "monitors": {
            "scores": {"loop": 0.9},
            "fired": ["loop"],
            "composite": 0.9,
            "failure_type": "loop.repeat",
        },
        "action": "nudge",
        "action_reason": None,
        "taint": [{"h": "ab", "kind": "url", "step": 2, "tool": "fetch", "instr": True}],
    }
    d.update(kw)
    return d  # type: ignore[return-value]


def test_mask_everything_is_an_unsteered_decision_on_the_runs_own_model() -> None:
    d = decision(action="escalate", action_reason={"monitor": "loop"})
    m = mask(d, frozenset({ALL}), "own-model")
    assert (m["model"], m["inject"], m["injection_text"], m["injections"]) == ("own-model", False, None, [])
    assert (m["action"], m["action_reason"]) == ("continue", None)
    assert "taint" not in m
    assert d["injections"] and d["model"] == "big-model"  # the input is not changed


def test_mask_one_monitor_drops_its_text_and_keeps_the_rest() -> None:
    m = mask(decision(), frozenset({"loop"}), "own-model")
    assert [i["source"] for i in m["injections"]] == ["e1"]
    assert m["inject"] is True and m["injection_text"] is not None and "a past run" in m["injection_text"]
    assert m["action"] == "continue"  # the nudge was the monitor's
    assert m["model"] == "big-model" and m["taint"]  # routing and the gate are not the loop monitor's


def test_mask_of_a_monitor_that_did_not_fire_changes_nothing() -> None:
    d = decision()
    assert mask(d, frozenset({"drift"}), "own-model") == d
    assert mask(d, frozenset(), "own-model") is d


def test_mask_data_instruction_drops_the_taint_list_and_its_escalation() -> None:
    d = decision(action="stop", action_reason={"monitor": "data_instruction"}, sanctioned=[])
    m = mask(d, frozenset({"data_instruction"}), "own-model")
    assert "taint" not in m and "sanctioned" not in m
    assert (m["action"], m["model"]) == ("continue", "own-model")
    assert [i["source"] for i in m["injections"]] == ["e1"]  # its text went with the stop


def test_a_record_with_thousands_of_long_monitor_names_keeps_the_guard_bounded() -> None:
    g = Guard(ON)
    fired = {f"m{i}" + "x" * 10_000: 1 for i in range(5_000)}
    g.feed(record("r1", "treatment", False, first_fire=fired))
    (comp,) = g._by.values()
    assert len(comp.monitors) <= 64
    assert all(len(name) <= 128 for name in comp.monitors)
