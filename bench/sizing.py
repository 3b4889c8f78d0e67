"""A sizing plan: what N concurrent runs at one step every S seconds need, from measured inputs.

    .venv/bin/python -m bench.sizing [--from state.json] [--from throughput.json] [--runs N]
        [--step-seconds 5] [--headroom 0.6] [--json]

Inputs come from the JSON files the benchmarks write (`--from`, repeatable):
- `bench.state_bytes --json FILE`: state bytes per step as the table stores them (the state
  codec's zstd with its dictionary: RocksDB), changelog and decision bytes per step as record
  batches (zstd, the producer's default, one record a batch: what the broker stores at these
  rates, BENCHMARKS.md 12), the codecs' CPU per step, step event bytes, steps per run (`--source` picks one
  source, default: the largest state);
- `bench.throughput --json FILE` (or bench/results/headline-throughput.json): the worker's CPU
  per step with everything on (the process with its embedding child, and its event loop) and
  the broker's.
The worker's CPU was measured on the synthetic fleet; `--core-us` (the core's CPU per step on
the steps to size for, e.g. bench.replay_cost's replay of a real source) adds its difference to
the synthetic core's. An input no file gave is a flag whose default is the latest figure in
BENCHMARKS.md; the output says where every input came from. Retention and idle timeout are the worker's
defaults (`streams.settings.Settings`: finished_retention_s, idle_timeout_s), read here.
Stdlib only (the settings are read from the source text, not imported).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
SETTINGS = HERE / "streams" / "settings.py"
RETENTION = HERE / "streams" / "core" / "retention.py"
ON = "rb-streams worker, monitors + E-traces on"
KAFKA_SEGMENT_BYTES = 1 << 30  # Kafka's segment.bytes default: the active segment is never compacted
MB = 1e6
# The core's CPU per step (no Kafka) on the synthetic fleet bench.throughput drains: BENCHMARKS.md
# 0, flat cost at step 10, cold. A `--core-us` measured on other steps (bench.replay_cost's
# replay of a real source) moves cpu_us and loop_us by the difference.
SYNTHETIC_CORE_US = 358.6
GB = 1e9

# name: (default, unit, where the default comes from)
DEFAULTS: dict[str, tuple[float, str, str]] = {
    "cpu_us": (
        1447.0,
        "us",
        "BENCHMARKS.md 2: worker process CPU per event with its embedding child, everything on",
    ),
    "loop_us": (1055.0, "us", "BENCHMARKS.md 2: worker event-loop CPU per event, everything on"),
    "core_us": (
        SYNTHETIC_CORE_US,
        "us",
        "BENCHMARKS.md 0: the core's CPU per step on the synthetic fleet cpu_us was measured on",
    ),
    "codec_us": (
        157.0,
        "us",
        "BENCHMARKS.md 12: OpenHands, the run table (parts, the state codec) 108 us, zstd over no codec +30 us changelog, +19 us decision",
    ),
    "broker_us": (280.0, "us", "BENCHMARKS.md 2: broker CPU per event, everything on"),
    "state_bytes": (
        8004.0,
        "B",
        "BENCHMARKS.md 12: OpenHands run's stored bytes, median (RocksDB: its record and parts)",
    ),
    "changelog_bytes": (
        4771.0,
        "B",
        "BENCHMARKS.md 12: OpenHands changelog per step as the table writes it (parts), zstd, 1 record a batch",
    ),
    "changelog_raw_bytes": (25699.0, "B", "BENCHMARKS.md 12: OpenHands changelog, no codec, 1 a batch"),
    "decision_bytes": (556.0, "B", "BENCHMARKS.md 12: OpenHands decision, zstd, 1 a batch"),
    "decision_raw_bytes": (930.0, "B", "BENCHMARKS.md 12: OpenHands decision, no codec, 1 a batch"),
    "event_bytes": (2000.0, "B", "assumed: a 2 KB step event (bench.state_bytes --json measures it)"),
    "steps_per_run": (30.0, "", "assumed: the soak's 30-step runs (bench.state_bytes --json measures it)"),
    "worker_rss_mb": (383.3, "MB", "BENCHMARKS.md 7: worker RSS at minute 60 of the soak (caches full)"),
    "embed_mb": (165.6, "MB", "BENCHMARKS.md 7: embedding process RSS at minute 60 of the soak"),
    "run_kb": (2.8, "KB", "streams/core/retention.py: worker RSS per run held (a 40,000-run flood)"),
    "tombstone_bytes": (
        550.0,
        "B",
        "estimate: an evicted run's tombstones, its record's and its ~4 parts' (RB_STATE_LAYOUT=parts), "
        "each 70 B record framing (BENCHMARKS.md 4) + a 36-46 byte key",
    ),
}


class InputError(Exception):
    pass


def setting(name: str, path: Path = SETTINGS) -> float:
    """A numeric default of `Settings` (or a module constant), read from the source text."""
    text = path.read_text()
    m = re.search(rf"^\s*{name}\s*:\s*\w+\s*=\s*Field\(\s*([0-9_.]+)", text, re.M) or re.search(
        rf"^{name}\s*=\s*([0-9_.]+)", text, re.M
    )
    if not m:
        raise InputError(f"{name} not found in {path}")
    return float(m.group(1).replace("_", ""))


def load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None


def from_state_bytes(d: dict[str, Any], source: str | None, path: Path) -> dict[str, tuple[float, str]]:
    """Inputs from bench.state_bytes's JSON: {source: {"state", "changelog", "decisions", ...}}."""
    if not d:
        raise InputError(f"{path}: no source in it")
    if source is None:
        source = max(d, key=lambda s: float(d[s]["state"]["median"]))
    if source not in d:
        raise InputError(f"{path}: no source {source!r} (has {', '.join(sorted(d))})")
    r = d[source]
    raw_cl, dc = r["changelog"], r["decisions"]
    # Records a batch: one, where measured. A partition's batch holds one changelog record (and
    # one decision) at the rates sized here: the throughput benchmark's broker-stored bytes per
    # event (BENCHMARKS.md 12) match one record a batch, not sixteen. Else the fullest measured.
    sizes = {int(k.split("/")[1]) for k in raw_cl if k.startswith("zstd/")}
    busy = 1 if 1 in sizes else max(sizes)
    where = f"{path.name} [{source}]"
    # the worker stores states through its codec (RB_STATE_CODEC=zstd): its bytes when measured
    stored = "changelog_stored" in r and "stored" in r
    cl = r["changelog_stored"] if stored else raw_cl
    pack_us = float(r.get("pack_us", 0.0)) if stored else 0.0
    got = {
        "state_bytes": (
            float(r["stored"]["median"] if stored else r["state"]["median"]),
            f"{where}: state median" + (", as stored" if stored else ""),
        ),
        "changelog_bytes": (
            float(cl[f"zstd/{busy}"]["bytes_per_step"]),
            f"{where}: changelog{' (stored states)' if stored else ''} zstd/{busy}",
        ),
        "changelog_raw_bytes": (
            float(raw_cl["none/1"]["bytes_per_step"]),
            f"{where}: changelog none/1 (JSON)",
        ),
        "decision_bytes": (float(dc[f"zstd/{busy}"]["bytes_per_step"]), f"{where}: decisions zstd/{busy}"),
        "decision_raw_bytes": (float(dc["none/1"]["bytes_per_step"]), f"{where}: decisions none/1"),
        "codec_us": (
            pack_us
            + float(cl[f"zstd/{busy}"]["us_per_step"] - cl[f"none/{busy}"]["us_per_step"])
            + float(dc[f"zstd/{busy}"]["us_per_step"] - dc[f"none/{busy}"]["us_per_step"]),
            f"{where}: {'the state codec, then ' if stored else ''}zstd over none/{busy}, changelog + decisions",
        ),
    }
    if "event" in r:
        got["event_bytes"] = (float(r["event"]["median"]), f"{where}: step event median")
    if r.get("runs"):
        got["steps_per_run"] = (float(r["steps"]) / float(r["runs"]), f"{where}: steps / runs")
    return got


