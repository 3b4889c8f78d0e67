"""Steering quality on real agent trajectories: replay labelled runs through the core and report.

Every run is replayed by `streams.replay.Replayer` (the worker's code path, no broker, no
pattern store: E-traces are out of scope here, monitors and routing are in). Per data set and
outcome it prints what a user of the steering would feel: how often monitors fire and inject,
whether loops and unverified submits are caught, where the difficulty FSM routes, and a sample
of the steering texts an agent would read.

    .venv/bin/python -m bench.quality                        # ../shared/data/real-dev + synthetic fleet
    .venv/bin/python -m bench.quality --data DIR --json out.json --samples 3

The figures are deterministic (no timing): one run is the measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.captainagent_convert import convert_lines, is_legacy, runs_of
from streams.core.monitors import MONITORS
from streams.embeddings.models import load_models
from streams.local.broker import REPO
from streams.replay import Replayer

DEFAULT_DATA = REPO.parent / "shared" / "data" / "real-dev"
LOOP_WINDOW = 3  # a labelled loop step counts as caught by a semantic_loop fire this close
STREAK_MIN = 2  # consecutive error observations that make an error streak
LONG_STREAK = 5
SYNTHETIC_OUTCOME = {"healthy": "success"}


@dataclass
class StepRecord:
    step: int
    state: str
    fired: list[str]
    monitor_text: str | None
    is_error: bool


@dataclass
class RunRecord:
    run_id: str
    dataset: str
    outcome: str  # success | failure | unknown
    label: dict[str, Any]
    steps: list[StepRecord] = field(default_factory=list)


def _group_runs(lines: Iterable[bytes]) -> Iterator[list[bytes]]:
    run: list[bytes] = []
    for line in lines:
        if not line.strip():
            continue
        if b'"run_start"' in line[:200] and orjson.loads(line).get("type") == "run_start" and run:
            yield run
            run = []
        run.append(line)
    if run:
        yield run


def replay_runs(
    dataset: str, lines: Iterable[bytes], labels: dict[str, dict[str, Any]], rp: Replayer | None = None
) -> list[RunRecord]:
    """Replay every run of a file; pair each step's decision with the step's own facts."""
    rp = rp or Replayer(clock=lambda: 1_767_225_600.0, sem=load_models().semantics())
    out: list[RunRecord] = []
    for run in _group_runs(lines):
        head = orjson.loads(run[0])
        rid = head["run_id"]
        label = labels.get(rid, {})
        rec = RunRecord(rid, dataset, label.get("outcome", "unknown"), label)
        for line in run:
            ev = orjson.loads(line)
            decision, _ = rp.feed(line)
            if ev.get("type") != "step" or decision is None:
                continue
            texts = [i["text"] for i in decision["injections"] if i["source"] == "monitor"]
            rec.steps.append(
                StepRecord(
                    step=decision["step"],
                    state=decision["fsm_state"],
                    fired=list(decision["monitors"]["fired"]),
                    monitor_text=texts[0] if texts else None,
                    is_error=bool(ev.get("observation_is_error")),
                )
            )
        out.append(rec)
    return out


def _share(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def _streaks(steps: list[StepRecord], at_least: int) -> list[list[StepRecord]]:
    """Maximal runs of consecutive error observations, at least `at_least` long."""
    found: list[list[StepRecord]] = []
    cur: list[StepRecord] = []
    for s in [*steps, None]:
        if s is not None and s.is_error:
            cur.append(s)
            continue
        if len(cur) >= at_least:
            found.append(cur)
        cur = []
    return found


def _loop_episodes(repeat_steps: list[int]) -> list[list[int]]:
    eps: list[list[int]] = []
    for k in sorted(repeat_steps):
        if eps and k - eps[-1][-1] <= LOOP_WINDOW:
            eps[-1].append(k)
        else:
            eps.append([k])
    return eps


def summarise(runs: list[RunRecord], samples: int = 2) -> dict[str, Any]:
    """The report for one group of runs (one data set and outcome)."""
    n_runs = len(runs)
    n_steps = sum(len(r.steps) for r in runs)
    per_monitor: dict[str, Any] = {}
    for m in MONITORS:
        fires = sum(1 for r in runs for s in r.steps if m in s.fired)
        runs_fired = sum(1 for r in runs if any(m in s.fired for s in r.steps))
        per_monitor[m] = {
            "runs_fired": _share(runs_fired, n_runs),
            "fires_per_100_steps": round(100 * fires / n_steps, 2) if n_steps else None,
        }
    inj = sum(1 for r in runs for s in r.steps if s.monitor_text)
    runs_inj = sum(1 for r in runs if any(s.monitor_text for s in r.steps))
    report: dict[str, Any] = {
        "runs": n_runs,
        "steps": n_steps,
        "runs_with_monitor_injection": _share(runs_inj, n_runs),
        "monitor_injections_per_100_steps": round(100 * inj / n_steps, 2) if n_steps else None,
        "monitors": per_monitor,
    }
    # semantic_loop against mechanically labelled exact-repeat loops
    episodes = caught = 0
    for r in runs:
        if not r.label.get("exact_repeat_loop"):
            continue
        fired_at = [s.step for s in r.steps if "semantic_loop" in s.fired]
        for ep in _loop_episodes(r.label.get("repeat_steps") or []):
            episodes += 1
            caught += any(any(abs(f - k) <= LOOP_WINDOW for k in ep) for f in fired_at)
    no_loop = [r for r in runs if "exact_repeat_loop" in r.label and not r.label["exact_repeat_loop"]]
    if episodes or no_loop:
        report["semantic_loop_labelled"] = {
            "loops": episodes,
            "caught_within_3_steps": _share(caught, episodes),
            "runs_without_loop": len(no_loop),
            "fired_on_runs_without_loop": _share(
                sum(1 for r in no_loop if any("semantic_loop" in s.fired for s in r.steps)), len(no_loop)
            ),
        }
    # verification_skip at the submit, against the unverified-edit label
    flagged: dict[bool, list[int]] = {True: [0, 0], False: [0, 0]}
    for r in runs:
        sub = r.label.get("submit_step")
        if sub is None or "submitted_with_unverified_edit" not in r.label:
            continue
        unverified = bool(r.label["submitted_with_unverified_edit"])
        near = any(abs(s.step - sub) <= 1 and "verification_skip" in s.fired for s in r.steps)
        flagged[unverified][0] += near
        flagged[unverified][1] += 1
    if flagged[True][1] or flagged[False][1]:
        report["verification_skip_at_submit"] = {
            "unverified_submits": flagged[True][1],
            "flagged_unverified": _share(*flagged[True]),
            "verified_submits": flagged[False][1],
            "flagged_verified": _share(*flagged[False]),
        }
    report["routing"] = routing(runs)
    report["samples"] = _samples(runs, samples)
    return report


def routing(runs: list[RunRecord]) -> dict[str, Any]:
    """Where the FSM sends the next call: overall, inside error streaks, and on error-free steps."""
    states: Counter[str] = Counter(s.state for r in runs for s in r.steps)
    total = sum(states.values())
    in_streak = [s for r in runs for st in _streaks(r.steps, STREAK_MIN) for s in st]
    streak_ids = {id(s) for s in in_streak}
    clean = [s for r in runs for s in r.steps if not s.is_error and id(s) not in streak_ids]
    long_runs = [r for r in runs if _streaks(r.steps, LONG_STREAK)]
    reached = sum(
        1 for r in long_runs if any(s.state == "SLOW" for st in _streaks(r.steps, LONG_STREAK) for s in st)
    )
    return {
        "states": {k: _share(v, total) for k, v in sorted(states.items())},
        "fast_in_error_streaks": _share(sum(s.state == "FAST" for s in in_streak), len(in_streak)),
        "error_streak_steps": len(in_streak),
        "runs_with_5plus_errors": len(long_runs),
        "slow_reached_in_5plus_streak": _share(reached, len(long_runs)),
        "slow_or_skip_on_error_free_steps": _share(
            sum(s.state in ("SLOW", "SKIP") for s in clean), len(clean)
        ),
        # routine stretches still routed cheap (issue 21: healthy runs keep reaching FAST)
        "fast_on_error_free_steps": _share(sum(s.state == "FAST" for s in clean), len(clean)),
        # the model mix of a model_routing {"FAST": cheap, "SLOW": strong, "SKIP": strong}
        "model_mix": {
            "cheap": _share(states["FAST"], total),
            "default": _share(states["NORMAL"] + states["INIT"] + states["END"], total),
            "strong": _share(states["SLOW"] + states["SKIP"], total),
        },
    }


def _samples(runs: list[RunRecord], k: int) -> dict[str, list[str]]:
    """The first k steering texts each monitor led with, spread over runs, for a person to read."""
    out: dict[str, list[str]] = defaultdict(list)
    for r in runs:
        taken: set[str] = set()
        for s in r.steps:
            if s.monitor_text and s.fired and s.fired[0] not in taken and len(out[s.fired[0]]) < k:
                taken.add(s.fired[0])
                out[s.fired[0]].append(f"{r.run_id} step {s.step}: {s.monitor_text}")
    return dict(out)


def load_labels(data: Path) -> dict[str, dict[str, Any]]:
    path = data / "labels.json"
    if not path.exists():
        return {}
    return {r["run_id"]: r for r in json.loads(path.read_text("utf-8"))["runs"]}


def synthetic_lines(runs_per_behaviour: int = 3, steps: int = 40) -> tuple[list[bytes], dict[str, Any]]:
    """The synthetic fleet as wire lines, labelled by behaviour (healthy = success)."""
    from streams.local.simulate import BEHAVIOURS, trajectory

    lines: list[bytes] = []
    labels: dict[str, Any] = {}
    for behaviour in BEHAVIOURS:
        for seed in range(runs_per_behaviour):
            rid = f"sim-{behaviour}-{seed}"
            task, gen = trajectory(behaviour, steps, seed)
            labels[rid] = {"outcome": SYNTHETIC_OUTCOME.get(behaviour, "failure"), "behaviour": behaviour}
            lines.append(
                orjson.dumps({"type": "run_start", "schema_version": 1, "run_id": rid, "task": task})
            )
            for k, payload in enumerate(gen, start=1):
                ev = {"type": "step", "schema_version": 1, "run_id": rid, "step": k, **payload}
                lines.append(orjson.dumps(ev))
            lines.append(orjson.dumps({"type": "run_finish", "schema_version": 1, "run_id": rid}))
    return lines, labels


def evaluate(data: Path | None, synthetic: bool = True, samples: int = 2) -> dict[str, Any]:
    """{data set: {outcome: report}} for every *.jsonl in `data` and the synthetic fleet."""
    results: dict[str, Any] = {}
    groups: list[tuple[str, list[RunRecord]]] = []
    if data is not None:
        labels = load_labels(data)
        for path in sorted(data.glob("*.jsonl")):
            raw = path.read_bytes().splitlines()
            lines = list(convert_lines(raw))
            groups.append((path.stem, replay_runs(path.stem, lines, labels)))
            if any(is_legacy(run) for run in runs_of(raw)):
                # also as recorded (the speaker in `action`): the monitors must hold on both forms
                groups.append((f"{path.stem} (as recorded)", replay_runs(path.stem, raw, labels)))
    if synthetic:
        lines, labels = synthetic_lines()
        recs = replay_runs("synthetic", lines, labels)
        groups.append(("synthetic", recs))
        results["synthetic_behaviours"] = {
            b: sorted({m for r in recs if r.label["behaviour"] == b for s in r.steps for m in s.fired})
            for b in dict.fromkeys(r.label["behaviour"] for r in recs)
        }
    for name, recs in groups:
        by_outcome: dict[str, list[RunRecord]] = defaultdict(list)
        for r in recs:
            by_outcome[r.outcome].append(r)
        results[name] = {o: summarise(rs, samples) for o, rs in sorted(by_outcome.items())}
        results[name]["all"] = summarise(recs, 0)
    return results


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.0%}" if x <= 1.0 else f"{x:.2f}"
    return str(x)


def print_report(results: dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout
    short = {m: m.split("_")[0][:6] + "_" + m.split("_")[-1][:5] for m in MONITORS}
    for name, by_outcome in results.items():
        if name == "synthetic_behaviours":
            continue
        print(f"\n== {name}", file=out)
        head = f"{'outcome':9} {'runs':>5} {'steps':>6} {'inj runs':>8} {'inj/100':>7}  " + " ".join(
            f"{short[m]:>14}" for m in MONITORS
        )
        print(head + "   (per monitor: runs fired / fires per 100 steps)", file=out)
        for outcome, rep in by_outcome.items():
            cells = " ".join(
                f"{_fmt(rep['monitors'][m]['runs_fired']):>6}/{rep['monitors'][m]['fires_per_100_steps']:>7.2f}"
                for m in MONITORS
            )
            print(
                f"{outcome:9} {rep['runs']:>5} {rep['steps']:>6} {_fmt(rep['runs_with_monitor_injection']):>8} "
                f"{rep['monitor_injections_per_100_steps']:>7.2f}  {cells}",
                file=out,
            )
        for outcome, rep in by_outcome.items():
            extra = []
            if (lo := rep.get("semantic_loop_labelled")) and lo["loops"]:
                extra.append(
                    f"loops caught {_fmt(lo['caught_within_3_steps'])} of {lo['loops']}; "
                    f"semantic_loop on {_fmt(lo['fired_on_runs_without_loop'])} of {lo['runs_without_loop']} loop-free runs"
                )
            if v := rep.get("verification_skip_at_submit"):
                extra.append(
                    f"verification_skip flags {_fmt(v['flagged_unverified'])} of {v['unverified_submits']} unverified "
                    f"and {_fmt(v['flagged_verified'])} of {v['verified_submits']} verified submits"
                )
            ro = rep["routing"]
            extra.append(
                "routing: "
                + " ".join(f"{k} {_fmt(v)}" for k, v in ro["states"].items())
                + f"; FAST in error streaks {_fmt(ro['fast_in_error_streaks'])} ({ro['error_streak_steps']} steps)"
                + f"; SLOW reached in {_fmt(ro['slow_reached_in_5plus_streak'])} of {ro['runs_with_5plus_errors']} runs with 5+ errors"
                + f"; SLOW/SKIP on error-free steps {_fmt(ro['slow_or_skip_on_error_free_steps'])}"
            )
            for line in extra:
                print(f"  [{outcome}] {line}", file=out)
            for m, texts in rep.get("samples", {}).items():
                for t in texts:
                    print(f"  [{outcome}] {m}: {' '.join(t.split())[:300]}", file=out)
    if beh := results.get("synthetic_behaviours"):
        print("\n== synthetic fleet: monitors fired per behaviour", file=out)
        for b, ms in beh.items():
            print(f"  {b:12} {', '.join(ms) or '-'}", file=out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Steering quality on labelled real agent trajectories.")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of *.jsonl runs and labels.json")
    p.add_argument("--no-synthetic", action="store_true", help="skip the synthetic fleet")
    p.add_argument("--samples", type=int, default=2, help="steering texts shown per monitor and outcome")
    p.add_argument("--json", type=Path, help="also write the full report here")
    a = p.parse_args(argv)
    data: Path | None = a.data
    if data is not None and not data.is_dir():
        print(f"quality: {data}: no such folder (use --data)", file=sys.stderr)
        return 2
    results = evaluate(data, synthetic=not a.no_synthetic, samples=a.samples)
    print_report(results)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1, ensure_ascii=False), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
