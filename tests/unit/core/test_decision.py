from __future__ import annotations

import json
from pathlib import Path
from typing import get_type_hints

import streams
from streams.core.decision import Decision, Injection, MonitorsWire

SCHEMA = json.loads((Path(streams.__file__).parent / "schemas" / "decision.schema.json").read_text())


def test_the_typed_decision_has_exactly_the_wire_contracts_fields() -> None:
    assert set(get_type_hints(Decision)) == set(SCHEMA["required"]) == set(SCHEMA["properties"])
    monitors = SCHEMA["properties"]["monitors"]
    assert set(get_type_hints(MonitorsWire)) == set(monitors["required"])
    injection = SCHEMA["properties"]["injections"]["items"]
    assert set(get_type_hints(Injection)) == set(injection["required"])
