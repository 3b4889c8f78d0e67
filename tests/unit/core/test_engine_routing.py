"""The engine names the model cache-aware routing chose, says why, and routes as before for
runs without model_routing (issue 39)."""

from __future__ import annotations

from typing import Any

import orjson

from streams.core.policy import Policy
from streams.core.prices import parse_prices
from streams.core.state import TraceState
from streams.shared.contract import load_schema
from tests.driving import sealed
from tests.factories import b, run_start, step

PRICES = parse_prices(
    {"models": {"big": {"input": 3.0, "output": 15.0}, "small": {"input": 1.0, "output": 5.0}}}
)
OFF = {"monitors_enabled": False, "e_traces_enabled": False}


def _drive(start: dict[str, Any], difficulties: list[float], policy: Policy) -> list[dict[str, Any]]:
    states: dict[str, TraceState] = {}
    out = []
    # long thoughts: output is where a cheaper model saves most, so the switch pays
    steps = (
        step("r", n, difficulty=d, ts=float(n), thought="x" * 6000) for n, d in enumerate(difficulties, 1)
    )
    for ev in [start, *steps]:
        s = sealed(b(ev), states.get, policy=policy)
        assert s.decision is not None and s.state is not None and s.decision_bytes is not None
        states["r"] = s.state
        out.append(orjson.loads(s.decision_bytes))
    return out


def test_a_routed_run_says_why_and_the_decisions_match_the_schema() -> None:
    import jsonschema

    start = run_start("r", model="big", model_routing={"FAST": "small"}, ts=0.0, **OFF)
    got = _drive(start, [0.5] + [0.05] * 8 + [0.5] * 3, Policy().with_prices(PRICES))
    schema = load_schema("decision")
    for d in got:
        jsonschema.validate(d, schema)
        assert d["routing_reason"]
    fast = [d for d in got if d["fsm_state"] == "FAST"]
    assert fast and all(d["model"] == "small" for d in fast)
    assert fast[0]["routing_reason"].startswith("downgrade:")


def test_a_run_without_model_routing_has_no_routing_reason() -> None:
    start = run_start("r", model="big", ts=0.0, **OFF)
    got = _drive(start, [0.5] + [0.05] * 8, Policy().with_prices(PRICES))
    assert all("routing_reason" not in d and d["model"] is None for d in got)


def test_replaying_the_same_events_gives_the_same_decisions() -> None:
    start = run_start("r", model="big", model_routing={"FAST": "small", "SLOW": "big2"}, ts=0.0, **OFF)
    diffs = [0.5] + [0.05] * 6 + [0.95] * 6 + [0.05] * 6
    one = _drive(start, diffs, Policy())
    two = _drive(start, diffs, Policy())
    strip = [{k: v for k, v in d.items() if k != "processed_ts"} for d in one]
    assert strip == [{k: v for k, v in d.items() if k != "processed_ts"} for d in two]
    assert any(str(d.get("routing_reason", "")).startswith("upgrade:") for d in one)
