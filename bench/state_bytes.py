"""What a step writes: run-state bytes (changelog and local store), decision bytes, and what the
producer's compression makes of them, on the real dev runs.

    .venv/bin/python -m bench.state_bytes [--source openhands_swe] [--batch 16] [--json FILE]

Each source file of `../shared/data/real-dev/` is replayed once through `streams.replay.Replayer`
(the worker's pipeline over states kept in memory). For every step event it keeps the sealed
`state_bytes` (the table value the worker writes, so the changelog record's value) and the
`decision_bytes` (the steering record's value), then prints per source:

- state bytes per step: median, p90, max (and the step event's own bytes, and the runs, in `--json`); and a per-field breakdown of the state (top-level
  fields, each monitor's memory and its own fields, as orjson writes them: median bytes and
  share of the median state);
- what the run table stores (`stored`: the state codec's zstd, the state in parts, `state_parts`;
  `stored_whole`: one record a state): every record it writes, parts and tombstones, per step;
- the changelog record as the producer sends it: a Kafka record batch built by aiokafka's own
  builder (`DefaultRecordBatchBuilder`, what `compression_type` drives), one record a batch
  (a quiet worker: no linger) and `--batch` records of shuffled steps a batch (a busy one), for each
  codec; bytes per step and the builder's CPU per step (thread clock, median of `--reps`);
- the same for decisions.

Codecs need aiokafka's optional codec library (cramjam, in the `worker` extra).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from bench.common import machine
from streams.core.state import TraceState
from streams.worker.run_table import RunTable

HERE = Path(__file__).resolve().parents[1]
REAL_DEV = HERE.parent / "shared" / "data" / "real-dev"
SOURCES = ("openhands_swe", "tau_retail")
# Kafka's codec ids (a record batch's attributes), as aiokafka's producer sets them
CODECS = {"none": 0, "gzip": 1, "lz4": 3, "zstd": 4}
CLOCK = 1_767_225_600.0


def replay(
    path: Path,
) -> tuple[list[tuple[bytes, bytes]], list[bytes], list[int], list[tuple[str, TraceState, bytes]]]:
    """(run key, state bytes), decision bytes and the event's own bytes of every step event of
    `path`; and every state the worker would store (run id, state, its bytes), run_start and
    run_finish too, in order."""
    from streams.core.results import Sealed
    from streams.embeddings.models import load_models
    from streams.replay import Replayer

    rp = Replayer(clock=lambda: CLOCK, sem=load_models().semantics())
    states: list[tuple[bytes, bytes]] = []
    decisions: list[bytes] = []
    events: list[int] = []
    stored: list[tuple[str, TraceState, bytes]] = []
    with path.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            raw = line.rstrip(b"\r\n")
            s = rp.pipeline.run(raw, CLOCK, rp.retriever.answer_now)
            if not isinstance(s, Sealed):
                continue
            if s.state is not None and s.state_bytes is not None and s.run_id is not None:
                stored.append((s.run_id, s.state, s.state_bytes))
            if s.event_type != "step":
                continue
            events.append(len(raw))
            if s.state_bytes is not None and s.run_id is not None:
                states.append((s.run_id.encode(), s.state_bytes))
            if s.decision_bytes is not None:
                decisions.append(s.decision_bytes)
    return states, decisions, events, stored


class Recorder(dict[bytes, bytes]):
    """A run table that keeps its writes in order: the changelog records a worker produces."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[bytes, bytes | None]] = []

    def __setitem__(self, k: bytes, v: bytes) -> None:
        self.log.append((k, v))
        super().__setitem__(k, v)

    def __delitem__(self, k: bytes) -> None:
        self.log.append((k, None))
        super().__delitem__(k)


