"""`rb-streams experiment report`: what an experiment's outcome records say, per arm and per
monitor, with honest intervals and an anytime-valid verdict (docs/experiments.md).

Input: outcome records (`streams/schemas/outcome.schema.json`) in the order they were written,
from JSONL files or the `<prefix>.outcomes` topic. Records without an experiment or an arm, or
of another experiment than `--experiment`, are left out and counted; a run's record seen again
(a re-send after a restart) counts once.

Runs are grouped by experiment name (over every org that runs it). A run succeeded when its
outcome is "success"; failures, stops by steering and abandoned runs did not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..core.guard import ARMS, MAX_MONITORS, NAME_CHARS, Guard, GuardSettings
from ..core.sequential import PairedStream, threshold
from ..shared.logsafe import safe_for_log
from .stats import newcombe, wilson

TEST_NAME = "paired mixture SPRT (anytime-valid)"
MAX_LINE_BYTES = 1 << 20


class ReportError(ValueError):
    """Input the report cannot read: one line naming the file and line."""


def read_jsonl(paths: Sequence[str]) -> Iterator[dict[str, Any]]:
    """The records of JSONL files, in file order. A missing file raises OSError; a line that is
    not a JSON object raises ReportError naming the file and line."""
    for path in paths:
        with Path(path).open("rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                if len(line) > MAX_LINE_BYTES:
                    raise ReportError(
                        f"{path}:{n}: a line over {MAX_LINE_BYTES} bytes, not an outcome record"
                    )
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise ReportError(f"{path}:{n}: not JSON ({exc})") from None
                if not isinstance(rec, dict):
                    raise ReportError(f"{path}:{n}: not a JSON object (an outcome record is one)")
                yield rec


@dataclass(frozen=True, slots=True)
class Row:
    """What the report reads of one outcome record."""

    run_id: str
    org: str
    experiment: str
    arm: str
    outcome: str
    steps: int
    cost: float
    estimated: bool
    interventions: int
    escalations: int
    stops: int
    fired: tuple[str, ...]
    compliance: Mapping[str, tuple[int, int]]  # monitor -> (complied, ignored)

    @property
    def success(self) -> bool:
        return self.outcome == "success"


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def row_of(r: Mapping[str, Any]) -> Row | None:
    """The record's row, or None: no experiment or arm (or not an outcome record at all)."""
    run_id, org, exp, arm, outcome = (r.get(k) for k in ("run_id", "org_id", "experiment", "arm", "outcome"))
    if not (
        isinstance(run_id, str) and isinstance(org, str) and isinstance(exp, str) and isinstance(outcome, str)
    ):
        return None
    if arm not in ARMS:
        return None
    cost = r.get("cost_usd")
    ivs = r.get("interventions")
    fired = r.get("first_fire")
    comp = r.get("compliance")
    compliance: dict[str, tuple[int, int]] = {}
    if isinstance(comp, dict):
        for name, c in list(comp.items())[:MAX_MONITORS]:
            if isinstance(name, str) and isinstance(c, dict):
                compliance[name[:NAME_CHARS]] = (_int(c.get("complied")), _int(c.get("ignored")))
    return Row(
        run_id,
        org[:NAME_CHARS],
        exp[:NAME_CHARS],
        str(arm),
        outcome,
        _int(r.get("steps")),
        float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0 else 0.0,
        r.get("cost_estimated") is True,
        sum(_int(v) for v in ivs.values()) if isinstance(ivs, dict) else 0,
        _int(r.get("escalations")),
        _int(r.get("stops")),
        tuple(sorted({k[:NAME_CHARS] for k in list(fired)[:MAX_MONITORS] if isinstance(k, str)}))
        if isinstance(fired, dict)
        else (),
        compliance,
    )


@dataclass
class _Arm:
    runs: int = 0
    successes: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    estimated: int = 0
    steps: int = 0
    interventions: int = 0
    escalations: int = 0
    stops: int = 0

    def add(self, r: Row) -> None:
        self.runs += 1
        self.successes += int(r.success)
        kind = _kind(r.outcome)
        self.outcomes[kind] = self.outcomes.get(kind, 0) + 1
        self.cost += r.cost
        self.estimated += int(r.estimated)
        self.steps += r.steps
        self.interventions += r.interventions
        self.escalations += r.escalations
        self.stops += r.stops

    def summary(self) -> dict[str, Any]:
        n = self.runs
        low, high = wilson(self.successes, n)
        return {
            "runs": n,
            "successes": self.successes,
            "outcomes": dict(sorted(self.outcomes.items())),
            "success_rate": self.successes / n if n else None,
            "success_ci95": [float(low), float(high)],
            "cost_per_run_usd": self.cost / n if n else None,
            "cost_per_success_usd": self.cost / self.successes if self.successes else None,
            "cost_estimated_runs": self.estimated,
            "steps_per_run": self.steps / n if n else None,
            "interventions_per_run": self.interventions / n if n else None,
            "escalations_per_run": self.escalations / n if n else None,
            "stops_per_run": self.stops / n if n else None,
        }


