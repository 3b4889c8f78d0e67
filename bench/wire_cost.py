"""Bytes on the wire per step: one event per step (ours) vs posting the whole trace each step.

    .venv/bin/python -m bench.wire_cost [--max-steps 2000] [--plot]

Ours: the exact bytes `SteeringClient.step` publishes (streams.agent.client.step_event, orjson),
plus Kafka's per-record framing, counted as 70 bytes (a record-batch header of 61 bytes
when a record travels alone, plus the record's varints and key; less when batched).
The decision coming back is the same size either way and is left out. Anchor: the hosted design posts the current
trace to an evaluate endpoint on every step (up to 2,000 steps per request), so step k sends
all k steps so far. Steps are synthetic coding-agent steps (streams.local.simulate), the same in
both designs, serialised with orjson in both.
"""

from __future__ import annotations

import argparse
import time

import orjson

from bench.common import log, machine, results_dir
from streams.agent.client import step_event
from streams.kafka import wire
from streams.local.simulate import trajectory

KAFKA_FRAMING = 70
ANCHOR_MAX_STEPS = 2000
LENGTHS = (10, 50, 100, 500, 1000, 2000)


def measure(max_steps: int) -> list[dict[str, int]]:
    task, steps = trajectory("healthy", max_steps, seed=7)
    ours_total = 0
    anchor_total = 0
    trace: list[bytes] = []  # each step as the anchor's trace element
    trace_bytes = 0
    rows = []
    envelope = len(
        orjson.dumps({"model": "claude-sonnet-4-6", "task_profile": "coding", "task": task, "trace": []})
    )
    for k, payload in enumerate(steps, start=1):
        ev = step_event("run-0123456789", k, **payload)
        ours = len(wire.dumps(ev)) + KAFKA_FRAMING
        element = orjson.dumps({key: v for key, v in payload.items() if v is not None})
        trace.append(element)
        trace_bytes += len(element) + (1 if k > 1 else 0)  # comma between elements
        if len(trace) > ANCHOR_MAX_STEPS:
            trace_bytes -= len(trace.pop(0)) + 1
        anchor = envelope + trace_bytes
        ours_total += ours
        anchor_total += anchor
        if k in LENGTHS or k == max_steps:
            rows.append(
                {
                    "steps": k,
                    "ours_step": ours,
                    "anchor_step": anchor,
                    "ours_total": ours_total,
                    "anchor_total": anchor_total,
                }
            )
            log(f"step {k}: ours {ours} B/step, anchor {anchor} B/step")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-steps", type=int, default=2000)
    ap.add_argument(
        "--plot", action="store_true", help="write bench/results/wire_cost.png (needs matplotlib)"
    )
    args = ap.parse_args()
    rows = measure(args.max_steps)
    print(f"\nmachine: {machine()}  date: {time.strftime('%Y-%m-%d')}")
    print(
        "| run length | ours: bytes at this step | whole trace: bytes at this step | ours: run total | whole trace: run total | ratio (total) |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['steps']} | {r['ours_step']:,} | {r['anchor_step']:,} | {r['ours_total']:,} | "
            f"{r['anchor_total']:,} | {r['anchor_total'] / r['ours_total']:.0f}x |"
        )
    last = rows[-1]
    print(
        f"SUMMARY wire_cost: a {last['steps']}-step run sends {last['ours_total'] / 1e6:.2f} MB as one event per "
        f"step vs {last['anchor_total'] / 1e6:.1f} MB posting the whole trace each step "
        f"({last['anchor_total'] / last['ours_total']:.0f}x); per step flat at ~{last['ours_step']} B vs "
        f"{last['anchor_step']:,} B at step {last['steps']}"
    )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        ks = [r["steps"] for r in rows]
        ax.plot(ks, [r["ours_total"] for r in rows], "o-", label="one event per step (rb-streams)")
        ax.plot(ks, [r["anchor_total"] for r in rows], "s-", label="whole trace per step")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("run length (steps)")
        ax.set_ylabel("bytes sent by the agent")
        ax.legend()
        fig.tight_layout()
        fig.savefig(results_dir() / "wire_cost.png", dpi=110)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
