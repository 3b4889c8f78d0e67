"""bench.replay_cost: a real-run file replayed by another commit's core beside this one."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bench import replay_cost
from tests.factories import run_start, step


def _source(tmp_path: Path) -> Path:
    events = [run_start("r1", task="Fix the failing test in utils.py")]
    events += [
        step(
            "r1",
            n,
            action="bash",
            action_input={"command": f"pytest -q tests/test_{n}.py"},
            observation=f"{n} passed",
        )
        for n in range(1, 6)
    ]
    (tmp_path / "tiny.jsonl").write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    return tmp_path


def test_a_source_is_replayed_by_a_commit_beside_this_checkout_with_a_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _source(tmp_path)
    assert replay_cost.main(["--ref", "HEAD", "--source", "tiny", "--data", str(data), "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("| tiny |"))
    assert row.count("x |") == 1  # this checkout's cell carries its ratio to the reference


def test_a_missing_source_or_ref_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert replay_cost.main(["--ref", "HEAD", "--source", "nope", "--data", str(tmp_path)]) == 2
    assert "not found" in capsys.readouterr().err
    data = _source(tmp_path)
    assert replay_cost.main(["--ref", "no-such-commit", "--source", "tiny", "--data", str(data)]) == 2
    assert "no-such-commit: not a commit" in capsys.readouterr().err