def _kind(outcome: str) -> str:
    if outcome in ("success", "abandoned"):
        return outcome
    if outcome == "failure: stopped_by_steering":
        return "stopped_by_steering"
    return "failure"


@dataclass
class _Monitor:
    arms: dict[str, _Arm] = field(default_factory=lambda: {a: _Arm() for a in ARMS})
    test: PairedStream = field(default_factory=PairedStream)
    told: list[int] = field(default_factory=lambda: [0, 0])  # treatment: complied, ignored
    alone: list[int] = field(default_factory=lambda: [0, 0])  # control: stopped by itself, went on


@dataclass
class _Experiment:
    orgs: set[str] = field(default_factory=set)
    arms: dict[str, _Arm] = field(default_factory=lambda: {a: _Arm() for a in ARMS})
    test: PairedStream = field(default_factory=PairedStream)
    monitors: dict[str, _Monitor] = field(default_factory=dict)

    def add(self, r: Row) -> None:
        self.orgs.add(r.org)
        self.arms[r.arm].add(r)
        self.test.add(r.arm, r.success)
        for name in r.fired:
            m = self.monitors.setdefault(name, _Monitor())
            m.arms[r.arm].add(r)
            m.test.add(r.arm, r.success)
        for name, (complied, ignored) in r.compliance.items():
            m = self.monitors.setdefault(name, _Monitor())
            tally = m.told if r.arm == "treatment" else m.alone
            tally[0] += complied
            tally[1] += ignored


def _rate(done: int, total: int) -> dict[str, Any]:
    low, high = wilson(done, total)
    return {
        "n": total,
        "count": done,
        "rate": done / total if total else None,
        "ci95": [float(low), float(high)],
    }


def _difference(arms: Mapping[str, _Arm]) -> dict[str, Any]:
    t, c = arms["treatment"], arms["control"]
    if not (t.runs and c.runs):
        return {"points": None, "ci95": None, "method": "Newcombe hybrid score"}
    d, low, high = newcombe(t.successes, t.runs, c.successes, c.runs)
    return {"points": float(d), "ci95": [float(low), float(high)], "method": "Newcombe hybrid score"}


def _verdict(s: PairedStream, alpha: float) -> dict[str, Any]:
    worse, better = s.log_e("worse"), s.log_e("better")
    line = threshold(alpha)
    if worse >= line:
        verdict = "treatment worse than control"
    elif better >= line:
        verdict = "treatment better than control"
    else:
        verdict = "no difference shown yet"
    return {
        "test": TEST_NAME,
        "alpha": alpha,
        "verdict": verdict,
        "e_worse": math.exp(min(worse, 700.0)),
        "e_better": math.exp(min(better, 700.0)),
        "e_needed": 1.0 / alpha,
        "pairs": s.pairs,
        "discordant_pairs": s.discordant,
    }


def build(
    records: Iterable[Mapping[str, Any]],
    *,
    experiment: str | None = None,
    alpha: float = 0.05,
    guard: GuardSettings | None = None,
) -> dict[str, Any]:
    """The report as data (what --json prints). Records in the order they were written."""
    exps: dict[str, _Experiment] = {}
    seen: set[str] = set()
    ignored = {"no_experiment_or_arm": 0, "other_experiment": 0, "duplicate": 0}
    total = 0
    g = Guard(guard or GuardSettings(enabled=True, alpha=alpha))
    for rec in records:
        total += 1
        row = row_of(rec)
        if row is None:
            ignored["no_experiment_or_arm"] += 1
            continue
        if experiment is not None and row.experiment != experiment:
            ignored["other_experiment"] += 1
            continue
        if row.run_id in seen:
            ignored["duplicate"] += 1
            continue
        seen.add(row.run_id)
        g.feed(rec)
        exps.setdefault(row.experiment, _Experiment()).add(row)
    out: list[dict[str, Any]] = []
    for name in sorted(exps):
        e = exps[name]
        monitors = []
        for mname in sorted(e.monitors):
            m = e.monitors[mname]
            monitors.append(
                {
                    "monitor": mname,
                    "stopped_when_told": _rate(m.told[0], m.told[0] + m.told[1]),
                    "stopped_by_itself": _rate(m.alone[0], m.alone[0] + m.alone[1]),
                    "after_first_fire": {a: m.arms[a].summary() for a in ARMS},
                    "difference": _difference(m.arms),
                    "sequential": _verdict(m.test, alpha),
                }
            )
        out.append(
            {
                "experiment": name,
                "orgs": sorted(e.orgs),
                "arms": {a: e.arms[a].summary() for a in ARMS},
                "difference": _difference(e.arms),
                "sequential": _verdict(e.test, alpha),
                "monitors": monitors,
                "guard": [
                    {
                        "org": s.org,
                        "monitor": s.monitor,
                        "after_record": s.record,
                        "run_id": s.run_id,
                        "why": s.why,
                    }
                    for s in g.switches
                    if s.experiment == name
                ],
            }
        )
    gs = g.settings
    return {
        "records": total,
        "ignored": ignored,
        "guard_settings": {"alpha": gs.alpha, "min_runs": gs.min_runs},
        "experiments": out,
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:.4f}"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _ci(ci: Sequence[float] | None, signed: bool = False) -> str:
    if ci is None:
        return "-"
    f = "{:+.1f}" if signed else "{:.1f}"
    return f"[{f.format(100 * ci[0])}, {f.format(100 * ci[1])}]"


