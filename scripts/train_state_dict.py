"""Train the zstd dictionary the worker compresses run states with (streams/worker/state_codec.py).

    .venv/bin/python scripts/train_state_dict.py [--id 2] [--runs 240] [--steps 60]

Synthetic fleets only (`streams.local.simulate`, seeds far from the benchmarks' 0-199), never
the dev runs: the dev replays' figures in BENCHMARKS.md §12 are measured on runs the
dictionary never saw. States come from `streams.replay.Replayer`, the worker's own pipeline,
with monitors and E-traces on and off, so the dictionary knows both a monitored run's memories
and an FSM-only state. A new dictionary gets a new id (a new file); shipped ones are never
changed or removed (states written with them must keep loading), and `CURRENT_DICT` names the
one new states are written with.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import orjson
import zstandard

from streams.core.results import Sealed
from streams.embeddings.models import load_models
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.replay import Replayer
from streams.worker.state_codec import LEVEL, dictionary_path
from tests.factories import run_start, step

SEED0 = 10_000  # the benchmarks' fleets use seeds 0 to a few hundred
CLOCK = 1_767_225_600.0
SAMPLES = 4000  # states the trainer reads (~100x the dictionary's size)
DICT_BYTES = 64 * 1024


def fleet_states(runs: int, steps: int) -> list[bytes]:
    rp = Replayer(clock=lambda: CLOCK, sem=load_models().semantics())
    out: list[bytes] = []
    gens = []
    for i in range(runs):
        on = i % 4 != 3  # a quarter of the runs FSM-only
        task, gen = trajectory(BEHAVIOURS[i % len(BEHAVIOURS)], steps, seed=SEED0 + i)
        gens.append((f"train-{i}", gen))
        start = run_start(
            f"train-{i}",
            task=task,
            model_routing={"FAST": "s", "SLOW": "b"},
            monitors_enabled=on,
            e_traces_enabled=on,
        )
        rp.pipeline.run(orjson.dumps(start), CLOCK, rp.retriever.answer_now)
    for k in range(1, steps + 1):
        for rid, gen in gens:
            s = rp.pipeline.run(orjson.dumps(step(rid, k, **next(gen))), CLOCK, rp.retriever.answer_now)
            if isinstance(s, Sealed) and s.state_bytes is not None:
                out.append(s.state_bytes)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--id", type=int, default=1, help="the dictionary's id (a new one for each new dictionary)"
    )
    ap.add_argument("--runs", type=int, default=240)
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args(argv)
    dest = Path(__file__).resolve().parents[1] / "streams" / dictionary_path(args.id)
    if dest.exists():
        print(f"train_state_dict: {dest} exists: a shipped dictionary is never changed", file=sys.stderr)
        return 2
    states = fleet_states(args.runs, args.steps)
    samples = random.Random(args.id).sample(states, min(SAMPLES, len(states)))
    d = zstandard.train_dictionary(DICT_BYTES, samples, dict_id=args.id, level=LEVEL)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(d.as_bytes())
    c = zstandard.ZstdCompressor(level=LEVEL, dict_data=d)
    raw = sum(len(s) for s in states)
    packed = sum(len(c.compress(s)) for s in states)
    print(
        f"{dest}: {len(d.as_bytes()):,} bytes, id {d.dict_id()}; {len(states):,} states, 1/{raw / packed:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
