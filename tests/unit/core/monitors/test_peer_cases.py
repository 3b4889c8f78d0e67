"""Peers' loop and stuck detectors' own scenarios (`peer_cases.py`), run through the engine.

A loop case passes when a loop-related monitor fires at the step the peer detects the loop or
before; a non-loop case passes when none fires on any step. A case the current monitors miss is a
strict xfail naming what is missed: when it turns green, the marker must go.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest

from streams.core.monitors.builtin import FAILURE_TYPES
from tests.driving import sealed
from tests.factories import run_start

from .peer_cases import CASES, Case

# The monitors whose fire says "looping / not progressing": the loop monitor, summaries that
# come back to the same place (OpenHands' context-window loop), and any no-progress monitor
# added later under a name that says so.
LOOP_MONITORS = frozenset(
    m for m, kind in FAILURE_TYPES.items() if kind in ("loop", "context_churn") or "progress" in m
)
_ids = itertools.count()


def drive(case: Case, sem: Any) -> list[list[str]]:
    """The case as wire events through the core: the loop-related monitors fired at each step."""
    run_id = f"peer-{case.id}-{next(_ids)}"
    store: dict[str, Any] = {}

    def feed(ev: dict[str, Any]) -> dict[str, Any]:
        res = sealed(orjson.dumps(ev), store.get, None, 1.0, sem)
        if res.state is not None:
            store[res.run_id] = res.state
        assert res.decision is not None, res.deadletter
        return res.decision

    start: dict[str, Any] = {"task": case.task} if case.task else {}
    feed(run_start(run_id, **start))
    fired = []
    for n, s in enumerate(case.steps, start=1):
        ev = {"type": "step", "schema_version": 1, "run_id": run_id, "step": n, "ts": 1_700_000_000.0 + n}
        ev.update({k: v for k, v in s.items() if v is not None})
        d = feed(ev)
        assert d["step"] == n
        fired.append(sorted(LOOP_MONITORS.intersection(d["monitors"]["fired"])))
    return fired


def _param(case: Case) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=case.missed)] if case.missed else []
    return pytest.param(case, id=case.id, marks=marks)


LOOPS = [_param(c) for c in CASES if c.loop]
NON_LOOPS = [_param(c) for c in CASES if not c.loop]


def test_the_cases_cover_the_peers_broadly():
    assert len(LOOPS) >= 30 and len(NON_LOOPS) >= 20
    assert len({c.id for c in CASES}) == len(CASES)
    assert all(1 <= c.detect_at + c.tolerance <= len(c.steps) for c in CASES if c.loop)


@pytest.mark.parametrize("case", LOOPS)
def test_a_peers_loop_is_caught_by_the_step_the_peer_catches_it(case: Case, sem):
    fired = drive(case, sem)
    first = next((n for n, f in enumerate(fired, start=1) if f), None)
    assert first is not None and first <= case.detect_at + case.tolerance, (
        f"{case.source}: peer detects at step {case.detect_at}; first loop fire: {first}"
    )


@pytest.mark.parametrize("case", NON_LOOPS)
def test_a_peers_non_loop_gets_no_loop_warning(case: Case, sem):
    fired = drive(case, sem)
    hits = [(n, f) for n, f in enumerate(fired, start=1) if f]
    assert not hits, f"{case.source}: loop fires {hits}"
