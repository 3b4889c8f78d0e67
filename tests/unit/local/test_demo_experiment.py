"""The demo's experiment: its run_start `experiment`, the per-arm table of what the agents saw,
and the report, which a build without `rb-streams experiment report` says it cannot show."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import pytest

from streams.cli.main import build_parser, main
from streams.local import demo
from streams.local.demo import AgentSummary, experiment_config, experiment_table, report
from streams.settings import Settings


def test_the_experiment_is_the_contracts_shape_and_refuses_a_bad_holdout():
    assert experiment_config(0.5, "7") == {"name": "demo", "holdout": 0.5, "seed": "7"}
    for bad in (-0.1, 0.51, 1.0):
        with pytest.raises(ValueError, match=r"from 0 to 0\.5"):
            experiment_config(bad, "7")
    with pytest.raises(ValueError, match="64 characters"):
        experiment_config(0.2, "s" * 65)


def row(arm: str | None, outcome: str, **told: int) -> AgentSummary:
    s = AgentSummary("looping-agent", "r", arm=arm, outcome=outcome)
    s.told, s.complied = Counter(told), Counter({m: n - 1 for m, n in told.items()})
    return s


def test_the_table_counts_each_arm_apart_and_says_it_is_synthetic():
    rows = [
        row("treatment", "success", semantic_loop=2),
        row("treatment", "failure: stuck in a loop", semantic_loop=1),
        row("control", "failure: stuck in a loop"),
        row("control", "success"),
        row("control", "success"),
    ]
    text = experiment_table(rows)
    assert "synthetic" in text.splitlines()[0]
    (treat,) = [line for line in text.splitlines() if line.strip().startswith("treatment")]
    (ctrl,) = [line for line in text.splitlines() if line.strip().startswith("control")]
    assert "runs   2" in treat and "1/2 (50%)" in treat and "semantic_loop 1/3" in treat
    assert "runs   3" in ctrl and "2/3 (67%)" in ctrl and "texts followed: none" in ctrl
    assert "failure: stuck in a loop 2" in text


def test_runs_without_an_arm_are_shown_as_such():
    assert "(no arm)" in experiment_table([row(None, "success")])


def test_the_report_runs_the_real_subcommand_or_says_this_build_has_none(tmp_path: Path):
    # a real subprocess of this build's rb-streams, against a broker that is not there
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    s = Settings.from_env({}, broker="kafka://127.0.0.1:1", data_dir=str(tmp_path))
    rc, text = report(s)
    if "experiment" not in sub.choices:
        assert (rc, text) == (
            2,
            "(this build has no `rb-streams experiment report`: the report is not shown)",
        )
    else:  # the report's own error for an unreachable broker: a line, never a traceback
        assert rc != 0 and text and "Traceback" not in text


def test_experiment_flags_say_a_bad_holdout_in_one_line_and_exit_2(capsys, monkeypatch):
    monkeypatch.setattr(demo, "experiment_unsupported", lambda: None)
    assert main(["simulate", "--experiment", "--holdout", "0.7"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--holdout must be from 0 to 0.5" in err


def test_a_build_without_experiments_refuses_experiment_runs_in_one_line(capsys, monkeypatch):
    monkeypatch.setattr(demo, "experiment_unsupported", lambda: "no experiments here")
    assert main(["demo", "--experiment"]) == 2
    assert capsys.readouterr().err == "rb-streams: no experiments here\n"


def test_each_agent_runs_its_rounds_then_stops_and_every_run_has_a_seed_of_its_own():
    """`--rounds 5` is five runs per agent (the loop once kept only the last summary and never
    reached five: `demo --experiment` ran without end)."""
    import asyncio

    seeds: list[tuple[int, int]] = []

    async def run_one(i: int, seed: int) -> AgentSummary:
        seeds.append((i, seed))
        return AgentSummary("looping-agent", f"r{seed}")

    async def fleet_of(agents: int, rounds: int) -> list[list[AgentSummary]]:
        return await asyncio.gather(*(demo.runs_of(run_one, i, agents, rounds, False) for i in range(agents)))

    per_agent = asyncio.run(asyncio.wait_for(fleet_of(3, 5), 5))
    assert [len(rows) for rows in per_agent] == [5, 5, 5]
    assert len({s for _, s in seeds}) == 15 and sorted(s for i, s in seeds if i == 1) == [1, 4, 7, 10, 13]
