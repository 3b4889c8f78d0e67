"""Issue 21's routing targets on the real dev runs (../shared/data/real-dev; skipped without it).

Routing does not depend on monitors or E-traces, so runs are replayed through the engine with
both off: seconds, not minutes. The same figures, with monitors, come from `bench.quality`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from bench.captainagent_convert import convert_lines
from bench.common import DEFAULT_DATA
from streams.core.events import Limits
from streams.core.state import TraceState
from tests.driving import sealed

pytestmark = pytest.mark.skipif(not DEFAULT_DATA.is_dir(), reason="real dev runs not present")

DATASETS = ("swe_agent_java", "mini_swe_agent", "tau_retail", "captainagent")
LIMITS = Limits()
Run = tuple[str, list[dict[str, Any]]]  # (outcome, steps)


def _runs(name: str) -> Iterator[Run]:
    labels = {r["run_id"]: r for r in orjson.loads((DEFAULT_DATA / "labels.json").read_bytes())["runs"]}
    run: list[dict[str, Any]] = []
    rid = ""
    for line in convert_lines((DEFAULT_DATA / f"{name}.jsonl").read_bytes().splitlines()):
        ev = orjson.loads(line)
        if ev["type"] == "run_start":
            if run:
                yield labels.get(rid, {}).get("outcome", "unknown"), run
            rid, run = ev["run_id"], []
        elif ev["type"] == "step":
            run.append(ev)
    if run:
        yield labels.get(rid, {}).get("outcome", "unknown"), run


def _states(steps: list[dict[str, Any]], scorer: str | None = None) -> list[str]:
    """The FSM state after each step, replayed through the engine."""
    table: dict[str, TraceState] = {}
    start: dict[str, Any] = {"type": "run_start", "schema_version": 1, "run_id": "r"}
    start |= {"monitors_enabled": False, "e_traces_enabled": False}
    if scorer:
        start["scorer"] = scorer
    out: list[str] = []
    for ev in [start, *({**s, "run_id": "r"} for s in steps)]:
        res = sealed(orjson.dumps(ev), table.get, LIMITS, 1.0)
        assert res.state is not None and res.decision is not None
        table["r"] = res.state
        if ev["type"] == "step":
            out.append(res.decision["fsm_state"])
    return out


def _streaks(errors: list[bool], at_least: int) -> list[range]:
    found: list[range] = []
    start = None
    for i, e in enumerate([*errors, False]):
        if e and start is None:
            start = i
        elif not e and start is not None:
            if i - start >= at_least:
                found.append(range(start, i))
            start = None
    return found


@pytest.fixture(scope="module")
def replayed() -> dict[str, list[tuple[str, list[bool], list[str], list[str]]]]:
    """Per data set: (outcome, error flags, states with the default scorer, with the heuristic)."""
    out: dict[str, list[tuple[str, list[bool], list[str], list[str]]]] = {}
    for name in DATASETS:
        out[name] = [
            (
                outcome,
                [bool(s.get("observation_is_error")) for s in steps],
                _states(steps),
                _states(steps, "heuristic"),
            )
            for outcome, steps in _runs(name)
        ]
    return out


@pytest.mark.parametrize("name", DATASETS)
def test_error_streaks_are_almost_never_routed_fast(replayed, name: str) -> None:
    steps = [st[i] for _, err, st, _ in replayed[name] for s in _streaks(err, 2) for i in s]
    assert not steps or sum(x == "FAST" for x in steps) / len(steps) <= 0.10


def test_most_runs_with_five_errors_in_a_row_reach_slow_during_the_streak(replayed) -> None:
    runs = [(err, st) for name in DATASETS for _, err, st, _ in replayed[name] if _streaks(err, 5)]
    reached = [any(st[i] == "SLOW" for s in _streaks(err, 5) for i in s) for err, st in runs]
    assert runs and sum(reached) / len(reached) >= 0.5


@pytest.mark.parametrize("name", DATASETS)
def test_error_free_steps_are_rarely_routed_slow(replayed, name: str) -> None:
    clean: list[str] = []
    for _, err, st, _ in replayed[name]:
        in_streak = {i for s in _streaks(err, 2) for i in s}
        clean += [st[i] for i in range(len(err)) if not err[i] and i not in in_streak]
    assert sum(x in ("SLOW", "SKIP") for x in clean) / len(clean) <= 0.15


def _fast(runs: list[tuple[str, list[bool], list[str], list[str]]], which: int) -> float:
    states = [x for r in runs for x in r[which]]
    return sum(x == "FAST" for x in states) / len(states)


def test_healthy_runs_still_reach_fast_on_routine_stretches(replayed) -> None:
    resolved = [
        r for name in ("swe_agent_java", "mini_swe_agent") for r in replayed[name] if r[0] == "success"
    ]
    assert _fast(resolved, 2) >= 0.5 * _fast(resolved, 3)
    tau = [r for r in replayed["tau_retail"] if r[0] == "success"]
    assert _fast(tau, 2) >= max(0.5 * _fast(tau, 3), 0.2)


def test_five_error_streaks_cut_from_real_runs_reach_slow() -> None:
    """Only a few dev runs have a streak of five; this builds one per five of each run's own
    error steps (after its first clean steps), to check the fifth failure in a row is SLOW."""
    cases = 0
    reached = 0
    for name in DATASETS:
        for _, steps in _runs(name):
            errors = [s for s in steps if s.get("observation_is_error")]
            clean = [s for s in steps if not s.get("observation_is_error")][:6]
            for k in range(0, len(errors) - 4, 5):
                seq = [*clean, *errors[k : k + 5]]
                seq = [{**s, "step": i} for i, s in enumerate(seq, start=1)]
                cases += 1
                reached += "SLOW" in _states(seq)[len(clean) :]
    assert cases >= 10 and reached / cases >= 0.8
