from __future__ import annotations

import json
from pathlib import Path
from typing import get_type_hints

import streams
from streams.core.decision import DecisionRecord, Injection, MonitorsWire

SCHEMA = json.loads((Path(streams.__file__).parent / "schemas" / "decision.schema.json").read_text())


# Optional on the wire (a worker from before the ladder omits them; `arm` only in an experiment).
OPTIONAL = {"action", "action_reason", "routing_reason", "taint", "sanctioned", "arm"}


def test_the_typed_decision_has_exactly_the_wire_contracts_fields() -> None:
    assert set(get_type_hints(DecisionRecord)) == set(SCHEMA["properties"])
    assert set(SCHEMA["required"]) == set(SCHEMA["properties"]) - OPTIONAL
    monitors = SCHEMA["properties"]["monitors"]
    assert set(get_type_hints(MonitorsWire)) == set(monitors["required"])
    injection = SCHEMA["properties"]["injections"]["items"]
    assert set(get_type_hints(Injection)) == set(injection["required"])


def test_a_decision_from_a_worker_before_the_ladder_still_validates() -> None:
    from jsonschema import Draft202012Validator

    from tests.driving import sealed
    from tests.factories import run_start

    d = sealed(json.dumps(run_start("r")).encode(), lambda _r: None).decision
    assert d is not None and d["action"] == "continue" and d["action_reason"] is None
    old = {k: v for k, v in d.items() if k not in OPTIONAL}
    Draft202012Validator(SCHEMA).validate(old)
    Draft202012Validator(SCHEMA).validate(d)
