"""Pattern records are validated by schemas/pattern.schema.json, like the wire events."""

from __future__ import annotations

from importlib import resources

import orjson
import pytest
from jsonschema import Draft202012Validator

from streams.etraces.patterns import FAILURE_TYPE_VALUES, PatternError, parse_pattern

SCHEMA = orjson.loads(resources.files("streams.schemas").joinpath("pattern.schema.json").read_bytes())


def test_the_pattern_schema_is_a_valid_json_schema_listing_every_failure_type() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["failure_type"]["enum"] == [*FAILURE_TYPE_VALUES, None]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ([1, 2], "a pattern must be a JSON object, got list"),
        ({"id": "x", "tier": "e3", "title": "T"}, "guidance: required"),
        ({"id": " ", "tier": "e3", "title": "T", "guidance": "G"}, "id: required"),
        ({"id": "x", "tier": "e3", "title": "T", "guidance": "G", "unlock": 3}, "unlock: must be a string"),
        (
            {"id": "x", "tier": "e1", "org_id": " ", "title": "T", "guidance": "G", "situation": "S"},
            "org_id: required",
        ),
        (
            {"id": "x" * 201, "tier": "e3", "title": "T", "guidance": "G"},
            "id: required, a non-empty string of at most 200",
        ),
    ],
)
def test_a_bad_record_gets_one_message_naming_the_field(record: object, message: str) -> None:
    with pytest.raises(PatternError) as e:
        parse_pattern(record)
    assert str(e.value).startswith(message)


def test_a_valid_record_is_normalised() -> None:
    p = parse_pattern(
        {
            "id": " p ",
            "tier": "e2",
            "title": " T ",
            "guidance": "G",
            "situation": " S ",
            "dead_ends": " one ",
            "model_family": "Anthropic",
            "gate_threshold": 1,
        }
    )
    assert (p.id, p.title, p.situation, p.dead_ends, p.model_family, p.gate_threshold) == (
        "p",
        "T",
        "S",
        ["one"],
        "anthropic",
        1.0,
    )
