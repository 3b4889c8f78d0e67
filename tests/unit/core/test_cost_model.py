"""The cost model of `rb-streams cost` (core.cost): Anthropic's prefix cache, per model."""

from __future__ import annotations

from typing import Any

import pytest

from streams.agent.compose import anthropic_request, check_placement
from streams.core.cost import PrefixCache, error_streak_steps, run_cost
from streams.core.prices import parse_prices

PRICES = parse_prices(
    {
        "models": {
            "big": {"input": 3.0, "output": 15.0},
            "small": {"input": 1.0, "output": 5.0, "cache_ttl_s": 300},
        }
    }
)
START = {"run_id": "r", "task": "fix the bug " * 100, "ts": 0.0}


def compose(req: Any, dec: Any, placement: str) -> Any:
    return anthropic_request(req, dec, placement=check_placement(placement))


def steps(n: int, dt: float = 2.0) -> list[dict[str, Any]]:
    return [
        {
            "step": k,
            "thought": "thinking " * 40,
            "action": "bash",
            "action_input": "ls",
            "observation": "x" * 4000,
            "ts": k * dt,
        }
        for k in range(1, n + 1)
    ]


def test_a_prefix_is_read_within_its_ttl_and_written_again_after_it() -> None:
    c = PrefixCache()
    assert c.call("m", [1, 2], [100, 300], [1], 0.0, 300.0) == (0, 300, 0)
    assert c.call("m", [1, 2, 3], [100, 300, 500], [2], 10.0, 300.0) == (300, 200, 0)
    assert c.call("m", [1, 2, 3, 4], [100, 300, 500, 700], [3], 400.0, 300.0) == (0, 700, 0)
    # another model has its own cache
    assert c.call("n", [1, 2], [100, 300], [1], 11.0, 300.0) == (0, 300, 0)


def test_tokens_after_the_last_breakpoint_are_plain_input() -> None:
    c = PrefixCache()
    assert c.call("m", [1, 2, 3], [100, 300, 350], [1], 0.0, 300.0) == (0, 300, 50)


def test_never_switching_reads_the_history_and_writes_each_new_turn() -> None:
    ss = steps(10)
    t = run_cost(START, ss, ["big"] * 10, [None] * 10, PRICES, compose)
    assert t.calls == 10 and t.switches == 0
    assert t.read > 4 * t.write  # a warm cache: mostly reads


def test_steering_at_the_end_costs_its_own_tokens_and_in_the_system_prompt_rewrites_history() -> None:
    ss = steps(20)
    base = run_cost(START, ss, ["big"] * 20, [None] * 20, PRICES, compose)
    texts: list[str | None] = [None] * 20
    texts[10] = "[REASONBLOCKS]\nYou ran the same command three times."
    end = run_cost(START, ss, ["big"] * 20, texts, PRICES, compose, "end")
    system = run_cost(START, ss, ["big"] * 20, texts, PRICES, compose, "system")
    assert end.write == base.write  # the end block sits after the breakpoint
    assert 0 < end.usd - base.usd < 0.01 * base.usd
    assert system.write > base.write + 10_000  # the history after the block written again
    assert system.usd > end.usd


def test_a_short_cheap_stint_deep_in_a_run_costs_more_than_never_switching() -> None:
    ss = steps(40)
    home = ["big"] * 40
    short = [*home[:30], "small", *home[31:]]
    assert (
        run_cost(START, ss, short, [None] * 40, PRICES, compose).usd
        > run_cost(START, ss, home, [None] * 40, PRICES, compose).usd
    )


def test_a_model_the_table_does_not_price_is_an_error_naming_it() -> None:
    with pytest.raises(KeyError, match="nope"):
        run_cost(START, steps(2), ["big", "nope"], [None, None], PRICES, compose)


def test_error_streaks_are_two_or_more_errors_in_a_row() -> None:
    flags = [False, True, False, True, True, True, False, True]
    got = error_streak_steps([{"observation_is_error": f} for f in flags])
    assert got == {3, 4, 5}
