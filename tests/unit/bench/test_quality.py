"""The real-run quality harness: it runs, its figures mean what they say, and on the real dev
runs (read from ../shared/data/real-dev when present) the monitors meet the issue's targets."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.common import DEFAULT_DATA
from bench.quality import (
    HARNESS,
    compare_lines,
    evaluate,
    flatten,
    ladder_report,
    ladder_runs,
    ladder_summary,
    main,
    replay_runs,
    summarise,
)

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


# --- issue 29: figures per data set, and --compare


class ScriptedReplayer:
    """Stands in for the core: each step's decision fires the monitors the test scripts for it."""

    def __init__(self, fires: dict[tuple[str, int], list[str]]) -> None:
        self.fires = fires

    def feed(self, line: bytes) -> tuple[dict[str, Any] | None, None]:
        ev = orjson.loads(line)
        if ev["type"] != "step":
            return None, None
        fired = self.fires.get((ev["run_id"], ev["step"]), [])
        injections = [{"source": "monitor", "text": f"{fired[0]} says stop"}] if fired else []
        decision = {
            "step": ev["step"],
            "fsm_state": "NORMAL",
            "monitors": {"fired": fired},
            "injections": injections,
        }
        return decision, None


def _error(step: int, category: str, group: str) -> dict[str, Any]:
    return {"step": step, "category_norm": category, "category_group": group, "impact": "HIGH"}


def _steps(n: int) -> list[dict[str, Any]]:
    return [
        {
            "thought": f"Step {k}.",
            "action": "web_search",
            "action_input": {"query": f"q{k}"},
            "observation": "ok",
        }
        for k in range(1, n + 1)
    ]


def test_an_annotated_error_counts_as_caught_only_with_a_fire_within_two_steps() -> None:
    lines: list[bytes] = []
    _write_run(lines, "wrong", _steps(10))
    _write_run(lines, "right", _steps(4))
    labels = {
        "wrong": {
            "outcome": "failure",
            "errors": [
                _error(1, "Formatting Errors", "reasoning"),  # fire at 3: two steps after
                _error(5, "Resource Abuse", "planning_coordination"),  # fire at 3: two steps before
                _error(6, "Goal Deviation", "planning_coordination"),  # fires at 3 and 9: three away
            ],
        },
        "right": {"outcome": "success", "errors": [_error(4, "Formatting Errors", "reasoning")]},
    }
    fires = {("wrong", 3): ["semantic_loop"], ("wrong", 9): ["claim_contradiction"]}
    recs = replay_runs("trail", lines, labels, rp=ScriptedReplayer(fires))  # type: ignore[arg-type]
    figs = summarise(recs, 0, detail=True)["figures"]
    assert figs["errors"] == 4 and figs["errors_caught"] == 0.5
    assert figs["errors_caught[Resource Abuse]"] == 1.0 and figs["errors[Resource Abuse]"] == 1
    assert figs["errors_caught[Goal Deviation]"] == 0.0
    assert figs["errors_caught[group planning_coordination]"] == 0.5
    assert figs["errors_caught[Formatting Errors]"] == 0.5  # one per run, the correct run's unfired
    assert figs["fires"] == 2 and figs["fires_off_error"] == 1 and figs["fires_off_error_share"] == 0.5
    assert figs["precision[semantic_loop]"] == 1.0 and figs["precision[claim_contradiction]"] == 0.0
    assert figs["fires[verification_skip]"] == 0 and figs["precision[verification_skip]"] is None
    # steps 1-8 of the wrong run and 2-4 of the right one are within two steps of an error
    assert figs["steps_at_error_share"] == round(11 / 14, 4)
    # the correct run got no injection, the wrong one did
    by_outcome = {
        o: summarise([r for r in recs if r.outcome == o], 0)["figures"] for o in ("success", "failure")
    }
    assert by_outcome["success"]["runs_with_monitor_injection"] == 0.0
    assert by_outcome["failure"]["runs_with_monitor_injection"] == 1.0
    assert "errors_caught[Resource Abuse]" not in by_outcome["failure"]  # the breakdown is the "all" group's


def test_a_mistake_step_counts_as_caught_per_monitor_within_two_steps() -> None:
    lines: list[bytes] = []
    _write_run(lines, "a", _steps(8))
    _write_run(lines, "b", _steps(8))
    labels = {"a": {"outcome": "failure", "mistake_step": 6}, "b": {"outcome": "failure", "mistake_step": 2}}
    fires = {("a", 4): ["semantic_loop"], ("b", 5): ["silent_topic_drift"]}
    recs = replay_runs("chats", lines, labels, rp=ScriptedReplayer(fires))  # type: ignore[arg-type]
    figs = summarise(recs, 0, detail=True)["figures"]
    assert figs["mistakes"] == 2 and figs["mistake_caught[any]"] == 0.5
    assert figs["mistake_caught[semantic_loop]"] == 0.5 and figs["mistake_caught[silent_topic_drift]"] == 0.0
    assert figs["fires_per_100_steps[silent_topic_drift]"] == 6.25
    assert figs["silent_topic_drift_per_100_steps"] == 6.25


