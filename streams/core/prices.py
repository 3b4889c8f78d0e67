"""Model prices as data: what a call costs under a provider's prefix cache.

Pure (no I/O): `streams.price_file` reads the user's price table (`RB_PRICES_FILE`) and hands the
parsed `PriceTable` to the core through `Policy.prices`, so the worker and `rb-streams replay`
route with the same numbers. No price is written here: a model missing from the table (or a
deployment without a table) is priced by `PRIOR`, which holds ratios, not dollars (see
docs/difficulty.md, "Routing that counts the cache").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# Anthropic's 5-minute prompt cache: a write costs 1.25x the input price, a read 0.1x. A table
# entry that leaves cache_write / cache_read out gets these ratios of its own input price.
CACHE_WRITE_RATIO = 1.25
CACHE_READ_RATIO = 0.1
DEFAULT_TTL_S = 300.0
MODEL_NAME_MAX = 256
MODELS_MAX = 1000
# Ceilings on what a table may say (issue 48: a price of 1e300 made a run's cost infinite, stored
# as null, and every later event of the run an internal error). No real model comes near them:
# the dearest list prices are under $200 per million tokens, and a provider's cache lives for
# minutes to hours. With them and routing's token clamp every cost routing adds up is finite.
PRICE_MAX = 10_000.0  # USD per million tokens, for each of the four prices
TTL_MAX_S = 30 * 86_400.0  # a cache's lifetime: 30 days


class PriceError(ValueError):
    """A price table that cannot be used; the message is one line naming the entry."""


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Prices per million tokens, the cache's lifetime, and who serves the model."""

    input: float
    cache_write: float
    cache_read: float
    output: float
    ttl_s: float = DEFAULT_TTL_S
    provider: str | None = None

    def scaled(self, k: float) -> ModelPrice:
        """The same model at `k` times the price (the prior's relative models)."""
        return ModelPrice(
            self.input * k,
            self.cache_write * k,
            self.cache_read * k,
            self.output * k,
            self.ttl_s,
            self.provider,
        )


# The prior for a model the table does not price (or every model, without a table): the run's
# own model is the unit (input 1, write 1.25, read 0.1, output 5: Anthropic's ratios), a model
# FAST routes to costs 1/3 of it and a model SLOW or SKIP routes to (SPEC: SKIP is SLOW's
# model under another label) costs 5/3 of it:
# the ratios of one provider's small, mid and large list prices. Only ratios matter to routing.
PRIOR_UNIT = ModelPrice(1.0, CACHE_WRITE_RATIO, CACHE_READ_RATIO, 5.0, DEFAULT_TTL_S, None)
PRIOR_STATE_RATIO: Mapping[str, float] = MappingProxyType(
    {"FAST": 1 / 3, "SKIP": 5 / 3, "NORMAL": 1.0, "SLOW": 5 / 3}
)


@dataclass(frozen=True)
class PriceTable:
    """Model id -> price; `cost` names the fleet models `rb-streams cost` evaluates with."""

    models: Mapping[str, ModelPrice] = field(default_factory=lambda: MappingProxyType({}))
    cost: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def get(self, model: str | None) -> ModelPrice | None:
        return None if not model else self.models.get(model)

    def __bool__(self) -> bool:
        return bool(self.models)


NO_PRICES = PriceTable()
_FIELDS = ("input", "cache_write", "cache_read", "output", "cache_ttl_s", "provider")
_COST_KEYS = ("model", "fast", "slow")


def _number(v: Any, where: str, ceiling: float = PRICE_MAX, unit: str = "USD per million tokens") -> float:
    """A finite number in [0, ceiling], or PriceError naming `where` (an integer too large for a
    float, TOML's `inf`/`nan` and JSON's `Infinity`/`NaN` included)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise PriceError(f"{where}: expected a number >= 0, got {v!r}"[:300])
    if isinstance(v, float) and not math.isfinite(v):
        raise PriceError(f"{where}: expected a finite number >= 0, got {v!r}")
    if v < 0:
        raise PriceError(f"{where}: expected a number >= 0, got {v!r}"[:300])
    if v > ceiling:
        shown = f"{v:.3g}" if isinstance(v, float) or v < 10**20 else f"an integer of {len(str(v))} digits"
        raise PriceError(f"{where}: {shown} is above the ceiling of {ceiling:g} {unit}"[:300])
    return float(v)


def parse_model(name: str, raw: Any) -> ModelPrice:
    """One table entry, checked: input and output required, cache prices default to Anthropic's
    ratios of the input price, the TTL to 5 minutes."""
    where = f"models.{name!r}"
    if not isinstance(raw, Mapping):
        raise PriceError(f"{where}: expected a table of prices, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise PriceError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(_FIELDS)})"[:300])
    for key in ("input", "output"):
        if key not in raw:
            raise PriceError(f"{where}: missing {key!r} (price per million tokens)")
    inp = _number(raw["input"], f"{where}.input")
    ttl = _number(raw.get("cache_ttl_s", DEFAULT_TTL_S), f"{where}.cache_ttl_s", TTL_MAX_S, "seconds")
    if ttl <= 0:
        raise PriceError(f"{where}.cache_ttl_s: must be > 0, got {ttl!r}")
    provider = raw.get("provider")
    if provider is not None and (not isinstance(provider, str) or not provider.strip()):
        raise PriceError(f"{where}.provider: expected a non-empty string, got {provider!r}"[:300])
    return ModelPrice(
        input=inp,
        # a cache price left out is derived from the input price, so it is checked only when given
        cache_write=_number(raw["cache_write"], f"{where}.cache_write")
        if "cache_write" in raw
        else inp * CACHE_WRITE_RATIO,
        cache_read=_number(raw["cache_read"], f"{where}.cache_read")
        if "cache_read" in raw
        else inp * CACHE_READ_RATIO,
        output=_number(raw["output"], f"{where}.output"),
        ttl_s=ttl,
        provider=provider.strip().lower() if provider else None,
    )


def parse_prices(raw: Any) -> PriceTable:
    """`{"models": {id: {...}}, "cost": {"model", "fast", "slow"}}` -> PriceTable, or PriceError."""
    if not isinstance(raw, Mapping):
        raise PriceError(f"expected a table with a 'models' section, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {"models", "cost"})
    if unknown:
        raise PriceError(f"unknown section {unknown[0]!r} (known: models, cost)"[:300])
    models = raw.get("models")
    if not isinstance(models, Mapping) or not models:
        raise PriceError("no 'models' section: price at least one model")
    if len(models) > MODELS_MAX:
        raise PriceError(f"'models': {len(models)} entries, at most {MODELS_MAX}")
    parsed: dict[str, ModelPrice] = {}
    for name, entry in models.items():
        if not isinstance(name, str) or not name.strip() or len(name) > MODEL_NAME_MAX:
            raise PriceError(f"models: a model id must be 1-{MODEL_NAME_MAX} characters, got {name!r}"[:300])
        parsed[name] = parse_model(name, entry)
    cost = raw.get("cost") or {}
    if not isinstance(cost, Mapping):
        raise PriceError(f"cost: expected a table, got {type(cost).__name__}")
    for key, value in cost.items():
        if key not in _COST_KEYS:
            raise PriceError(f"cost: unknown key {key!r} (known: {', '.join(_COST_KEYS)})"[:300])
        if value not in parsed:
            raise PriceError(f"cost.{key}: {value!r} is not a model of the table"[:300])
    return PriceTable(MappingProxyType(parsed), MappingProxyType({str(k): str(v) for k, v in cost.items()}))
