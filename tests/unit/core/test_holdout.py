"""Held-out arms (issue 50 item 1): deterministic, balanced, resolved at run_start, and a
control run's decisions unsteered while its state evolves from the would-be decision."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest

from streams.core import compliance
from streams.core.holdout import (
    Experiment,
    Experiments,
    InvalidExperiment,
    assign_arm,
    mask,
    parse,
)
from streams.core.policy import Policy
from streams.kafka.client_settings import SettingsError
from streams.local.simulate import trajectory
from streams.plugins import load_policy
from streams.replay import Replayer
from streams.settings import Settings
from tests.factories import b, run_finish, run_start
from tests.models import semantics

# chi-square critical values at p = 0.01: one degree of freedom (two arms), and nine (ten
# equal buckets of the hash's uniform)
CHI2_1DF_P01 = 6.635
CHI2_9DF_P01 = 21.666
IDS = [f"run-{i:05d}" for i in range(10_000)]


def _chi2(observed: list[int], expected: list[float]) -> float:
    return sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))


def test_the_arm_is_the_documented_hash_so_anyone_can_recompute_it() -> None:
    exp = Experiment("pilot", 0.3, "s1")
    for rid in IDS[:200]:
        u = int.from_bytes(hashlib.sha256(f"acme\x1fpilot\x1fs1\x1f{rid}".encode()).digest()[:8], "big")
        assert assign_arm("acme", exp, rid) == ("control" if u / 2**64 < 0.3 else "treatment")


def test_the_arm_is_deterministic_and_depends_on_org_name_seed_and_run() -> None:
    exp = Experiment("pilot", 0.5, "s")
    arms = [assign_arm("acme", exp, r) for r in IDS[:500]]
    assert arms == [assign_arm("acme", exp, r) for r in IDS[:500]]
    for other in (
        ("other", exp),
        ("acme", Experiment("pilot2", 0.5, "s")),
        ("acme", Experiment("pilot", 0.5, "t")),
    ):
        assert [assign_arm(other[0], other[1], r) for r in IDS[:500]] != arms


@pytest.mark.parametrize("holdout", [0.5, 0.2, 0.05])
def test_arms_are_balanced_over_ten_thousand_ids(holdout: float) -> None:
    exp = Experiment("balance", holdout, "seed")
    control = sum(assign_arm("acme", exp, r) == "control" for r in IDS)
    n = len(IDS)
    stat = _chi2([control, n - control], [n * holdout, n * (1 - holdout)])
    assert stat < CHI2_1DF_P01, (control, stat)


def test_the_hash_is_uniform_over_ten_buckets() -> None:
    counts = [0] * 10
    for r in IDS:
        key = f"acme\x1fu\x1f\x1f{r}".encode()
        counts[int(int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64 * 10)] += 1
    assert _chi2(counts, [1000.0] * 10) < CHI2_9DF_P01


def test_holdout_zero_has_no_control_runs_and_holdout_is_capped_at_a_half() -> None:
    assert {assign_arm("a", Experiment("x", 0.0), r) for r in IDS[:300]} == {"treatment"}
    with pytest.raises(InvalidExperiment, match="holdout"):
        parse({"name": "x", "holdout": 0.51})
    for bad, what in [
        ({"name": "", "holdout": 0.1}, "name"),
        ({"name": "x" * 65, "holdout": 0.1}, "name"),
        ({"name": "x", "holdout": True}, "holdout"),
        ({"name": "x", "holdout": -0.1}, "holdout"),
        ({"name": "x", "holdout": 0.1, "seed": 3}, "seed"),
        ({"name": "x", "holdout": 0.1, "salt": "s"}, "unknown field"),
        ([], "object"),
    ]:
        with pytest.raises(InvalidExperiment, match=what):
            parse(bad)


def test_an_orgs_entry_wins_and_null_opts_it_out_and_the_run_start_wins_over_both() -> None:
    exps = Experiments.parse(
        {"name": "all", "holdout": 0.1}, {"acme": {"name": "acme-pilot", "holdout": 0.5}, "optout": None}
    )
    assert exps.for_org("other") == Experiment("all", 0.1)
    assert exps.for_org("acme") == Experiment("acme-pilot", 0.5)
    assert exps.for_org("optout") is None
    assert exps.resolve({"name": "mine", "holdout": 0.2}, "optout") == Experiment("mine", 0.2)
    assert exps.resolve(None, "acme") == Experiment("acme-pilot", 0.5)


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("RB_EXPERIMENT", '{"name": "p", "holdout": 0.6}'),
        ("RB_EXPERIMENT", "not json"),
        ("RB_ORG_EXPERIMENT", '{"acme": {"name": "p"}}'),
        ("RB_ORG_EXPERIMENT", "[1]"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_variable(env: str, value: str) -> None:
    with pytest.raises(SettingsError) as exc:
        Settings.from_env({env: value})
    assert env in str(exc.value) and "\n" not in str(exc.value)


def test_the_settings_reach_the_policy_the_worker_and_replay_load() -> None:
    s = Settings.from_env(
        {"RB_EXPERIMENT": '{"name": "p", "holdout": 0.25, "seed": "x"}', "RB_ORG_EXPERIMENT": '{"b": null}'}
    )
    pol = load_policy(s)
    assert pol.experiments.for_org("a") == Experiment("p", 0.25, "x")
    assert pol.experiments.for_org("b") is None


# -- through the core (replay: the worker's pipeline) ------------------------------------


EXP = {"name": "pilot", "holdout": 0.5, "seed": "t"}


def _replayer(policy: Policy | None = None) -> Replayer:
    return Replayer(sem=semantics(), policy=policy, clock=lambda: 1_767_225_600.0)


def _looping(run_id: str, **start: Any) -> list[bytes]:
    task, steps = trajectory("looping", 30, 1)
    lines = [b(run_start(run_id, task=task, model="own-model", **start))]
    for k, payload in enumerate(steps, start=1):
        ev = {"type": "step", "schema_version": 1, "run_id": run_id, "step": k, "ts": 1_700_000_000.0 + k}
        lines.append(b({**ev, **payload}))
    lines.append(b(run_finish(run_id)))
    return lines


def _ids(arm: str, n: int) -> list[str]:
    exp = Experiment("pilot", 0.5, "t")
    return [r for r in (f"r{i}" for i in range(200)) if assign_arm("default", exp, r) == arm][:n]


def test_a_control_run_gets_no_steering_while_its_shadow_does() -> None:
    (rid,) = _ids("control", 1)
    rp = _replayer()
    decisions = [d for d, dl in rp.run(_looping(rid, experiment=EXP)) if d is not None]
    assert decisions and all(d["arm"] == "control" for d in decisions)
    for d in decisions:
        assert d["model"] == "own-model" and not d["inject"] and d["injection_text"] is None
        assert d["injections"] == [] and d["action"] == "continue" and d["action_reason"] is None
        assert "taint" not in d and "sanctioned" not in d
    # evaluated in full: the monitors fired, and the state evolved from what would have been sent
    assert any(d["monitors"]["fired"] for d in decisions)
    st = rp.states[rid]
    assert st.config.arm == "control" and st.config.experiment == "pilot"
    assert st.injections_by_source.get("monitor", 0) > 0
    assert any(e["injection_sources"] for e in st.step_log_entries())  # the step log: would-be
    assert compliance.summary(st)["semantic_loop"]["ignored"] > 0  # the looping agent went on by itself


def test_a_treatment_run_is_steered_exactly_as_a_run_in_no_experiment_except_for_arm() -> None:
    (rid,) = _ids("treatment", 1)
    with_exp = [d for d, _ in _replayer().run(_looping(rid, experiment=EXP)) if d is not None]
    plain = [d for d, _ in _replayer().run(_looping(rid)) if d is not None]
    assert all(d.pop("arm") == "treatment" for d in with_exp)
    assert all("arm" not in d for d in plain)
    assert with_exp == plain
    assert any(d["inject"] for d in plain)


def test_the_shadow_state_is_the_treatment_state_and_only_the_sent_decision_differs() -> None:
    (rid,) = _ids("control", 1)
    treat = Experiments.parse({"name": "pilot", "holdout": 0.0, "seed": "t"})  # every run treatment
    ctrl = _replayer()
    list(ctrl.run(_looping(rid, experiment=EXP)))
    rp = _replayer(Policy().with_experiments(treat))
    list(rp.run(_looping(rid)))
    a, c = rp.states[rid], ctrl.states[rid]
    assert a.config.arm == "treatment" and c.config.arm == "control"
    for field in ("step_log", "injections_by_source", "rung", "ignored", "monitor_injections", "compliance"):
        assert getattr(a, field) == getattr(c, field), field


def test_a_resent_decision_of_a_control_run_is_the_masked_one() -> None:
    (rid,) = _ids("control", 1)
    rp = _replayer()
    lines = _looping(rid, experiment=EXP)[:-1]
    sent = [rp.feed(line)[0] for line in lines]
    again, _ = rp.feed(lines[-1])  # a redelivered copy of the last step
    assert again == sent[-1] and again is not None and again["injections"] == []
    fresh = _replayer()
    first, _ = fresh.feed(lines[0])
    copy, _ = fresh.feed(lines[0])  # a redelivered run_start: decision 0 again, as first sent
    assert copy == first and copy is not None and copy["arm"] == "control"


def test_the_org_setting_puts_runs_in_an_experiment_and_the_run_start_overrides_it() -> None:
    pol = Policy().with_experiments(Experiments.parse({"name": "org", "holdout": 0.5}))
    rp = _replayer(pol)
    d0, _ = rp.feed(b(run_start("x1")))
    assert d0 is not None and d0["arm"] == assign_arm("default", Experiment("org", 0.5), "x1")
    assert rp.states["x1"].config.experiment == "org"
    d1, _ = rp.feed(b(run_start("x2", experiment={"name": "own", "holdout": 0.0})))
    assert d1 is not None and d1["arm"] == "treatment" and rp.states["x2"].config.experiment == "own"


@pytest.mark.parametrize(
    ("exp", "reason", "where"),
    [
        ({"name": "p", "holdout": 0.7}, "schema_violation", "holdout"),
        ({"name": "p"}, "schema_violation", "holdout"),
        ({"name": "", "holdout": 0.1}, "schema_violation", "name"),
        ({"name": "p", "holdout": 0.1, "salt": 1}, "schema_violation", "salt"),
        ("pilot", "schema_violation", "experiment"),
    ],
)
def test_a_bad_experiment_is_dead_lettered_with_a_reason(exp: Any, reason: str, where: str) -> None:
    d, dl = _replayer().feed(b(run_start("bad", experiment=exp)))
    assert d is None and dl is not None
    assert dl["reason"] == reason and where in dl["detail"], dl["detail"]


def test_a_repeated_run_start_with_another_experiment_is_a_conflict() -> None:
    rp = _replayer()
    rp.feed(b(run_start("c1", experiment=EXP)))
    _, dl = rp.feed(b(run_start("c1", experiment={**EXP, "name": "other"})))
    assert dl is not None and dl["reason"] == "config_conflict" and "experiment" in dl["detail"]


def test_mask_keeps_the_evaluation_and_drops_every_steer() -> None:
    d: Any = {
        "model": "big",
        "inject": True,
        "injection_text": "t",
        "injections": [{"source": "monitor", "text": "t", "pattern_id": None, "similarity": None}],
        "action": "stop",
        "action_reason": {"monitor": "loop"},
        "taint": [{"h": "0" * 16}],
        "sanctioned": [{"step": 1}],
        "routing_reason": "upgrade: x",
        "monitors": {"fired": ["loop"]},
        "arm": "control",
    }
    m = mask(d, "own")
    assert orjson.loads(orjson.dumps(m)) == {
        "model": "own",
        "inject": False,
        "injection_text": None,
        "injections": [],
        "action": "continue",
        "action_reason": None,
        "monitors": {"fired": ["loop"]},
        "arm": "control",
    }
    assert d["taint"] and d["action"] == "stop"  # the shadow is not changed