def text(rep: Mapping[str, Any]) -> str:
    """The report for a person."""
    lines: list[str] = []
    for e in rep["experiments"]:
        orgs = ", ".join(safe_for_log(o, 64) for o in e["orgs"][:10]) + (
            " ..." if len(e["orgs"]) > 10 else ""
        )
        lines.append(f"experiment {safe_for_log(e['experiment'], 64)!r} (orgs: {orgs})")
        lines.append(
            f"  {'arm':<10} {'runs':>6} {'success':>8} {'95% CI':>14} {'cost/run':>10} "
            f"{'cost/success':>12} {'steps/run':>9} {'interv./run':>11}"
        )
        for a in ARMS:
            s = e["arms"][a]
            lines.append(
                f"  {a:<10} {s['runs']:>6} {_pct(s['success_rate']):>8} {_ci(s['success_ci95']):>14} "
                f"{_usd(s['cost_per_run_usd']):>10} {_usd(s['cost_per_success_usd']):>12} "
                f"{_num(s['steps_per_run']):>9} {_num(s['interventions_per_run']):>11}"
            )
        d = e["difference"]
        if d["points"] is not None:
            lines.append(
                f"  difference (treatment - control): {100 * d['points']:+.1f} points, "
                f"95% CI {_ci(d['ci95'], True)} ({d['method']}; a fixed-n interval)"
            )
        lines.append("  " + _verdict_line(e["sequential"]))
        if e["monitors"]:
            lines.append(
                f"  {'monitor':<20} {'stopped when told':>18} {'by itself (ctl)':>16} "
                f"{'success after 1st fire: treat.':>31} {'control':>14}  verdict"
            )
        for m in e["monitors"]:
            told, alone = m["stopped_when_told"], m["stopped_by_itself"]
            t, c = m["after_first_fire"]["treatment"], m["after_first_fire"]["control"]
            lines.append(
                f"  {safe_for_log(m['monitor'], 20)[:20]:<20} {_pct(told['rate']):>8} of {told['n']:<7} "
                f"{_pct(alone['rate']):>7} of {alone['n']:<6} "
                f"{_pct(t['success_rate']):>14} of {t['runs']:<14} {_pct(c['success_rate']):>6} of {c['runs']:<5}  "
                f"{m['sequential']['verdict']}"
            )
        for s in e["guard"]:
            lines.append("  " + safe_for_log(s["why"], None))
        if not e["guard"]:
            g = rep["guard_settings"]
            lines.append(
                f"  guard (alpha {g['alpha']}, {g['min_runs']} runs an arm): would not have switched anything off"
            )
    ign = rep["ignored"]
    parts = [
        f"{ign['no_experiment_or_arm']} without an experiment or arm",
        f"{ign['other_experiment']} of other experiments",
        f"{ign['duplicate']} duplicates",
    ]
    lines.append(f"{rep['records']} records read; ignored: {', '.join(parts)}")
    if not rep["experiments"]:
        lines.append("no experiment's outcome records found")
    return "\n".join(lines)


def _verdict_line(v: Mapping[str, Any]) -> str:
    return (
        f"sequential test ({v['test']}, alpha {v['alpha']}): {v['verdict']} "
        f"(e = {v['e_worse']:.3g} for worse, {v['e_better']:.3g} for better; {v['e_needed']:.3g} needed; "
        f"{v['pairs']} pairs, {v['discordant_pairs']} discordant)"
    )


def plot(path: str, rep: Mapping[str, Any]) -> str | None:
    """A PNG: success per arm with its interval, and cost per success, per experiment. None
    when written; else the one line saying why not (matplotlib missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return (
            "--plot: matplotlib is not installed (pip install './[plot]' from a checkout, or the wheel "
            "with [plot]); no plot written"
        )
    exps = rep["experiments"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, a in enumerate(ARMS):
        xs = [j + i * 0.4 for j in range(len(exps))]
        rates = [e["arms"][a]["success_rate"] or 0.0 for e in exps]
        errs = [
            [r - e["arms"][a]["success_ci95"][0] for r, e in zip(rates, exps, strict=True)],
            [e["arms"][a]["success_ci95"][1] - r for r, e in zip(rates, exps, strict=True)],
        ]
        axes[0].bar(xs, rates, 0.4, yerr=errs, capsize=4, label=a)
        axes[1].bar(xs, [e["arms"][a]["cost_per_success_usd"] or 0.0 for e in exps], 0.4, label=a)
    for ax, title in zip(axes, ("success rate (95% Wilson)", "cost per successful run (USD)"), strict=True):
        ax.set_xticks([j + 0.2 for j in range(len(exps))], [e["experiment"][:20] for e in exps])
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
