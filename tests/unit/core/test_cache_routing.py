"""Cache-aware routing (core.routing, issue 39): each condition of the rule, and determinism."""

from __future__ import annotations

from typing import Any

from streams.core import routing
from streams.core.prices import PriceTable, parse_prices

PRICES = parse_prices(
    {
        "models": {
            "big": {"provider": "anthropic", "input": 3.0, "output": 15.0},
            "small": {"provider": "anthropic", "input": 1.0, "output": 5.0},
            "huge": {"provider": "anthropic", "input": 5.0, "output": 25.0},
            "other": {"provider": "openai", "input": 0.15, "output": 0.6},
        }
    }
)
ROUTING = {"FAST": "small", "SLOW": "huge"}


def step(
    n: int, *, obs: int = 400, thought: int = 400, ts: float | None = None, action: str | None = "bash"
) -> dict[str, Any]:
    return {
        "run_id": "r",
        "step": n,
        "thought": "t" * thought,
        "action": action,
        "action_input": "ls",
        "observation": "o" * obs,
        "ts": float(n * 2) if ts is None else ts,
    }


def drive(
    states: list[str], routing_map: dict[str, str] = ROUTING, prices: PriceTable = PRICES, **kw: Any
) -> list[routing.Routed]:
    mem = routing.start("big", "task " * 50, 0.0)
    out = []
    for n, state in enumerate(states, start=1):
        ev = kw.get("events", {}).get(n) or step(n, **kw.get("step_kw", {}))
        mem = routing.observe(mem, ev, routing_map, "big", prices)
        r, mem = routing.route(mem, state, ev, routing_map, "big", prices, kw.get("cross", False))
        out.append(r)
    return out


def test_a_long_cheap_stint_early_switches_down_and_back() -> None:
    got = drive(["NORMAL", "FAST", "FAST", "FAST", "FAST", "NORMAL"])
    assert got[1].code == "downgrade" and got[1].model == "small"
    assert [g.code for g in got[2:5]] == ["same"] * 3
    assert got[5].code == "return" and got[5].model is None
    assert "cache warm" in got[5].reason


def test_a_switch_deep_into_a_run_that_the_stint_cannot_repay_is_declined() -> None:
    # 60 steps of 2,000-token observations: a 3-call stint cannot repay the cold write
    got = drive(["NORMAL"] * 60 + ["FAST"], step_kw={"obs": 8000, "thought": 40})
    assert got[-1].code == "declined"
    assert got[-1].model is None  # the home model (the caller keeps its own)
    assert "cache writes" in got[-1].reason


def test_the_runs_own_long_stints_make_a_later_switch_pay() -> None:
    long_stints = ["NORMAL"] + (["FAST"] * 12 + ["NORMAL"]) * 2 + ["NORMAL"] * 10 + ["FAST"]
    prior_only = ["NORMAL"] * 37 + ["FAST"]
    sizes = {"obs": 3000, "thought": 200}
    assert drive(long_stints, step_kw=sizes)[-1].code == "downgrade"
    assert drive(prior_only, step_kw=sizes)[-1].code == "declined"


def test_an_upgrade_is_named_as_routed_and_reported_apart() -> None:
    got = drive(["NORMAL", "SLOW", "SLOW", "NORMAL"])
    assert got[1].code == "upgrade" and got[1].model == "huge"
    assert got[2].code == "same"
    assert got[3].code == "return"


def test_no_switch_across_providers_in_the_middle_of_a_tool_exchange() -> None:
    routing_map = {"FAST": "other"}
    held = drive(["NORMAL", "FAST"], routing_map)
    assert held[1].code == "held" and held[1].model is None
    assert "tool exchange" in held[1].reason
    allowed = drive(["NORMAL", "FAST"], routing_map, cross=True)
    assert allowed[1].code == "downgrade" and allowed[1].model == "other"
    # a step without a tool call ends the exchange: the switch is free to happen
    no_tool = drive(["NORMAL", "FAST"], routing_map, events={2: step(2, action=None)})
    assert no_tool[1].code == "downgrade"


def test_a_cold_home_cache_is_reported_on_the_way_back() -> None:
    events = {n: step(n, ts=float(n)) for n in range(1, 5)}
    events[5] = step(5, ts=2000.0)  # the home model's cache expired during the stint
    got = drive(["NORMAL", "FAST", "FAST", "FAST", "NORMAL"], events=events)
    assert got[4].code == "return" and "cache cold" in got[4].reason


def test_without_a_price_table_the_prior_ratios_route_and_say_so() -> None:
    got = drive(["NORMAL", "FAST"], prices=PriceTable())
    assert got[1].code == "downgrade"
    assert "units (prior" in got[1].reason


def test_routing_is_deterministic_and_uses_event_time_only() -> None:
    states = ["NORMAL", "FAST", "FAST", "NORMAL", "SLOW", "NORMAL", "FAST", "NORMAL"]
    assert drive(states) == drive(states)


def test_served_model_from_the_step_corrects_what_routing_believes() -> None:
    mem = routing.start("big", "task", 0.0)
    mem = routing.observe(mem, {**step(1), "served_model": "small"}, ROUTING, "big", PRICES)
    assert mem["on"] == "small"
    assert "small" in mem["used"]


def test_usage_when_reported_replaces_the_text_estimate() -> None:
    mem = routing.start("big", "task", 0.0)
    ev = {**step(1), "usage": {"input_tokens": 100, "cache_read_tokens": 50_000, "output_tokens": 10}}
    mem = routing.observe(mem, ev, ROUTING, "big", PRICES)
    assert mem["ctx"] >= 50_100


def test_the_memory_keeps_at_most_five_models() -> None:
    mem = routing.start("big", "task", 0.0)
    for n in range(1, 12):
        mem = routing.observe(mem, {**step(n), "served_model": f"m{n}"}, ROUTING, "big", PRICES)
    assert len(mem["used"]) == 5
