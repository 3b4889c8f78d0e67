"""`rb-streams cost` on a slice of the dev data, and its one-line errors (issue 39)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "deploy" / "prices.example.toml"
DEV = ROOT.parent / "shared" / "data" / "real-dev"


def one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 3 runs of the OpenHands file (the one source with long coding runs)."""
    if not (DEV / "openhands_swe.jsonl").is_file():
        pytest.skip("real dev runs not present")
    out = tmp_path_factory.mktemp("cost") / "openhands_slice.jsonl"
    starts = 0
    with open(DEV / "openhands_swe.jsonl", "rb") as src:
        lines = []
        for line in src:
            starts += b'"run_start"' in line
            if starts > 3:
                break
            lines.append(line)
    out.write_bytes(b"".join(lines))
    return out


def test_cost_prices_a_dev_slice_per_data_set_and_per_run(
    slice_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cost", str(slice_file), "--prices-file", str(EXAMPLE), "--json", "--per-run"]) == 0
    got = json.loads(capsys.readouterr().out)
    (fleet,) = got["fleets"]
    assert fleet["source"] == "openhands_slice" and fleet["runs"] == 3
    assert set(fleet["usd"]) == {"base", "steer_end", "steer_system", "naive", "routed", "net", "upgrades"}
    assert fleet["usd"]["base"]["usd"] > 0 and fleet["tokens_estimated"] is True
    # steering at the end never rewrites the history; in the system prompt it may
    assert fleet["cache_writes_caused_usd"]["steering_end"] == 0
    assert fleet["change_pct"]["steer_end"] <= fleet["change_pct"]["steer_system"]
    assert len(got["runs"]) == 3
    assert all(r["routing_reasons"] for r in got["runs"])


def test_cost_text_output_is_a_table(slice_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", str(slice_file), "--prices-file", str(EXAMPLE), "--runs", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cost: every run as if on claude-sonnet-4-5")
    assert out[2].startswith("openhands_slice")


def test_plot_without_matplotlib_is_one_line_and_no_file(
    slice_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "c.png"
    rc = main(["cost", str(slice_file), "--prices-file", str(EXAMPLE), "--runs", "1", "--plot", str(png)])
    assert rc == 0
    err = capsys.readouterr().err
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in one_line(err) and not png.exists()
    else:
        assert png.stat().st_size > 0


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("[models.m]\ninput = 1\n", "missing 'output'"),
        ("[models.m]\ninput = 1\noutput = 1\n", "no [cost] section"),
        # issue 48: a price no model comes near, and one too large for a float (a traceback before)
        (
            "[models.m]\ninput = 1e300\noutput = 1\n[cost]\nmodel = 'm'\nfast = 'm'\n",
            "models.'m'.input: 1e+300",
        ),
        (f"[models.m]\ninput = 1\noutput = 1{'0' * 400}\n", "models.'m'.output: an integer of 401 digits"),
    ],
)
def test_a_bad_price_table_is_one_line_and_exit_2(
    slice_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, says: str
) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(body)
    assert main(["cost", str(slice_file), "--prices-file", str(p)]) == 2
    assert says in one_line(capsys.readouterr().err)


def test_no_price_table_is_one_line(
    slice_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RB_PRICES_FILE", raising=False)
    assert main(["cost", str(slice_file)]) == 2
    assert "no price table" in one_line(capsys.readouterr().err)


def test_a_trajectory_with_no_valid_run_names_each_bad_line_then_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text("not json\n")
    assert main(["cost", str(bad), "--prices-file", str(EXAMPLE)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"cost: {bad}:1: invalid_json: not JSON") and "Traceback" not in "".join(err)
    assert err[-1] == f"rb-streams: cost: {bad}: no run_start in the file (1 invalid lines skipped)"


def test_cost_names_a_bad_line_skips_it_and_goes_on_as_replay_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.factories import b, run_start, step

    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b(run_start("r")) + b"\n{broken\n[1]\n" + b(step("r", 1)) + b"\n")
    assert main(["cost", str(src), "--prices-file", str(EXAMPLE), "--json"]) == 0
    captured = capsys.readouterr()
    got = json.loads(captured.out)
    assert got["invalid_lines_skipped"] == 2 and got["fleets"][0]["runs"] == 1
    err = captured.err.splitlines()
    assert err[0].startswith(f"cost: {src}:2: invalid_json: ")
    assert err[1] == f"cost: {src}:3: invalid_event: not a wire event (an object with a run_id)"
    assert err[-1] == "cost: 2 invalid lines skipped (named above)"


def test_an_unknown_run_is_one_line(slice_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", str(slice_file), "--prices-file", str(EXAMPLE), "--run", "nope"]) == 2
    assert "no such run" in one_line(capsys.readouterr().err)


def test_retimed_spaces_each_runs_steps_from_its_start() -> None:
    from streams.cli.cost import retimed

    runs = [({"run_id": "r", "ts": 100.0}, [{"step": 1, "ts": 102.0}, {"step": 2, "ts": 104.0}])]
    ((start, steps),) = retimed(runs, 30.0)
    assert start["ts"] == 100.0 and [s["ts"] for s in steps] == [130.0, 160.0]
    assert runs[0][1][0]["ts"] == 102.0  # the input is not changed


def test_the_cost_table_headings_say_what_each_column_is_and_a_legend_follows() -> None:
    from streams.cli.cost import COLUMNS, Fleet, table
    from streams.core.cost import Tally

    tallies = {k: Tally(usd=u) for k, u in (("base", 10.0), ("steer_end", 10.5), ("steer_system", 11.0))}
    tallies |= {"naive": Tally(usd=9.0), "routed": Tally(usd=8.0, switches=3), "net": Tally(usd=8.4)}
    fleet = Fleet("agentdojo", runs=4, steps=40, tallies=tallies, dearer_by_downgrade=1, naive_dearer=2)
    head, row, *legend = list(table([fleet]))
    for heading, _ in COLUMNS:
        assert heading in head
    assert "$ never switching" in head and "cache-aware routing" in head and "model switches" in head
    cells = ["agentdojo", "4", "10.00", "+5.00%", "+10.00%", "-10.00%", "-20.00%", "-16.00%", "-"]
    assert row.split() == [*cells, "3", "1", "(2)", "0/0"]
    assert len(head) == len(row)  # the cells sit under their headings
    text = " ".join(legend)
    assert text.startswith("% columns: the bill's change against never switching models, no steering")
    assert "Runs dearer" in text and "Cheap/calls in err streaks" in text
