"""The price table file (RB_PRICES_FILE): TOML or JSON, one clear line when it is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.core.prices import PriceError, parse_prices
from streams.price_file import PriceFileError, load_prices

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "prices.example.toml"


def test_the_example_table_loads_and_names_the_fleet_it_evaluates() -> None:
    t = load_prices(EXAMPLE)
    assert t.cost["fast"] in t.models and t.cost["model"] in t.models
    sonnet = t.models["claude-sonnet-4-5"]
    assert sonnet.cache_write == pytest.approx(1.25 * sonnet.input)
    assert sonnet.cache_read == pytest.approx(0.1 * sonnet.input)
    assert sonnet.provider == "anthropic" and sonnet.ttl_s == 300


def test_json_is_read_too_and_cache_prices_default_to_anthropics_ratios(tmp_path: Path) -> None:
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"models": {"m": {"input": 2.0, "output": 8.0}}}))
    m = load_prices(p).models["m"]
    assert (m.cache_write, m.cache_read, m.ttl_s) == (2.5, 0.2, 300.0)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("[models.m]\ninput = 1\n", "missing 'output'"),
        ("[models.m]\ninput = -1\noutput = 1\n", "expected a number >= 0"),
        ("[models.m]\ninput = 1\noutput = 1\nprice = 3\n", "unknown field 'price'"),
        ("[models.m]\ninput = 1\noutput = 1\ncache_ttl_s = 0\n", "must be > 0"),
        ("[cost]\nmodel = 'm'\n", "no 'models' section"),
        ("[models.m]\ninput = 1\noutput = 1\n[cost]\nfast = 'x'\n", "'x' is not a model of the table"),
        ("[models.m\n", "not valid TOML"),
    ],
)
def test_a_bad_table_is_one_line_naming_the_file_and_entry(tmp_path: Path, body: str, says: str) -> None:
    p = tmp_path / "prices.toml"
    p.write_text(body)
    with pytest.raises(PriceFileError) as err:
        load_prices(p)
    msg = str(err.value)
    assert says in msg and "prices.toml" in msg and "\n" not in msg


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PriceFileError, match="not a file"):
        load_prices(tmp_path / "none.toml")


def test_parse_refuses_a_non_table() -> None:
    with pytest.raises(PriceError):
        parse_prices([1, 2])


HUGE_INT = "1" + "0" * 400  # TOML reads it as a Python int too large for a float


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("input", "1e300", "1e+300 is above the ceiling of 10000 USD per million tokens"),
        ("output", "10000.5", "is above the ceiling of 10000"),
        ("cache_read", "1e5", "is above the ceiling"),
        ("cache_write", HUGE_INT, "an integer of 401 digits is above the ceiling"),
        ("input", "inf", "expected a finite number >= 0, got inf"),
        ("output", "-inf", "expected a finite number >= 0"),
        ("cache_write", "nan", "expected a finite number >= 0, got nan"),
        ("input", "-0.5", "expected a number >= 0"),
        ("output", "'5'", "expected a number >= 0, got '5'"),
        ("output", "true", "expected a number >= 0, got True"),
        ("cache_ttl_s", "1e9", "is above the ceiling of 2.592e+06 seconds"),
        ("cache_ttl_s", "nan", "expected a finite number"),
    ],
)
def test_a_price_that_is_not_finite_negative_or_past_its_ceiling_is_one_line_naming_file_model_and_field(
    tmp_path: Path, field: str, value: str, says: str
) -> None:
    """Issue 48: a price of 1e300 was accepted and poisoned every routed run."""
    entry = {"input": "1", "output": "5", field: value}
    body = '[models."gpt-x"]\n' + "".join(f"{k} = {v}\n" for k, v in entry.items())
    p = tmp_path / "prices.toml"
    p.write_text(body)
    with pytest.raises(PriceFileError) as err:
        load_prices(p)
    msg = str(err.value)
    assert msg.startswith(f"price table {str(p)!r}: models.'gpt-x'.{field}: "), msg
    assert says in msg and "\n" not in msg and len(msg) < 400


@pytest.mark.parametrize("token", ["Infinity", "-Infinity", "NaN", "1e400", "-1e400", HUGE_INT + ".0"])
def test_json_spellings_of_infinity_and_nan_are_refused_too(tmp_path: Path, token: str) -> None:
    p = tmp_path / "p.json"
    p.write_text('{"models": {"m": {"input": TOKEN, "output": 1}}}'.replace("TOKEN", token))
    with pytest.raises(PriceFileError, match=r"models\.'m'\.input: expected a finite number"):
        load_prices(p)


def test_prices_at_the_ceiling_load_and_derived_cache_prices_follow_the_input_price(tmp_path: Path) -> None:
    from streams.core.prices import PRICE_MAX, TTL_MAX_S

    p = tmp_path / "p.toml"
    p.write_text(f"[models.m]\ninput = {PRICE_MAX}\noutput = {int(PRICE_MAX)}\ncache_ttl_s = {TTL_MAX_S}\n")
    m = load_prices(p).models["m"]
    assert (m.input, m.output, m.ttl_s) == (PRICE_MAX, PRICE_MAX, TTL_MAX_S)
    assert m.cache_write == 1.25 * PRICE_MAX and m.cache_read == 0.1 * PRICE_MAX  # derived, not refused


def test_every_price_of_the_example_table_is_within_the_ceilings() -> None:
    from streams.core.prices import PRICE_MAX

    for m in load_prices(EXAMPLE).models.values():
        assert all(0 <= x <= PRICE_MAX for x in (m.input, m.cache_write, m.cache_read, m.output))