def table_writes(
    stored: list[tuple[str, TraceState, bytes]], parts: bool
) -> tuple[list[tuple[bytes, bytes | None]], list[int], float]:
    """What the worker's run table (`RunTable`, its default codec; in parts or whole) writes for
    these states, in order (tombstones as None); the bytes it holds for the run after each
    state (the local store's share of the run); and its CPU a state (us: split, pack, write)."""
    t = Recorder()
    rt = RunTable(t, 0, lambda _r: 0, 1, parts=parts)
    held: list[int] = []
    prior: dict[str, TraceState] = {}
    cpu = 0
    for run_id, st, raw in stored:
        t0 = time.thread_time_ns()
        rt.store(run_id, raw, prior.get(run_id), st)
        cpu += time.thread_time_ns() - t0
        prior[run_id] = st
        key = run_id.encode()
        held.append(len(t[key]) + sum(len(t[k]) for k in rt._held_parts.get(key, (frozenset(), True))[0]))
    return t.log, held, cpu / 1000 / max(len(stored), 1)


def pct(xs: list[int] | list[float], p: float) -> float:
    s = sorted(xs)
    return float(s[min(len(s) - 1, int(p * len(s)))]) if s else 0.0


def breakdown(states: list[bytes]) -> dict[str, float]:
    """Median bytes of each part of the state, as orjson writes it (`monitors.<key>` and
    `monitors.<key>.<field>` for the monitors' memories): fields added later show up too."""
    parts: dict[str, list[int]] = defaultdict(list)
    for raw in states:
        d = orjson.loads(raw)
        for k, v in d.items():
            parts[k].append(len(orjson.dumps(v)) + len(k) + 4)  # "k": ... ,
            if k in ("monitors", "config") and isinstance(v, dict):
                for mk, mv in v.items():
                    parts[f"{k}.{mk}"].append(len(orjson.dumps(mv)) + len(mk) + 4)
                    if k == "monitors" and isinstance(mv, dict):
                        for fk, fv in mv.items():
                            parts[f"{k}.{mk}.{fk}"].append(len(orjson.dumps(fv)) + len(fk) + 4)
    n = len(states)
    # a part missing from some states counts 0 there
    return {k: statistics.median([*v, *[0] * (n - len(v))]) for k, v in parts.items()}


def batches(records: Sequence[tuple[bytes, bytes | None]], codec: int, per_batch: int) -> tuple[int, float]:
    """Total batch bytes and the builder's CPU (ns), records `per_batch` to a batch. Batches of
    several records take them in a fixed shuffled order: a busy worker's batch holds many runs'
    records (a file's consecutive steps are one run's, nearly alike, and compress far better)."""
    if per_batch > 1:
        records = random.Random(52).sample(records, len(records))
    total, cpu = 0, 0
    for i in range(0, len(records), per_batch):
        t0 = time.thread_time_ns()
        b = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 20)
        for off, (k, v) in enumerate(records[i : i + per_batch]):
            b.append(off, 1_767_225_600_000, k, v, [])
        total += len(b.build())
        cpu += time.thread_time_ns() - t0
    return total, float(cpu)


def codec_table(
    records: Sequence[tuple[bytes, bytes | None]], per_batch: int, reps: int, steps: int | None = None
) -> dict[str, dict[str, float]]:
    """Bytes and CPU a step for each codec, the records of `steps` steps (default: a record a step)."""
    out: dict[str, dict[str, float]] = {}
    n = max(steps or len(records), 1)
    for name, codec in CODECS.items():
        for pb in sorted({1, per_batch}):
            sizes, cpus = [], []
            for _ in range(reps):
                size, cpu = batches(records, codec, pb)
                sizes.append(size)
                cpus.append(cpu)
            out[f"{name}/{pb}"] = {
                "bytes_per_step": sizes[0] / n,
                "us_per_step": statistics.median(cpus) / 1000 / n,
                "us_min": min(cpus) / 1000 / n,
                "us_max": max(cpus) / 1000 / n,
            }
    return out


