"""The outcome of a run (issue 50 item 2): counters kept in the state, the record made from them.

Through the real Engine; the record must be a pure function of the final state (the same bytes
whatever the processing clock), valid against its schema, and bounded however hostile the run."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from streams.core.outcome import (
    KEYS_KEPT,
    MODELS_KEPT,
    OTHER,
    count_call,
    encode,
    outcome_label,
    outcome_record,
)
from streams.core.policy import Policy
from streams.core.prices import ModelPrice, PriceTable
from streams.core.state import RunConfig, TraceState
from streams.shared.contract import load_schema
from tests.driving import sealed
from tests.factories import b, run_finish, run_start, step
from tests.models import semantics

SEM = semantics()
T0 = 1_767_225_600.0
CHECK = Draft202012Validator(load_schema("outcome"))
PRICES = PriceTable(
    {
        "home-model": ModelPrice(3.0, 3.75, 0.3, 15.0),
        "fast-model": ModelPrice(1.0, 1.25, 0.1, 5.0),
    }
)


class Run:
    """One run through the engine (its states kept as the worker's table would)."""

    def __init__(self, policy: Policy | None = None, now: float = 1.0, **start: Any) -> None:
        self.policy, self.now = policy, now
        self.table: dict[str, TraceState] = {}
        self.feed(run_start("r", ts=T0, **start))

    def feed(self, ev: dict[str, Any]) -> Any:
        self.now += 0.5
        res = sealed(b(ev), self.table.get, None, self.now, SEM, policy=self.policy)
        assert res.rejection is None and res.state is not None
        self.table["r"] = res.state
        return res

    @property
    def state(self) -> TraceState:
        return self.table["r"]


def _loop(run: Run, n: int, start: int = 1) -> None:
    for k in range(start, start + n):
        run.feed(
            step(
                "r",
                k,
                thought="Run it again.",
                action="bash",
                action_input={"command": "python app.py"},
                observation="Traceback ...\nKeyError: 'user'",
                observation_is_error=True,
                ts=T0 + 2 * k,
            )
        )


def test_reported_usage_is_priced_as_reported_on_the_model_each_call_went_to() -> None:
    run = Run(Policy(prices=PRICES), model="home-model")
    usage = {"input_tokens": 1000, "cache_read_tokens": 9000, "cache_write_tokens": 500, "output_tokens": 200}
    for k in (1, 2):
        run.feed(step("r", k, usage=usage, ts=T0 + k))
    run.feed({**run_finish("r"), "ts": T0 + 10})
    rec = outcome_record(run.state, "run_finish")
    CHECK.validate(rec)
    assert rec["model_calls"] == {"home-model": 2}
    assert rec["tokens"] == {"input": 3000, "output": 400, "cached": 18000}
    one = (1000 * 3.0 + 500 * 3.75 + 9000 * 0.3 + 200 * 15.0) / 1e6
    assert rec["cost_usd"] == pytest.approx(2 * one) and rec["cost_estimated"] is False
    assert rec["wall_s"] == 10.0 and rec["steps"] == 2 and rec["outcome"] == "success"


def test_each_call_counts_on_the_model_the_decision_before_it_named() -> None:
    # model_routing names fast-model in FAST: the call after a FAST decision went there
    run = Run(Policy(prices=PRICES), model="home-model", model_routing={"FAST": "fast-model"})
    for k in range(1, 13):
        run.feed(step("r", k, thought="ok", action="ls", observation="a", difficulty=0.05, ts=T0 + k))
    st = run.state
    # calls 1..12 were made on what decisions 0..11 named (the step log keeps them all here)
    named = [e[3] or "home-model" for e in st.step_log[:12]]
    assert st.model_calls == dict(Counter(named)) and "fast-model" in named
    assert set(st.model_calls) <= {"home-model", "fast-model"}


def test_a_call_without_usage_is_estimated_and_said_to_be() -> None:
    run = Run(Policy(prices=PRICES), model="home-model")
    run.feed(step("r", 1, thought="x" * 400, observation="y" * 4000, tokens=None, ts=T0 + 1))
    run.feed(step("r", 2, thought="x" * 400, observation="y" * 4000, tokens=None, ts=T0 + 2))
    rec = outcome_record(run.state, "evicted")
    assert rec["cost_estimated"] is True and rec["cost_usd"] > 0
    assert rec["tokens"]["cached"] > 0  # the second call reads what the first one read
    assert rec["outcome"] == "abandoned" and rec["ended_by"] == "evicted"
    CHECK.validate(rec)


def test_a_call_on_a_model_the_table_does_not_price_costs_nothing_and_is_marked() -> None:
    run = Run(Policy(prices=PRICES), model="unpriced-model")
    run.feed(step("r", 1, usage={"input_tokens": 10, "output_tokens": 5}))
    rec = outcome_record(run.state, "evicted")
    assert rec["cost_usd"] == 0.0 and rec["cost_estimated"] is True
    assert rec["model_calls"] == {"unpriced-model": 1}


def test_a_looping_run_counts_its_interventions_first_fires_climbs_and_stop() -> None:
    run = Run(model_routing={"SLOW": "big-model"})
    _loop(run, 20)
    run.feed({**run_finish("r", "failure: stopped_by_steering"), "ts": T0 + 100})
    st = run.state
    rec = outcome_record(st, "run_finish")
    CHECK.validate(rec)
    assert rec["first_fire"]["semantic_loop"] >= 1
    assert rec["interventions"]["monitor"] == st.injections_by_source["monitor"] >= 1
    assert rec["interventions"]["semantic_loop"] >= 1
    assert rec["escalations"] == 1 and rec["stops"] == 1  # one climb each, not one per step
    assert outcome_label(rec["outcome"]) == "stopped_by_steering"


def test_the_record_is_the_same_bytes_whatever_the_processing_clock() -> None:
    recs = []
    for now in (1.0, 5_000_000.0):
        run = Run(now=now, model="home-model")
        _loop(run, 6)
        run.feed({**run_finish("r"), "ts": T0 + 14})
        recs.append(encode(outcome_record(run.state, "run_finish")))
    assert recs[0] == recs[1]
    assert orjson.loads(recs[0])["wall_s"] == 14.0  # the events' clock, from the run_start's ts


def test_a_state_written_before_the_counters_decodes_and_reports_zeros() -> None:
    run = Run(model="home-model")
    _loop(run, 2)
    old = orjson.loads(orjson.dumps(run.state))  # the whole form earlier versions wrote
    for k in (
        "model_calls",
        "usage",
        "cost_usd",
        "cost_estimated",
        "interventions",
        "escalations",
        "stops",
        "first_fire",
        "next_model",
        "first_ts",
    ):
        del old[k]
    st = TraceState.from_dict(old)
    rec = outcome_record(st, "evicted")
    CHECK.validate(rec)
    assert rec["model_calls"] == {} and rec["tokens"] == {"input": 0, "output": 0, "cached": 0}
    # and the run goes on from it, counting from there
    st2 = st.evolve(**count_call(st, step("r", 3), PriceTable()))
    assert st2.model_calls == {"home-model": 1}


def test_hostile_stored_counters_are_repaired_not_failed_on() -> None:
    run = Run(model="home-model")
    d = orjson.loads(run.state.encode())
    d.update(cost_usd=None, usage=["x", -1], escalations=-5, first_ts="soon")
    st = TraceState.from_dict(d)
    assert st.cost_usd == 0.0 and st.usage == [] and st.escalations == 0 and st.first_ts is None
    CHECK.validate(outcome_record(st, "evicted"))


def test_models_and_monitors_kept_per_run_are_capped() -> None:
    run = Run(model="home-model")
    st = run.state
    for i in range(3 * MODELS_KEPT):
        st = st.evolve(next_model=f"model-{i}" + "m" * 300)
        st = st.evolve(**count_call(st, step("r", i + 1), PriceTable()))
    assert len(st.model_calls) == MODELS_KEPT + 1 and st.model_calls[OTHER] == 2 * MODELS_KEPT
    assert all(len(m) <= 256 for m in st.model_calls)
    st = st.evolve(interventions={f"m{i}": 1 for i in range(KEYS_KEPT)})
    CHECK.validate(outcome_record(st, "evicted"))


def test_run_start_without_ts_takes_wall_time_from_the_first_step_with_one() -> None:
    run = Run(model="home-model")
    d = orjson.loads(run.state.encode())
    d["started_ts"] = None
    run.table["r"] = TraceState.from_dict(d)
    run.feed(step("r", 1, ts=T0 + 4))
    run.feed(step("r", 2, ts=T0 + 9))
    assert outcome_record(run.state, "evicted")["wall_s"] == 5.0


def test_outcome_labels_are_the_four_the_metrics_use() -> None:
    assert [outcome_label(o) for o in ("success", "failure", "failure: timeout", "abandoned")] == [
        "success",
        "failure",
        "failure",
        "abandoned",
    ]
    assert outcome_label("failure: stopped_by_steering") == "stopped_by_steering"


def test_ended_by_is_checked() -> None:
    with pytest.raises(ValueError, match="ended_by"):
        outcome_record(Run().state, "crashed")


@dataclass(frozen=True)
class _ArmConfig(RunConfig):
    """A run config with the experiment fields (RunConfig's own once arms are in)."""

    experiment: str | None = None
    arm: str | None = None


def test_a_control_runs_calls_count_on_its_own_model_and_the_record_names_its_arm() -> None:
    run = Run(model="home-model")
    st = run.state.evolve(config=_ArmConfig(model="home-model", experiment="pilot", arm="control"))
    st = st.evolve(next_model="big-model")  # what the unmasked decision named; the agent got its own
    st = st.evolve(**count_call(st, step("r", 1), PriceTable()))
    assert st.model_calls == {"home-model": 1}
    rec = outcome_record(st, "evicted")
    assert (rec["experiment"], rec["arm"]) == ("pilot", "control")
    CHECK.validate(rec)
    treated = st.evolve(config=_ArmConfig(model="home-model", experiment="pilot", arm="treatment"))
    assert treated.evolve(**count_call(treated, step("r", 2), PriceTable())).model_calls == {
        "home-model": 1,
        "big-model": 1,
    }
