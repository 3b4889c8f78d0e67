from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from streams.shared.contract import load_schema
from tests.factories import run_finish, run_start, step

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "streams" / "schemas"
NAMES = ["run_start", "step", "run_finish", "decision", "deadletter", "outcome"]


@pytest.mark.parametrize("name", NAMES)
def test_schema_files_are_valid_draft_2020_12(name):
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    assert schema == load_schema(name)


@pytest.mark.parametrize(
    ("name", "event"),
    [
        ("run_start", run_start("r")),
        (
            "run_start",
            run_start(
                "r",
                org_id="acme",
                task_profile="qa",
                model_routing={"FAST": "h"},
                token_budget=9,
                fsm_thresholds={"fast_window": 3},
                monitor_weights={"semantic_loop": 0.5},
                e_traces_enabled=False,
                metadata={"k": [1]},
            ),
        ),
        ("step", step("r", 1)),
        ("step", step("r", 7, action=None, action_input="raw text", observation=None, difficulty=0.3)),
        ("run_finish", run_finish("r")),
        ("run_finish", run_finish("r", "failure: ValueError")),
    ],
)
def test_example_events_validate(name, event):
    Draft202012Validator(load_schema(name)).validate(event)


def test_schemas_pin_schema_version_one():
    for name in NAMES:
        assert load_schema(name)["properties"]["schema_version"] == {"const": 1}


def test_deadletter_records_match_their_schema():
    from streams.core.events import Limits, Rejected, deadletter_record

    dv = Draft202012Validator(load_schema("deadletter"))
    for raw in (b"{bad", b"x" * 100_000, None, "caf\u00e9"):
        rec = deadletter_record(
            raw,
            Rejected("invalid_json", "because"),
            Limits(),
            1.0,
            {"topic": "t", "partition": 0, "offset": 5},
        )
        dv.validate(rec)
    assert deadletter_record(b"x" * 100_000, Rejected("too_large", "d"), Limits(), 1.0)["truncated"] is True
