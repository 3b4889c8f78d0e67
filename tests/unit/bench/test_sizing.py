"""bench.sizing: the arithmetic on a fixed input, its growth with the runs, and its errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import sizing

X = {k: v for k, (v, _u, _src) in sizing.DEFAULTS.items()} | {
    "cpu_us": 1000.0,
    "loop_us": 800.0,
    "codec_us": 100.0,
    "core_us": sizing.SYNTHETIC_CORE_US,
    "broker_us": 200.0,
    "state_bytes": 20_000.0,
    "changelog_bytes": 5_000.0,
    "decision_bytes": 100.0,
    "event_bytes": 2_000.0,
    "steps_per_run": 40.0,
    "worker_rss_mb": 400.0,
    "embed_mb": 160.0,
    "run_kb": 3.0,
    "tombstone_bytes": 100.0,
}
CFG = {"partitions": 8.0, "finished_retention_s": 3600.0, "idle_timeout_s": 86400.0, "max_runs": 100_000.0}


def test_arithmetic_10k_runs_at_5s() -> None:
    p = sizing.plan(10_000, 5.0, 0.6, X, CFG)
    assert p["steps/s"] == 2_000
    assert p["worker cores"] == pytest.approx(2_000 * 1_100 / 1e6 / 0.6)  # 3.67
    assert p["worker processes"] == 3  # the event loop's share, codec included: 2,000 x 900 us / 0.6
    assert p["partitions"] == 8  # max(RB_PARTITIONS, 2 x 3 rounded up to a power of two)
    assert p["broker ingress MB/s, RF 1"] == pytest.approx(2_000 * 7_100 / 1e6)
    assert p["broker egress MB/s, RF 1"] == pytest.approx(2_000 * 2_100 / 1e6)
    raw = X["event_bytes"] + X["decision_raw_bytes"] + X["changelog_raw_bytes"]
    assert p["broker ingress MB/s, RF 1, RB_STATE_CODEC=json, RB_PRODUCER_COMPRESSION=none"] == pytest.approx(
        2_000 * raw / 1e6
    )
    assert p["broker ingress MB/s, RF 3"] == pytest.approx(3 * 14.2)
    assert p["broker egress MB/s, RF 3"] == pytest.approx(4.2 + 2 * 14.2)
    # runs last 40 x 5 s = 200 s: 50 finish a second, each kept 3,600 s
    assert p["runs held (live + finished in retention)"] == pytest.approx(10_000 + 50 * 3_600)
    assert p["RocksDB GB, live runs"] == pytest.approx(10_000 * 20_000 / 1e9)
    held = 190_000  # the compacted changelog keeps what the table holds of each run
    assert p["changelog compacted GB (a day's tombstones)"] == pytest.approx(
        (held * 20_000 + 50 * 86_400 * 100) / 1e9
    )
    assert p["worker RSS MB per process"] == pytest.approx(400 + held / 3 * 3 / 1e3)
    assert p["embedding MB per worker process"] == 160


def test_processes_round_up_and_partitions_leave_room_to_double() -> None:
    p = sizing.plan(100_000, 5.0, 0.6, X, CFG)  # 20,000 steps/s x 900 us / 0.6 = 30 loops
    assert p["worker processes"] == 30
    assert p["partitions"] == 64


def test_core_measured_on_other_steps_moves_the_cpu() -> None:
    p = sizing.plan(10_000, 5.0, 0.6, X | {"core_us": sizing.SYNTHETIC_CORE_US + 500}, CFG)
    assert p["worker CPU us/step (codec, core adjusted)"] == pytest.approx(1_600)
    assert p["worker cores"] == pytest.approx(2_000 * 1_600 / 1e6 / 0.6)
    assert p["worker processes"] == 5  # ceil(2,000 x 1,400 us / 0.6 / 1e6) = ceil(4.67)


def test_monotonic_in_runs() -> None:
    plans = [sizing.plan(n, 5.0, 0.6, X, CFG) for n in (1_000, 10_000, 100_000, 1_000_000)]
    for k in plans[0]:
        if k.startswith(("worker CPU us/step", "embedding")):
            continue
        vals = [p[k] for p in plans]
        assert vals == sorted(vals), k


def test_settings_read_from_the_source() -> None:
    assert sizing.setting("finished_retention_s") == 3600.0
    assert sizing.setting("idle_timeout_s") == 86400.0
    assert sizing.setting("DEFAULT_MAX_RUNS", sizing.RETENTION) == 100_000
    assert sizing.setting("DEFAULT_MAX_RUNS_PER_ORG", sizing.RETENTION) == 10_000


def codec(b: float, us: float) -> dict[str, float]:
    """One codec's row of bench.state_bytes's JSON."""
    return {"bytes_per_step": b, "us_per_step": us}


def sizing_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], src: dict[str, object]
) -> dict[str, Any]:
    """bench.sizing's JSON output for one bench.state_bytes source."""
    f = tmp_path / "state.json"
    f.write_text(json.dumps({"tau": src}))
    assert sizing.main(["--from", str(f), "--runs", "10000", "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_state_bytes_json_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = {
        "steps": 300,
        "runs": 10,
        "event": {"median": 1_500.0},
        "state": {"median": 12_000.0},
        "changelog": {"none/1": codec(12_100, 10), "none/16": codec(12_000, 10), "zstd/16": codec(3_000, 60)},
        "decisions": {"none/1": codec(900, 1), "none/16": codec(800, 1), "zstd/16": codec(90, 6)},
    }
    out = sizing_inputs(tmp_path, capsys, src)
    ins = {k: v["value"] for k, v in out["inputs"].items()}
    assert ins["changelog_bytes"] == 3_000 and ins["codec_us"] == 55 and ins["steps_per_run"] == 30
    assert out["inputs"]["cpu_us"]["from"].startswith("BENCHMARKS.md")
    assert out["plans"][0]["steps/s"] == 2_000


def test_states_as_the_codec_stores_them_size_the_store_and_the_changelog(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = {
        "steps": 300,
        "runs": 10,
        "state": {"median": 12_000.0},
        "stored": {"median": 2_400.0},
        "pack_us": 40.0,
        "changelog": {
            "none/1": codec(12_100, 10),
            "none/16": codec(12_000, 10),
            "zstd/16": codec(3_000, 60),
            "zstd/1": codec(4_000, 80),
        },
        "changelog_stored": {
            "none/1": codec(2_500, 5),
            "none/16": codec(2_450, 5),
            "zstd/16": codec(2_460, 15),
            "zstd/1": codec(2_520, 25),
        },
        "decisions": {
            "none/1": codec(900, 1),
            "none/16": codec(800, 1),
            "zstd/16": codec(90, 6),
            "zstd/1": codec(550, 21),
        },
    }
    ins = {k: v["value"] for k, v in sizing_inputs(tmp_path, capsys, src)["inputs"].items()}
    # one record a batch when measured: what the broker stores at these rates
    assert ins["state_bytes"] == 2_400 and ins["changelog_bytes"] == 2_520 and ins["decision_bytes"] == 550
    assert ins["changelog_raw_bytes"] == 12_100  # RB_STATE_CODEC=json, RB_PRODUCER_COMPRESSION=none
    assert ins["codec_us"] == 40 + (25 - 5) + (21 - 1)


@pytest.mark.parametrize(
    ("text", "msg"),
    [(None, "no such file"), ("{", "not JSON"), ('{"a": 1}', "neither"), ('{"figures": {}}', "no figure")],
)
def test_bad_input_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | None, msg: str
) -> None:
    f = tmp_path / "in.json"
    if text is not None:
        f.write_text(text)
    assert sizing.main(["--from", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sizing: ") and msg in err and err.count("\n") == 1
