"""The real-run quality harness: it runs, its figures mean what they say, and on the real dev
runs (read from ../shared/data/real-dev when present) the monitors meet the issue's targets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.quality import DEFAULT_DATA, evaluate, main

EXPECTED_SYNTHETIC = {
    "healthy": [],
    "looping": ["semantic_loop"],
    "flailing": ["semantic_loop"],
    "skipper": ["verification_skip"],
    "drifter": ["late_sprawl", "silent_topic_drift"],
    "contradicts": ["claim_contradiction"],
    "recapper": ["cyclic_compression", "semantic_loop"],
}


def _write_run(lines: list[bytes], rid: str, steps: list[dict[str, Any]]) -> None:
    lines.append(
        orjson.dumps({"type": "run_start", "schema_version": 1, "run_id": rid, "task": "Fix the parser"})
    )
    for k, s in enumerate(steps, start=1):
        lines.append(orjson.dumps({"type": "step", "schema_version": 1, "run_id": rid, "step": k, **s}))
    lines.append(orjson.dumps({"type": "run_finish", "schema_version": 1, "run_id": rid}))


def test_the_harness_reports_loops_and_unverified_submits_against_labels(tmp_path: Path, capsys) -> None:
    lines: list[bytes] = []
    same = {
        "thought": "Find it.",
        "action": "find_file",
        "action_input": "Parser.java",
        "observation": "No matches found",
    }
    _write_run(lines, "looper", [same] * 6)
    edit = {"thought": "Fix.", "action": "edit", "action_input": "3:3\nx = 1\n", "observation": "ok"}
    test = {"thought": "Test.", "action": "bash", "action_input": "pytest -q", "observation": "3 passed"}
    submit = {"thought": "Submit.", "action": "submit", "action_input": None, "observation": ""}
    _write_run(lines, "unverified", [edit, submit])
    _write_run(lines, "verified", [edit, test, submit])
    (tmp_path / "runs.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    labels = [
        {"run_id": "looper", "outcome": "failure", "exact_repeat_loop": True, "repeat_steps": [4, 5, 6]},
        {
            "run_id": "unverified",
            "outcome": "success",
            "submitted_with_unverified_edit": True,
            "submit_step": 2,
        },
        {
            "run_id": "verified",
            "outcome": "success",
            "submitted_with_unverified_edit": False,
            "submit_step": 3,
        },
    ]
    (tmp_path / "labels.json").write_text(json.dumps({"runs": labels}))
    assert main(["--data", str(tmp_path), "--no-synthetic", "--json", str(tmp_path / "q.json")]) == 0
    rep = json.loads((tmp_path / "q.json").read_text())["runs"]
    assert rep["failure"]["semantic_loop_labelled"]["caught_within_3_steps"] == 1.0
    v = rep["success"]["verification_skip_at_submit"]
    assert v["flagged_unverified"] == 1.0 and v["flagged_verified"] == 0.0
    assert "== runs" in capsys.readouterr().out


def test_a_missing_data_folder_is_one_clear_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["--data", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_the_synthetic_fleet_still_shows_every_behaviour() -> None:
    assert evaluate(None, synthetic=True, samples=0)["synthetic_behaviours"] == EXPECTED_SYNTHETIC


@pytest.fixture(scope="module")
def real() -> dict[str, Any]:
    if not (DEFAULT_DATA / "labels.json").exists():
        pytest.skip(f"real dev data not found at {DEFAULT_DATA}")
    return evaluate(DEFAULT_DATA, synthetic=False, samples=0)


def test_resolved_real_coding_runs_rarely_receive_a_monitor_injection(real: dict[str, Any]) -> None:
    reps = [real[d]["success"] for d in ("swe_agent_java", "mini_swe_agent")]
    runs = sum(r["runs"] for r in reps)
    injected = sum(r["runs_with_monitor_injection"] * r["runs"] for r in reps)
    assert injected / runs <= 0.20


def test_verification_skip_flags_unverified_submits_and_spares_verified_ones(real: dict[str, Any]) -> None:
    got = [real[d]["all"]["verification_skip_at_submit"] for d in ("swe_agent_java", "mini_swe_agent")]
    unverified = sum(g["unverified_submits"] for g in got)
    verified = sum(g["verified_submits"] for g in got)
    flagged_u = sum(g["flagged_unverified"] * g["unverified_submits"] for g in got)
    flagged_v = sum(g["flagged_verified"] * g["verified_submits"] for g in got)
    assert flagged_u / unverified >= 0.9 and flagged_v / verified <= 0.1


def test_semantic_loop_catches_labelled_loops_and_spares_loop_free_resolved_runs(
    real: dict[str, Any],
) -> None:
    java = real["swe_agent_java"]["all"]["semantic_loop_labelled"]
    assert java["caught_within_3_steps"] >= 0.9
    for d in ("swe_agent_java", "mini_swe_agent"):
        assert real[d]["success"]["semantic_loop_labelled"]["fired_on_runs_without_loop"] <= 0.1


def test_multi_agent_chats_get_no_invented_loops_or_drift(real: dict[str, Any]) -> None:
    for name in ("captainagent", "captainagent (as recorded)"):
        rep = real[name]["all"]
        assert rep["monitors"]["semantic_loop"]["fires_per_100_steps"] <= 10
        assert rep["monitors"]["silent_topic_drift"]["fires_per_100_steps"] <= 2


def test_tool_calling_service_agents_stay_quiet(real: dict[str, Any]) -> None:
    assert real["tau_retail"]["success"]["runs_with_monitor_injection"] <= 0.05
