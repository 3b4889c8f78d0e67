"""A wait's budget: how long a run may wait on the same call with no change in its result.

Pure settings values (the core's `Defaults` and the loop monitor read them; docs/monitors.md
#waiting-is-not-looping). Past any of its three limits, counted from the call whose result the
wait keeps repeating, the wait is warned as a loop and the escalation ladder judges it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .prices import ModelPrice

WAIT_BUDGET_S = 1200.0  # a wait this long gets advice (RB_WAIT_BUDGET_S), and again each time as long
# A wait whose result has not changed: warned as a loop past this many calls (RB_WAIT_BUDGET_CALLS),
# this many estimated dollars (RB_WAIT_BUDGET_USD) or WAIT_BUDGET_S seconds, whichever comes first.
WAIT_BUDGET_CALLS = 30
WAIT_BUDGET_USD = 1.0
# The price a wait's calls are estimated at when the price table has none for the run's model:
# a mid-range model's list price per million tokens (input, cache write, cache read, output).
WAIT_PRICE = ModelPrice(3.0, 3.75, 0.3, 15.0)


@dataclass(frozen=True, slots=True)
class WaitBudget:
    """How long a wait may go on with no change in its result before it is warned as a loop:
    calls, estimated dollars, seconds (each counted from the call whose result it repeats)."""

    seconds: float = WAIT_BUDGET_S
    calls: int = WAIT_BUDGET_CALLS
    usd: float = WAIT_BUDGET_USD

    def to_wire(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "calls": self.calls, "usd": self.usd}


DEFAULT_BUDGET = WaitBudget()
BUDGET_KEYS = ("seconds", "calls", "usd")
BUDGET_MAX_S = 7 * 86400.0
BUDGET_MAX_CALLS = 100_000
BUDGET_MAX_USD = 1_000_000.0


def parse_budget(raw: Any, where: str, base: WaitBudget = DEFAULT_BUDGET) -> WaitBudget:
    """A budget object ({"seconds", "calls", "usd"}, each optional: `base`'s for the others)
    -> WaitBudget, or ValueError naming the field."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object with {', '.join(BUDGET_KEYS)}")
    unknown = sorted(set(raw) - set(BUDGET_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown field {str(unknown[0])[:60]!r} (known: {', '.join(BUDGET_KEYS)})")
    s, c, u = raw.get("seconds", base.seconds), raw.get("calls", base.calls), raw.get("usd", base.usd)
    if isinstance(s, bool) or not isinstance(s, int | float) or not 0 < s <= BUDGET_MAX_S:
        raise ValueError(f"{where}.seconds must be a number in (0, {BUDGET_MAX_S:.0f}]")
    if type(c) is not int or not 2 <= c <= BUDGET_MAX_CALLS:
        raise ValueError(f"{where}.calls must be an integer in [2, {BUDGET_MAX_CALLS}]")
    if isinstance(u, bool) or not isinstance(u, int | float) or not 0 < u <= BUDGET_MAX_USD:
        raise ValueError(f"{where}.usd must be a number in (0, {BUDGET_MAX_USD:.0f}]")
    return WaitBudget(float(s), c, float(u))
