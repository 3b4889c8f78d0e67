"""bench.cost_compare: another commit's core measured beside this one, by its own flat_cost."""

from __future__ import annotations

import pytest

from bench import cost_compare


def test_a_commit_is_measured_beside_this_checkout_with_a_ratio_to_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        cost_compare.main(["--ref", "HEAD", "--rounds", "1", "--steps", "12", "--runs", "1", "--reps", "1"])
        == 0
    )
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("| monitors on, cold, step 10 |"))
    assert row.count("x |") == 1  # this checkout's cell carries its ratio to the reference
    assert "| monitors off, cold, step 10 |" in out


def test_a_ref_that_is_no_commit_is_one_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cost_compare.main(["--ref", "no-such-commit", "--rounds", "1"]) == 2
    assert "no-such-commit: not a commit" in capsys.readouterr().err
