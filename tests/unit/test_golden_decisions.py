"""Decisions stay byte-identical across refactors (processed_ts aside): see tests/fixtures/golden_decisions.py."""

from __future__ import annotations

import pytest

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
    got = expected_form(name, replay_lines(lines))
    want = read_golden(name)
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        assert g == w, f"{name}: record {i} differs\n got: {g[:400]!r}\nwant: {w[:400]!r}"
    assert len(got) == len(want)