def from_throughput(d: dict[str, Any], path: Path) -> dict[str, tuple[float, str]]:
    """Inputs from bench.throughput's JSON: {"figures": {"<path> <figure>": {"median": ...}}}."""
    f = d["figures"]
    got: dict[str, tuple[float, str]] = {}
    for key, fig in (
        ("cpu_us", "process CPU us/event"),
        ("loop_us", "event-loop CPU us/event"),
        ("broker_us", "broker CPU us/event"),
    ):
        if f"{ON} {fig}" in f:
            got[key] = (float(f[f"{ON} {fig}"]["median"]), f"{path.name}: {fig}, median")
    if not got:
        raise InputError(f"{path}: no figure of {ON!r} in it")
    return got


def inputs(
    files: list[Path], source: str | None, flags: dict[str, float | None]
) -> dict[str, tuple[float, str]]:
    """Every input: a flag given, else a file's figure, else the BENCHMARKS.md default."""
    got = {k: (v, src) for k, (v, _u, src) in DEFAULTS.items()}
    for path in files:
        d = load(path)
        try:
            if isinstance(d, dict) and "figures" in d:
                got.update(from_throughput(d, path))
            elif isinstance(d, dict) and all(isinstance(v, dict) and "changelog" in v for v in d.values()):
                got.update(from_state_bytes(d, source, path))
            else:
                raise InputError(f"{path}: neither bench.state_bytes nor bench.throughput JSON")
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}: missing or bad figure {e}") from None
    for k, v in flags.items():
        if v is not None:
            got[k] = (v, "flag")
    return got


