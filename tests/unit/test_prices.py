"""The price table file (RB_PRICES_FILE): TOML or JSON, one clear line when it is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.core.prices import PriceError, parse_prices
from streams.prices import PriceFileError, load_prices

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
