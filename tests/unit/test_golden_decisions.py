"""Decisions stay byte-identical across refactors (processed_ts aside): see tests/fixtures/golden_decisions.py."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from streams.shared.contract import load_schema
from tests.fixtures.golden_decisions import (
    REAL_DEV,
    expected_form,
    golden_path,
    read_golden,
    replay_lines,
    sources,
)


@pytest.mark.parametrize("name", list(sources()))
def test_replayed_decisions_match_the_recorded_golden_file(name: str) -> None:
    lines = sources()[name]
    if lines is None:
        pytest.skip(f"real dev data not found at {REAL_DEV}")
    assert golden_path(name).exists(), "regenerate with: python -m tests.fixtures.golden_decisions"
    outcomes: list[dict[str, Any]] = []
    records = replay_lines(lines, outcomes)
    got = expected_form(name, records)
    want = read_golden(name)
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        assert g == w, f"{name}: record {i} differs\n got: {g[:400]!r}\nwant: {w[:400]!r}"
    assert len(got) == len(want)
    # The same replay's outcome records: one per finished run, each valid against its schema.
    check = Draft202012Validator(load_schema("outcome"))
    for rec in outcomes:
        check.validate(rec)
    ids = [r["run_id"] for r in outcomes]
    assert len(ids) == len(set(ids)) and all(r["ended_by"] == "run_finish" for r in outcomes)
    if name != "synthetic":  # (the synthetic fleet's run_finish names no outcome: dead-lettered)
        runs = {orjson.loads(r)["run_id"] for r in records if orjson.loads(r).get("type") == "decision"}
        assert set(ids) == runs