def test_the_trail_figures_come_out_of_the_real_core_and_into_the_report(tmp_path: Path, capsys) -> None:
    lines: list[bytes] = []
    same = {
        "thought": "Find it.",
        "action": "find_file",
        "action_input": "a.py",
        "observation": "No matches found",
    }
    _write_run(lines, "looper", [same] * 6)
    _write_run(lines, "quiet", _steps(3))
    (tmp_path / "trail.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    labels = [
        {
            "run_id": "looper",
            "outcome": "failure",
            "errors": [_error(5, "Resource Abuse", "planning_coordination")],
        },
        {"run_id": "quiet", "outcome": "success", "errors": [_error(2, "Formatting Errors", "reasoning")]},
    ]
    (tmp_path / "labels.json").write_text(json.dumps({"runs": labels}))
    assert main(["--data", str(tmp_path), "--no-synthetic", "--json", str(tmp_path / "q.json")]) == 0
    figs = json.loads((tmp_path / "q.json").read_text())["trail"]["all"]["figures"]
    assert figs["errors_caught[Resource Abuse]"] == 1.0 and figs["errors_caught[Formatting Errors]"] == 0.0
    assert figs["precision[semantic_loop]"] == 1.0
    out = capsys.readouterr().out
    assert "Resource Abuse: 100% of 1 (target >= 70%)" in out
    assert "| trail | 2 | 0% of 1 |" in out  # the table: the correct run got no injection


def _report(**figs: float | int | None) -> dict[str, Any]:
    return {"trail": {"success": {"figures": dict(figs)}}}


def test_compare_marks_a_figure_that_moved_the_wrong_way() -> None:
    before = flatten(
        _report(runs=17, runs_with_monitor_injection=0.05, errors_caught=0.4, fires_off_error_share=0.2)
    )
    after = flatten(
        _report(runs=18, runs_with_monitor_injection=0.1, errors_caught=0.5, fires_off_error_share=0.2)
    )
    assert set(after) == {
        "trail/success/runs",
        "trail/success/runs_with_monitor_injection",
        "trail/success/errors_caught",
        "trail/success/fires_off_error_share",
    }
    lines = {ln.split()[0]: ln for ln in compare_lines(before, after)[1:-1]}
    assert lines["trail/success/runs_with_monitor_injection"].endswith(
        "<< worse"
    )  # more steering of correct runs
    assert "5.0%" in lines["trail/success/runs_with_monitor_injection"]
    assert lines["trail/success/errors_caught"].endswith("better")
    assert lines["trail/success/runs"].endswith("changed")  # a count is neither better nor worse
    assert lines["trail/success/fires_off_error_share"].endswith("20.0%")
    assert compare_lines(before, after)[-1].startswith("4 figures: 1 worse, 1 better, 1 changed")


def test_compare_shows_a_figure_only_one_side_has() -> None:
    lines = compare_lines(flatten(_report(errors=3)), flatten(_report(errors=3, errors_caught=0.5)))
    assert any(ln.split()[:4] == ["trail/success/errors_caught", "-", "→", "50.0%"] for ln in lines)


def test_compare_with_a_ref_that_is_no_commit_is_one_clear_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["--compare", "no-such-ref-anywhere", "--data", str(tmp_path), "--no-synthetic"]) == 2
    err = capsys.readouterr().err
    assert "not a commit" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.skipif(not (HARNESS / ".git").exists(), reason="not a git checkout")
def test_compare_runs_the_ref_on_its_own_core_and_cleans_up(tmp_path: Path, capsys) -> None:
    # no runs in the folder: the child imports the core and reports, without loading models
    assert main(["--compare", "HEAD", "--data", str(tmp_path), "--no-synthetic"]) == 0
    out = capsys.readouterr().out
    head = next(ln for ln in out.splitlines() if ln.startswith("== before: HEAD"))
    core = Path(head.split("core ", 1)[1].split(")", 1)[0])
    assert core.name == "__init__.py" and core.parent.name == "streams"
    assert not core.is_relative_to(HARNESS) and "quality-ref-" in str(core)
    assert not core.exists()  # the worktree is gone
    listed = subprocess.run(["git", "-C", str(HARNESS), "worktree", "list"], capture_output=True, text=True)
    assert str(core.parent.parent) not in listed.stdout


def test_the_ladder_figures_count_stops_where_they_happen_and_what_they_save() -> None:
    lines: list[bytes] = []
    same = {
        "action": "bash",
        "action_input": "pytest -x",
        "observation": "E  AssertionError",
        "observation_is_error": True,
    }
    _write_run(lines, "looper", [dict(same, tokens=10) for _ in range(12)])
    _write_run(
        lines, "fine", [{"action": "read", "action_input": f"f{k}.py", "observation": "ok"} for k in range(8)]
    )
    runs = ladder_runs(lines, {"looper": {"outcome": "failure"}, "fine": {"outcome": "success"}})
    looper, fine = runs
    assert looper.stop_at is not None and looper.escalate_at == looper.stop_at - 1
    assert fine.stop_at is None and fine.escalate_at is None
    s = ladder_summary([looper])
    assert s["stopped"] == 1 and s["steps_saved"] == 12 - looper.stop_at
    assert s["tokens_saved"] == 10 * (12 - looper.stop_at)


@pytest.mark.skipif(not DEFAULT_DATA.is_dir(), reason="real dev data not present")
def test_the_ladder_stops_no_more_than_one_resolved_real_run_and_escalates_few() -> None:
    """Issue 30's targets on the dev data with the documented default: no resolved run stopped
    but the one recorded (SWE-agent Java jib-4035: javac missing, the same failing call nine
    times in a row before the agent moved on) and escalations on at most 5% of resolved runs."""
    rep = ladder_report(DEFAULT_DATA)
    resolved = [v["success"] for k, v in rep.items() if k != "policy" and "success" in v]
    runs = sum(r["runs"] for r in resolved)
    assert sum(r["stopped"] for r in resolved) <= 1
    assert sum(r["escalated"] for r in resolved) <= 0.05 * runs
    assert rep["swe_agent_java"]["failure"]["stopped"] >= 3