def pow2(n: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def plan(
    runs: int, step_s: float, headroom: float, x: dict[str, float], cfg: dict[str, float]
) -> dict[str, float]:
    """The figures for `runs` concurrent runs, one step each every `step_s` seconds."""
    rate = runs / step_s
    extra = x["codec_us"] + x["core_us"] - SYNTHETIC_CORE_US
    step_us = x["cpu_us"] + extra
    cores = rate * step_us / 1e6 / headroom
    # aiokafka compresses on the event loop, and the core runs there: both are the loop's
    procs = max(1, math.ceil(rate * (x["loop_us"] + extra) / 1e6 / headroom))
    partitions = max(int(cfg["partitions"]), pow2(2 * procs))
    run_s = x["steps_per_run"] * step_s
    finished_per_s = runs / run_s  # a run ends, another starts: N stay concurrent
    held_finished = finished_per_s * cfg["finished_retention_s"]
    held = runs + held_finished
    ingress = rate * (x["event_bytes"] + x["decision_bytes"] + x["changelog_bytes"])
    raw_ingress = rate * (x["event_bytes"] + x["decision_raw_bytes"] + x["changelog_raw_bytes"])
    # the worker reads the steps, the agents their decisions; the changelog is read on recovery only
    egress = rate * (x["event_bytes"] + x["decision_bytes"])
    tomb_day = finished_per_s * 86400
    # what the compacted changelog keeps of a run is what the table holds of it (its record and parts)
    compacted = held * x["state_bytes"] + tomb_day * x["tombstone_bytes"]
    return {
        "concurrent runs": runs,
        "steps/s": rate,
        "worker CPU us/step (codec, core adjusted)": step_us,
        "worker cores": cores,
        "worker processes": procs,
        "partitions": partitions,
        "broker cores (one broker's CPU/step)": rate * x["broker_us"] / 1e6 / headroom,
        "broker ingress MB/s, RF 1": ingress / MB,
        "broker egress MB/s, RF 1": egress / MB,
        "broker ingress MB/s, RF 1, RB_STATE_CODEC=json, RB_PRODUCER_COMPRESSION=none": raw_ingress / MB,
        "broker ingress MB/s, RF 3": 3 * ingress / MB,
        "broker egress MB/s, RF 3": (egress + 2 * ingress) / MB,
        "runs held (live + finished in retention)": held,
        "RocksDB GB, live runs": runs * x["state_bytes"] / GB,
        "RocksDB GB, runs held": held * x["state_bytes"] / GB,
        "changelog written GB/day": rate * x["changelog_bytes"] * 86400 / GB,
        "changelog compacted GB (a day's tombstones)": compacted / GB,
        "changelog before cleaning GB (<= 2x + segments)": (2 * compacted + partitions * KAFKA_SEGMENT_BYTES)
        / GB,
        "embedding MB per worker process": x["embed_mb"],
        "worker RSS MB per process": x["worker_rss_mb"] + held / procs * x["run_kb"] / 1e3,
    }


def fmt(v: float) -> str:
    if v >= 100 or float(v).is_integer():
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="files", type=Path, action="append", default=[], help="a benchmark's JSON")
    ap.add_argument("--source", help="the bench.state_bytes source used (default: the largest state)")
    ap.add_argument("--runs", type=int, action="append", help="concurrent runs (default 1k, 10k, 100k)")
    ap.add_argument("--step-seconds", type=float, default=5.0, help="seconds between a run's steps")
    ap.add_argument("--headroom", type=float, default=0.6, help="target CPU utilisation of a core")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    for k, (_v, unit, _src) in DEFAULTS.items():
        ap.add_argument(f"--{k.replace('_', '-')}", type=float, help=f"override ({unit})")
    args = ap.parse_args(argv)
    if args.step_seconds <= 0 or not 0 < args.headroom <= 1 or any(r <= 0 for r in args.runs or []):
        print("sizing: --step-seconds and --runs must be > 0, --headroom in (0, 1]", file=sys.stderr)
        return 2
    try:
        got = inputs(args.files, args.source, {k: getattr(args, k) for k in DEFAULTS})
        cfg = {
            "partitions": setting("partitions"),
            "finished_retention_s": setting("finished_retention_s"),
            "idle_timeout_s": setting("idle_timeout_s"),
            "max_runs": setting("DEFAULT_MAX_RUNS", RETENTION),
            "max_runs_per_org": setting("DEFAULT_MAX_RUNS_PER_ORG", RETENTION),
        }
    except InputError as e:
        print(f"sizing: {e}", file=sys.stderr)
        return 2
    x = {k: v for k, (v, _src) in got.items()}
    rows = [plan(n, args.step_seconds, args.headroom, x, cfg) for n in args.runs or [1_000, 10_000, 100_000]]
    if args.json:
        out = {
            "step_seconds": args.step_seconds,
            "headroom": args.headroom,
            "settings": cfg,
            "inputs": {k: {"value": v, "from": src} for k, (v, src) in got.items()},
            "plans": rows,
        }
        print(json.dumps(out, indent=1))
        return 0
    print(f"One step per run every {args.step_seconds:g} s; CPU sized for {args.headroom:.0%} of a core.\n")
    print("| figure | " + " | ".join(f"{int(r['concurrent runs']):,} runs" for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for k in list(rows[0])[1:]:
        print(f"| {k} | " + " | ".join(fmt(r[k]) for r in rows) + " |")
    print("\nInputs:")
    for k, (v, src) in got.items():
        print(f"- {k} = {v:,.1f} {DEFAULTS[k][1]} ({src})")
    print(
        f"Settings (streams/settings.py defaults): finished_retention_s={cfg['finished_retention_s']:g}, "
        f"idle_timeout_s={cfg['idle_timeout_s']:g} (abandoned runs stay that long: not counted above), "
        f"partitions={cfg['partitions']:g}, max_runs={cfg['max_runs']:,.0f} and "
        f"max_runs_per_org={cfg['max_runs_per_org']:,.0f} (RB_MAX_RUNS, RB_MAX_RUNS_PER_ORG: past them "
        "run_start is dead-lettered; raise them past the runs held, or lower RB_FINISHED_RETENTION_S)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
