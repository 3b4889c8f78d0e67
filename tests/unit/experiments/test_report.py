"""`rb-streams experiment report`: the figures per arm and monitor, and one line on bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from streams.cli.main import main
from streams.experiments.report import build


def one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def outcome(run_id: str, arm: str | None, success: bool, **kw: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "type": "outcome",
        "schema_version": 1,
        "run_id": run_id,
        "org_id": "acme",
        "experiment": "pilot",
        "arm": arm,
        "outcome": "success" if success else "failure: tests fail",
        "ended_by": "run_finish",
        "steps": 10,
        "wall_s": 3.0,
        "model_calls": {"m": 10},
        "tokens": {"input": 100, "output": 10, "cached": 0},
        "cost_usd": 0.5,
        "cost_estimated": False,
        "interventions": {},
        "escalations": 0,
        "stops": 0,
        "first_fire": {},
        "compliance": {},
    }
    rec.update(kw)
    return rec


def write(path: Path, recs: list[dict[str, Any]]) -> str:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return str(path)


def fleet() -> list[dict[str, Any]]:
    """300 runs an arm: treatment 60% success, control 40%; the loop monitor fires in every
    fourth run, is complied with 3 times in 4 when told and stops by itself 1 time in 4."""
    recs = []
    for i in range(300):
        loop = i % 4 == 0
        extra: dict[str, Any] = {}
        if loop:
            extra = {"first_fire": {"loop": 2}, "interventions": {"loop": 2}}
        t_comp = (
            {"loop": {"complied": int(i % 16 != 0), "ignored": int(i % 16 == 0), "pending": 0}}
            if loop
            else {}
        )
        c_comp = (
            {"loop": {"complied": int(i % 16 == 0), "ignored": int(i % 16 != 0), "pending": 0}}
            if loop
            else {}
        )
        recs.append(outcome(f"t{i}", "treatment", i % 5 < 3, compliance=t_comp, **extra))
        recs.append(outcome(f"c{i}", "control", i % 5 < 2, compliance=c_comp, cost_usd=0.25, **extra))
    return recs


def test_per_arm_rates_intervals_costs_and_a_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path / "o.jsonl", fleet())
    assert main(["experiment", "report", f, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    (e,) = rep["experiments"]
    t, c = e["arms"]["treatment"], e["arms"]["control"]
    assert (t["runs"], t["successes"], c["successes"]) == (300, 180, 120)
    assert t["success_ci95"][0] < 0.6 < t["success_ci95"][1]
    assert t["cost_per_run_usd"] == pytest.approx(0.5)
    assert t["cost_per_success_usd"] == pytest.approx(0.5 * 300 / 180)
    assert c["cost_per_success_usd"] == pytest.approx(0.25 * 300 / 120)
    assert t["interventions_per_run"] == pytest.approx(2 * 75 / 300)
    assert e["difference"]["points"] == pytest.approx(0.2)
    assert 0.1 < e["difference"]["ci95"][0] < 0.2 < e["difference"]["ci95"][1]
    assert e["sequential"]["verdict"] == "treatment better than control"
    (m,) = e["monitors"]
    assert m["monitor"] == "loop"
    assert m["stopped_when_told"]["rate"] == pytest.approx(0.75, abs=0.02)
    assert m["stopped_by_itself"]["rate"] == pytest.approx(0.25, abs=0.02)
    assert m["after_first_fire"]["treatment"]["runs"] == 75
    assert e["guard"] == []


def test_text_report_names_arms_monitors_and_the_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recs = [*fleet(), outcome("x", None, True), outcome("y", "treatment", True, experiment=None), fleet()[0]]
    f = write(tmp_path / "o.jsonl", recs)
    assert main(["experiment", "report", f]) == 0
    out = capsys.readouterr().out
    assert "treatment" in out and "control" in out and "loop" in out
    assert "treatment better than control" in out
    assert "2 without an experiment or arm" in out and "1 duplicates" in out


def test_the_guard_switch_is_in_the_report_when_treatment_is_worse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(3)
    recs = []
    for i in range(400):
        recs.append(outcome(f"t{i}", "treatment", bool(rng.random() < 0.3)))
        recs.append(outcome(f"c{i}", "control", bool(rng.random() < 0.6)))
    rep = build(recs)
    (e,) = rep["experiments"]
    assert e["sequential"]["verdict"] == "treatment worse than control"
    (g,) = e["guard"]
    assert g["monitor"] == "*" and g["after_record"] >= 100  # 50 runs an arm at least
    assert "switched to observe-only after outcome record" in g["why"]


def test_only_the_named_experiment_the_others_counted(tmp_path: Path) -> None:
    recs = [outcome("a", "treatment", True), outcome("b", "control", True, experiment="other")]
    rep = build(recs, experiment="pilot")
    assert [e["experiment"] for e in rep["experiments"]] == ["pilot"]
    assert rep["ignored"]["other_experiment"] == 1


def test_fields_of_the_wrong_type_do_not_break_it() -> None:
    recs = [
        outcome("a", "treatment", True, cost_usd="lots", steps=-3, interventions=[1], compliance={"loop": 3}),
        outcome("b", "control", False, first_fire=["loop"], cost_usd=True),
    ]
    (e,) = build(recs)["experiments"]
    assert e["arms"]["treatment"]["cost_per_run_usd"] == 0.0 and e["arms"]["treatment"]["steps_per_run"] == 0


def test_a_missing_file_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "report", str(tmp_path / "nope.jsonl")]) == 1
    assert "nope.jsonl" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize("content", [b'{"run_id": \n', b"[1, 2]\n", b"\xff\xfe\n"])
def test_bad_json_is_one_line_naming_the_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    f = tmp_path / "o.jsonl"
    f.write_bytes(orjson.dumps(outcome("a", "treatment", True)) + b"\n" + content)
    assert main(["experiment", "report", str(f)]) == 1
    assert f"{f}:2:" in one_line(capsys.readouterr().err)


def test_a_bad_alpha_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "report", "--alpha", "2"])
    assert exc.value.code == 2
    assert "expected a level between 0 and 1" in capsys.readouterr().err


def test_no_broker_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "report", "--broker", "127.0.0.1:1"]) == 1
    one_line(capsys.readouterr().err)


def test_plot_without_matplotlib_says_so_and_still_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write(tmp_path / "o.jsonl", fleet())
    png = tmp_path / "r.png"
    assert main(["experiment", "report", f, "--plot", str(png)]) == 0
    cap = capsys.readouterr()
    assert "treatment" in cap.out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in one_line(cap.err)
    else:
        assert png.stat().st_size > 0


def test_names_from_records_cannot_write_escape_sequences_to_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = "\x1b[2J\x1b]0;owned\x07"
    recs = [
        outcome(
            "a", "treatment", True, org_id=evil, first_fire={evil: 1}, compliance={evil: {"complied": 1}}
        ),
        outcome("b", "control", False, experiment="pilot"),
    ]
    f = write(tmp_path / "o.jsonl", recs)
    assert main(["experiment", "report", f]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b" in out
