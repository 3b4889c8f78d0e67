"""`rb-streams cost`: what rb-streams' steering and routing do to a fleet's bill under caching.

Reads trajectory files (wire events, JSONL), replays each through the core (the worker's
decisions: `streams.replay.Replayer`) as if every run ran on the model the price table's
`[cost]` section names, with `model_routing {"FAST": fast}` (and, when the section names a
`slow` model, a second replay with `"SLOW": slow`: upgrades, spending by design, reported
apart), and prices every call with the pure cost model (`streams.core.cost`) and the agent's
own composer (`streams.agent.compose.anthropic_request`). COST.md holds the figures and the
command.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..core.cost import Tally, error_streak_steps, run_cost
from ..core.prices import PriceTable
from ..core.routing import PRIOR_STINT_CALLS
from .common import UserError, _DeadLetterLines, _print_json, _settings

SCENARIOS = ("base", "steer_end", "steer_system", "naive", "routed", "net", "upgrades")


class CostInputError(ValueError):
    """A trajectory file or a price table that cannot be used (one line)."""


@dataclass
class RunReport:
    run_id: str
    source: str
    steps: int
    tallies: dict[str, Tally]
    cheap_in_streaks: int = 0
    streak_calls: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def pct(self, scenario: str) -> float:
        base = self.tallies["base"].usd
        return 0.0 if base <= 0 else 100.0 * (self.tallies[scenario].usd - base) / base

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "source": self.source,
            "steps": self.steps,
            "usd": {k: t.as_dict() for k, t in self.tallies.items()},
            "change_pct": {k: round(self.pct(k), 3) for k in self.tallies if k != "base"},
            "cheap_calls_in_error_streaks": self.cheap_in_streaks,
            "error_streak_calls": self.streak_calls,
            "routing_reasons": self.reasons,
            "tokens_estimated": True,
        }


def read_runs(
    lines: Iterable[bytes], where: str, on_bad: Callable[[int, dict[str, str]], None] | None = None
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(run_start, steps) per run, in file order. A line that is not a JSON object with a run_id
    is an error, or, with `on_bad`, given to it (line number, {"reason", "detail"}) and skipped,
    as `replay` names and skips a line it dead-letters; a file with no run_start is an error."""
    runs: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            ev = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            bad = {"reason": "invalid_json", "detail": f"not JSON ({exc})"[:300]}
        else:
            if isinstance(ev, dict) and isinstance(ev.get("run_id"), str):
                bad = {}
            else:
                bad = {"reason": "invalid_event", "detail": "not a wire event (an object with a run_id)"}
        if bad:
            if on_bad is None:
                raise CostInputError(f"{where}:{n}: {bad['detail']}")
            on_bad(n, bad)
            continue
        kind = ev.get("type")
        if kind == "run_start":
            runs[ev["run_id"]] = (ev, [])
        elif kind == "step" and ev["run_id"] in runs:
            runs[ev["run_id"]][1].append(ev)
    if not runs:
        raise CostInputError(f"{where}: no run_start in the file")
    return list(runs.values())


