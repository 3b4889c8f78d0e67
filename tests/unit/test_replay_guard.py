"""The guard's verdict reaches the decision through the pipeline: a switched treatment run is
sent unsteered (its state still evolves as steered), and nothing else changes."""

from __future__ import annotations

from typing import Any

from streams.core.guard import ALL
from streams.replay import Replayer
from tests.factories import b, run_start, step
from tests.models import semantics

# holdout 0: every run of the experiment is in the treatment arm
TREATMENT = {"name": "g", "holdout": 0.0, "seed": "s"}


def looping_run(experiment: dict[str, Any] | None) -> list[bytes]:
    start = run_start("r", model="own-model", **({"experiment": experiment} if experiment else {}))
    evs: list[dict[str, Any]] = [start]
    for i in range(1, 13):
        evs.append(step("r", i, action="search", action_input={"q": "same"}, observation="no results"))
    return [b(e) for e in evs]


def decisions(rp: Replayer, experiment: dict[str, Any] | None = TREATMENT) -> list[dict[str, Any]]:
    return [dict(d) for d, _ in rp.run(looping_run(experiment)) if d]


def with_verdict(off: frozenset[str]) -> Replayer:
    rp = Replayer(sem=semantics())
    rp.pipeline.observe_only = lambda org, exp: off
    return rp


def test_a_run_switched_off_gets_no_steering_and_its_state_evolves_as_steered() -> None:
    steered = Replayer(sem=semantics())
    plain = decisions(steered)
    assert any(d["inject"] for d in plain)  # the loop is told: the check below is not vacuous
    off = with_verdict(frozenset({ALL}))
    masked = decisions(off)
    assert [d["step"] for d in masked] == [d["step"] for d in plain]
    assert not any(d["inject"] or d["injections"] for d in masked)
    assert all(d["action"] == "continue" and d["model"] in ("own-model", None) for d in masked)
    assert [d["monitors"] for d in masked] == [d["monitors"] for d in plain]  # still evaluated
    a, z = steered.states["r"], off.states["r"]
    assert (a.monitor_injections, a.rung) == (z.monitor_injections, z.rung)


def test_one_monitor_switched_masks_only_when_it_fired() -> None:
    plain = decisions(Replayer(sem=semantics()))
    fired = {m for d in plain for m in d["monitors"]["fired"]}
    assert fired
    other = decisions(with_verdict(frozenset({"not-a-monitor-that-fired"})))
    assert [d["injections"] for d in other] == [d["injections"] for d in plain]
    masked = decisions(with_verdict(frozenset(fired)))
    assert not any(i["source"] == "monitor" for d in masked for i in d["injections"])


def test_runs_without_an_experiment_are_never_masked_by_the_guard() -> None:
    # a run in no experiment has no arm: the verdict is not applied
    def plain(ds: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in d.items() if k != "processed_ts"} for d in ds]

    steered = plain(decisions(Replayer(sem=semantics()), None))
    assert any(d["inject"] for d in steered)
    assert plain(decisions(with_verdict(frozenset({ALL})), None)) == steered