def measure(path: Path, per_batch: int, reps: int) -> dict[str, Any]:
    states, decisions, events, kept = replay(path)
    sizes = [len(v) for _, v in states]
    dsizes = [len(d) for d in decisions]
    steps = max(len(states), 1)
    out: dict[str, Any] = {
        "steps": len(states),
        "runs": len({k for k, _ in states}),
        "event": {"median": pct(events, 0.5), "p90": pct(events, 0.9), "max": max(events, default=0)},
        "state": {"median": pct(sizes, 0.5), "p90": pct(sizes, 0.9), "max": max(sizes, default=0)},
        "decision": {"median": pct(dsizes, 0.5), "p90": pct(dsizes, 0.9), "max": max(dsizes, default=0)},
        "fields": breakdown([v for _, v in states]),
        "changelog": codec_table(states, per_batch, reps),
        "decisions": codec_table([(b"k" * 20, d) for d in decisions], per_batch, reps),
    }
    # What the worker writes by default (the state codec's zstd with its dictionary, the state
    # in parts: `state_parts`), and whole, as before: every record the run table writes
    # (run_start and run_finish too, parts and tombstones), per step event.
    for layout, parts in (("", True), ("_whole", False)):
        log, held, store_us = table_writes(kept, parts)
        out[f"stored{layout}"] = {
            "median": pct(held, 0.5),
            "p90": pct(held, 0.9),
            "max": max(held, default=0),
        }
        out[f"pack_us{layout}"] = store_us * len(kept) / steps
        out[f"records{layout}"] = len(log) / steps
        out[f"changelog_stored{layout}"] = codec_table(log, per_batch, reps, steps)
    return out


def show(src: str, r: dict[str, Any], per_batch: int, top: int) -> None:
    st = r["state"]
    print(f"\n## {src}: {r['steps']} steps")
    print(
        f"state bytes per step: median {st['median']:,.0f}, p90 {st['p90']:,.0f}, max {st['max']:,.0f}; "
        f"decision: median {r['decision']['median']:,.0f}, max {r['decision']['max']:,.0f}"
    )
    print("\n| part of the state | median bytes | share of the median state |")
    print("|---|---:|---:|")
    fields = sorted(r["fields"].items(), key=lambda kv: -kv[1])
    for k, v in fields[:top]:
        print(f"| `{k}` | {v:,.0f} | {100 * v / st['median']:.1f}% |")
    for layout, name in (("", "in parts (the default)"), ("_whole", "whole (RB_STATE_LAYOUT=whole)")):
        sd = r[f"stored{layout}"]
        print(
            f"stored {name}, the state codec's zstd with its dictionary: a run holds median {sd['median']:,.0f}, "
            f"p90 {sd['p90']:,.0f}, max {sd['max']:,.0f} bytes; {r[f'records{layout}']:.2f} records and "
            f"{r[f'pack_us{layout}']:.0f} us of the table's CPU a step"
        )
    for what in ("changelog", "changelog_stored", "changelog_stored_whole", "decisions"):
        rows = r[what]
        # the stored state's ratios are to the uncompressed JSON's changelog, as the others'
        ref = r["decisions" if what == "decisions" else "changelog"]
        base = {pb: ref[f"none/{pb}"]["bytes_per_step"] for pb in sorted({1, per_batch})}
        print(
            f"\n| {what}: codec / records a batch | bytes per step | ratio to none | CPU us per step (min-max) |"
        )
        print("|---|---:|---:|---:|")
        for k, v in rows.items():
            pb = int(k.split("/")[1])
            print(
                f"| {k} | {v['bytes_per_step']:,.0f} | {base[pb] / v['bytes_per_step']:.2f}x | "
                f"{v['us_per_step']:.1f} ({v['us_min']:.1f}-{v['us_max']:.1f}) |"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--source", action="append", help=f"a file of real-dev without .jsonl (default: {SOURCES})"
    )
    ap.add_argument("--data", type=Path, default=REAL_DEV, help="the real-dev folder")
    ap.add_argument("--batch", type=int, default=16, help="records a batch for the busy-worker rows")
    ap.add_argument("--reps", type=int, default=3, help="timing repetitions of each codec")
    ap.add_argument("--top", type=int, default=30, help="parts of the state shown")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    sources = args.source or list(SOURCES)
    paths = {s: args.data / f"{s}.jsonl" for s in sources}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        print(f"state_bytes: not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    from aiokafka.codec import has_lz4, has_zstd

    if not (has_lz4() and has_zstd()):
        print(
            "state_bytes: aiokafka has no lz4/zstd codec: pip install 'rb-streams[worker]'", file=sys.stderr
        )
        return 2
    print(f"machine: {machine()}")
    got = {}
    for src, path in paths.items():
        got[src] = measure(path, args.batch, args.reps)
        show(src, got[src], args.batch, args.top)
    if args.json:
        args.json.write_text(json.dumps(got, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