def retimed(
    runs: Sequence[tuple[dict[str, Any], list[dict[str, Any]]]], seconds: float
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The runs with step k at run_start's ts + k * `seconds` (the dev data's events are 2 s
    apart, much closer than real model calls: caches there never expire)."""
    out = []
    for start, steps in runs:
        t0 = float(start.get("ts") or 0.0)
        out.append((start, [{**ev, "ts": t0 + k * seconds} for k, ev in enumerate(steps, start=1)]))
    return out


def _as_fleet(start: Mapping[str, Any], model: str, routing: Mapping[str, str]) -> dict[str, Any]:
    out = {k: v for k, v in start.items() if k not in ("model_routing",)}
    out["model"] = model
    out["model_routing"] = dict(routing)
    return out


def _replay(
    runs: Sequence[tuple[dict[str, Any], list[dict[str, Any]]]],
    model: str,
    routing: Mapping[str, str],
    replayer_factory: Any,
) -> dict[str, dict[int, dict[str, Any]]]:
    """run_id -> step -> decision, from the core (the worker's decisions)."""
    rp = replayer_factory()
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for start, steps in runs:
        rid = start["run_id"]
        got: dict[int, dict[str, Any]] = {}
        for ev in (
            _as_fleet(start, model, routing),
            *steps,
            {"type": "run_finish", "schema_version": 1, "run_id": rid, "outcome": "unknown"},
        ):
            decision, _dl = rp.feed(orjson.dumps(ev))
            if decision is not None:
                got[int(decision["step"])] = dict(decision)
        out[rid] = got
    return out


def evaluate(
    source: str,
    runs: Sequence[tuple[dict[str, Any], list[dict[str, Any]]]],
    prices: PriceTable,
    compose: Any,
    replayer_factory: Any,
) -> list[RunReport]:
    """Every run of one data set, priced under each scenario (SCENARIOS)."""
    model, fast, slow = prices.cost.get("model"), prices.cost.get("fast"), prices.cost.get("slow")
    if not model or not fast:
        raise CostInputError(
            "the price table's [cost] section must name `model` and `fast` (see deploy/prices.example.toml)"
        )
    decided = _replay(runs, model, {"FAST": fast}, replayer_factory)
    upgraded = _replay(runs, model, {"FAST": fast, "SLOW": slow}, replayer_factory) if slow else None
    reports = []
    for start, steps in runs:
        rid = start["run_id"]
        if not steps:
            continue
        ds = decided[rid]
        before = [ds.get(k, {}) for k in range(len(steps))]  # call k+1 follows decision k
        home = [model] * len(steps)
        routed = [d.get("model") or model for d in before]
        naive = [fast if d.get("fsm_state") == "FAST" else model for d in before]
        texts: list[str | None] = [d.get("injection_text") for d in before]
        none: list[str | None] = [None] * len(steps)
        t: dict[str, Tally] = {
            "base": run_cost(start, steps, home, none, prices, compose, "end"),
            "steer_end": run_cost(start, steps, home, texts, prices, compose, "end"),
            "steer_system": run_cost(start, steps, home, texts, prices, compose, "system"),
            "naive": run_cost(start, steps, naive, none, prices, compose, "end"),
            "routed": run_cost(start, steps, routed, none, prices, compose, "end"),
            "net": run_cost(start, steps, routed, texts, prices, compose, "end"),
        }
        if upgraded is not None:
            us = upgraded[rid]
            up = [us.get(k, {}).get("model") or model for k in range(len(steps))]
            t["upgrades"] = run_cost(start, steps, up, none, prices, compose, "end")
        streak = error_streak_steps(steps)
        # decision k answers step k (index k-1) and routes call k+1
        in_streak = [k for k in range(1, len(steps)) if (k - 1) in streak]
        cheap = sum(1 for k in in_streak if routed[k] == fast)
        reasons: dict[str, int] = {}
        for d in before[1:]:
            code = str(d.get("routing_reason") or "none").split(":", 1)[0]
            reasons[code] = reasons.get(code, 0) + 1
        reports.append(RunReport(rid, source, len(steps), t, cheap, len(in_streak), reasons))
    return reports


@dataclass
class Fleet:
    source: str
    runs: int = 0
    steps: int = 0
    tallies: dict[str, Tally] = field(default_factory=dict)
    dearer_by_downgrade: int = 0  # runs whose routing (no upgrades) cost more than never switching
    naive_dearer: int = 0
    cheap_in_streaks: int = 0
    streak_calls: int = 0

    def pct(self, scenario: str) -> float:
        base = self.tallies["base"].usd
        return 0.0 if base <= 0 else 100.0 * (self.tallies[scenario].usd - base) / base


def fleet_of(source: str, reports: Sequence[RunReport]) -> Fleet:
    f = Fleet(source)
    for r in reports:
        f.runs += 1
        f.steps += r.steps
        for k, t in r.tallies.items():
            f.tallies.setdefault(k, Tally()).add(t)
        f.dearer_by_downgrade += r.tallies["routed"].usd > r.tallies["base"].usd + 1e-12
        f.naive_dearer += r.tallies["naive"].usd > r.tallies["base"].usd + 1e-12
        f.cheap_in_streaks += r.cheap_in_streaks
        f.streak_calls += r.streak_calls
    return f


def fleet_dict(f: Fleet) -> dict[str, Any]:
    writes = {k: t.write_usd for k, t in f.tallies.items()}
    return {
        "source": f.source,
        "runs": f.runs,
        "steps": f.steps,
        "usd": {k: t.as_dict() for k, t in f.tallies.items()},
        "change_pct": {k: round(f.pct(k), 3) for k in f.tallies if k != "base"},
        "cache_writes_caused_usd": {
            "steering_end": round(writes["steer_end"] - writes["base"], 6),
            "steering_system": round(writes["steer_system"] - writes["base"], 6),
            "routing": round(writes["routed"] - writes["base"], 6),
            "routing_naive": round(writes["naive"] - writes["base"], 6),
        },
        "runs_dearer_than_never_switching": {"routed": f.dearer_by_downgrade, "naive": f.naive_dearer},
        "cheap_calls_in_error_streaks": f.cheap_in_streaks,
        "error_streak_calls": f.streak_calls,
        "tokens_estimated": True,
    }


# (heading, width): every % column is the change of the bill against the first $ column
COLUMNS = (
    ("data set", 16),
    ("runs", 5),
    ("$ never switching", 17),
    ("steer at end", 12),
    ("steer in system", 15),
    ("naive routing", 13),
    ("cache-aware routing", 19),
    ("net: end+routing", 16),
    ("with upgrades", 13),
    ("model switches", 14),
    ("runs dearer (naive)", 19),
    ("cheap/calls in err streaks", 26),
)
LEGEND = (
    "% columns: the bill's change against never switching models, no steering (steering text at the "
    "end of the request or in the system prompt; routing FAST to the cheap model when the FSM says, "
    "or only when the cache allows; net: steering at the end plus cache-aware routing; upgrades: SLOW "
    "routed to the strong model too, spending by design). Model switches: calls routed to another "
    "model than the previous call's. Runs dearer: runs cache-aware routing made dearer than never "
    "switching (naive routing's in parentheses). Cheap/calls in err streaks: calls in runs of two or "
    "more errors in a row that went to the cheap model / all such calls."
)


def table(fleets: Sequence[Fleet]) -> Iterator[str]:
    """The per-data-set summary, as text lines: the headings, a line per data set, the legend."""
    (_, wn), (_, wr), (_, wb), *pcts, (_, ws), (_, wd), (_, we) = COLUMNS
    yield " ".join(f"{h:<{w}}" if i == 0 else f"{h:>{w}}" for i, (h, w) in enumerate(COLUMNS))
    for f in fleets:
        shown = ["steer_end", "steer_system", "naive", "routed", "net", "upgrades"]
        cells = [f"{f.pct(k):+.2f}%" if k in f.tallies else "-" for k in shown]
        yield " ".join(
            [
                f"{f.source:<{wn}}",
                f"{f.runs:>{wr}}",
                f"{f.tallies['base'].usd:>{wb}.2f}",
                *(f"{c:>{w}}" for c, (_, w) in zip(cells, pcts, strict=True)),
                f"{f.tallies['routed'].switches:>{ws}}",
                f"{f'{f.dearer_by_downgrade} ({f.naive_dearer})':>{wd}}",
                f"{f'{f.cheap_in_streaks}/{f.streak_calls}':>{we}}",
            ]
        )
    yield from textwrap.wrap(LEGEND, 110)


def run_lines(r: RunReport) -> Iterator[str]:
    t = r.tallies
    yield (
        f"  {r.run_id[:40]:<40} {r.steps:>4} steps  ${t['base'].usd:.4f}  steer end {r.pct('steer_end'):+.2f}%  "
        f"system {r.pct('steer_system'):+.2f}%  routing {r.pct('routed'):+.2f}% ({t['routed'].switches} switches)  "
        f"naive {r.pct('naive'):+.2f}%  net {r.pct('net'):+.2f}%"
    )


def plot(path: str, fleets: Sequence[Fleet], run: RunReport | None) -> str | None:
    """A PNG: cost over the steps of `run` (cumulative, per scenario) and fleet bars per data
    set. None when done; else the one line saying why not (matplotlib missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return (
            "--plot: matplotlib is not installed (pip install './[plot]' from a checkout, or the wheel "
            "with [plot]); no plot written"
        )
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    ax = axes[0]
    if run is not None:
        for k in ("base", "steer_end", "steer_system", "naive", "routed", "net"):
            acc, ys = 0.0, []
            for c in run.tallies[k].per_call:
                acc += c
                ys.append(acc)
            ax.plot(range(1, len(ys) + 1), ys, label=k)
        ax.set_title(f"run {run.run_id[:40]} ({run.source})")
        ax.set_xlabel("call")
        ax.set_ylabel("cumulative cost (USD, estimated)")
        ax.legend(fontsize=8)
    ax = axes[1]
    keys = ("steer_end", "steer_system", "naive", "routed", "net")
    width = 0.8 / len(keys)
    for i, k in enumerate(keys):
        ax.bar([j + i * width for j in range(len(fleets))], [f.pct(k) for f in fleets], width, label=k)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(fleets))], [f.source for f in fleets], rotation=20)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_ylabel("% against never switching, no steering")
    ax.set_title("fleets")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def source_name(path: str) -> str:
    return Path(path).stem


def prior_note() -> str:
    return f"stint prior {PRIOR_STINT_CALLS} calls"


def cmd_cost(args: argparse.Namespace) -> int:
    """What steering and routing do to a fleet's bill under prompt caching (COST.md)."""
    from ..agent.compose import anthropic_request, check_placement
    from ..embeddings.models import load_models
    from ..plugins import load_policy
    from ..replay import Replayer

    s = _settings(args)
    if not s.prices_file.strip():
        raise UserError(
            "cost: no price table: set RB_PRICES_FILE or pass --prices-file (deploy/prices.example.toml)", 2
        )
    prices = s.prices
    if not prices.cost.get("model") or not prices.cost.get("fast"):
        raise UserError(
            f"cost: the price table {s.prices_file!r} has no [cost] section naming `model` and `fast`", 2
        )
    policy = load_policy(s)
    models = load_models()
    sem = models.semantics()

    def replayer() -> Replayer:
        return Replayer(s.limits, lambda: 0.0, sem=sem, policy=policy, max_runs_per_org=0, max_runs=0)

    def compose(request: Any, decision: Any, placement: str) -> Any:
        return anthropic_request(request, decision, placement=check_placement(placement))

    fleets, reports = [], []
    skipped = 0
    for path in args.files:
        # as replay: each refused line named (the first 20, then a count), skipped, then a total
        bad = _DeadLetterLines(path, command="cost")
        with open(path, "rb") as fh:
            try:
                runs = read_runs(fh, path, on_bad=bad)
            except CostInputError as exc:
                raise UserError(
                    f"cost: {exc}" + (f" ({bad.seen} invalid lines skipped)" if bad.seen else ""), 1
                ) from None
        skipped += bad.seen
        if args.runs:
            runs = runs[: args.runs]
        if args.step_seconds is not None:
            runs = retimed(runs, args.step_seconds)
        got = evaluate(source_name(path), runs, prices, compose, replayer)
        reports.extend(got)
        fleets.append(fleet_of(source_name(path), got))
    chosen = next((r for r in reports if r.run_id == args.run), None) if args.run else None
    if args.run and chosen is None:
        raise UserError(f"cost: --run {args.run!r}: no such run in the files", 2)
    if args.json:
        out: dict[str, Any] = {
            "prices_file": s.prices_file,
            "cost": dict(prices.cost),
            "step_seconds": args.step_seconds,
            "invalid_lines_skipped": skipped,
            "fleets": [fleet_dict(f) for f in fleets],
        }
        if args.per_run or chosen is not None:
            out["runs"] = [r.as_dict() for r in ([chosen] if chosen is not None else reports)]
        _print_json(out)
    else:
        c = prices.cost
        print(
            f"cost: every run as if on {c['model']}, FAST routed to {c['fast']}"
            + (f", SLOW to {c['slow']} (upgrades)" if c.get("slow") else "")
            + f"; prices {s.prices_file}; tokens estimated from text; % against never switching, no steering"
            + ("" if args.step_seconds is None else f"; steps re-timed {args.step_seconds:g} s apart")
        )
        for line in table(fleets):
            print(line)
        if args.per_run or chosen is not None:
            for r in [chosen] if chosen is not None else reports:
                for line in run_lines(r):
                    print(line)
    if args.plot:
        target = chosen if chosen is not None else max(reports, key=lambda r: r.steps, default=None)
        why = plot(args.plot, fleets, target)
        print(f"rb-streams: {why}" if why else f"cost: plot written to {args.plot}", file=sys.stderr)
    if skipped:
        print(f"cost: {skipped} invalid lines skipped (named above)", file=sys.stderr)
    return 0
