"""A worker on new code recovers run state written to a changelog by earlier code.

tests/fixtures/legacy/states-<commit>.jsonl.gz was written by the code of that commit: for each
synthetic run, the encoded TraceState after 15 events (one run per behaviour with its loop
window cut to the 13-field entries of still older code), the rest of the run's events, and the
decisions that code gave for them. New code must decode every state and, continuing the run,
give the same decisions byte for byte (processed_ts aside). A change that cannot keep this must
version the state encoding; one that means to change decisions records new fixtures.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from streams.core.state import RunConfig, TraceState
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.replay import Replayer
from tests.factories import run_start, step
from tests.models import semantics

NEW_FIELDS = ("processed_ts", "action", "action_reason", "taint")  # the fixtures predate these fields
NEW_MONITORS = ("data_instruction",)  # issue 42's monitor: a score the fixtures' decisions predate
FIXTURES = sorted((Path(__file__).parents[2] / "fixtures" / "legacy").glob("states-*.jsonl.gz"))


def runs(path: Path) -> list[dict[str, object]]:
    with gzip.open(path, "rb") as f:
        return [orjson.loads(line) for line in f]


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_states_written_by_earlier_code_continue_with_the_same_decisions(path: Path) -> None:
    recorded = runs(path)
    assert len(recorded) >= 10
    for run in recorded:
        rp = Replayer(sem=semantics(), clock=lambda: 1_767_225_600.0)
        run_id = str(run["run_id"])
        rp.states[run_id] = TraceState.decode(str(run["state"]).encode())  # what recovery reads
        got = []
        for line in run["events"]:  # type: ignore[attr-defined]
            decision, dead = rp.feed(str(line).encode())
            if decision is not None:  # the ladder's two fields, new since: no policy, no ladder
                nudged = any(i["source"] == "monitor" for i in decision["injections"])
                assert decision["action"] == ("nudge" if nudged else "continue"), run_id
                assert decision["action_reason"] is None
            for rec in (decision, dead):
                if rec is not None:
                    rec = {k: v for k, v in rec.items() if k not in NEW_FIELDS}
                    if "monitors" in rec:
                        scores = rec["monitors"]["scores"]
                        assert all(scores.get(m, 0.0) == 0.0 for m in NEW_MONITORS), run_id
                        rec["monitors"] = {
                            **rec["monitors"],
                            "scores": {k: v for k, v in scores.items() if k not in NEW_MONITORS},
                        }
                    got.append(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS).decode())
        assert got == run["decisions"], run_id


def test_a_state_round_trips_through_its_encoding() -> None:
    for run in runs(FIXTURES[-1]):
        st = TraceState.decode(str(run["state"]).encode())
        assert TraceState.decode(st.encode()) == st


def test_a_state_in_the_whole_form_earlier_versions_wrote_loads_as_its_compact_form() -> None:
    """Earlier code stored every field and each monitor's memory whole (`orjson.dumps` of the
    state); the compact form leaves out what holds its default. Both decode to one state, whose
    run goes on with the same decisions, and a stored state that is neither is refused."""
    task, gen = trajectory(BEHAVIOURS[0], 12, seed=3)
    events = [run_start("c", task=task), *(step("c", k, **next(gen)) for k in range(1, 13))]
    lines = [orjson.dumps(e) for e in events]
    rp = Replayer(sem=semantics(), clock=lambda: 1_767_225_600.0)
    for line in lines[:8]:
        rp.feed(line)
    ((run_id, st),) = rp.states.items()
    whole, compact = orjson.dumps(st), st.encode()
    assert len(compact) < len(whole)
    assert set(orjson.loads(compact)["config"]) < set(orjson.loads(whole)["config"])
    assert TraceState.decode(whole) == TraceState.decode(compact) == st
    assert TraceState.decode(whole).encode() == compact
    got = []
    for raw in (whole, compact):
        other = Replayer(sem=semantics(), clock=lambda: 1_767_225_600.0)
        other.states[run_id] = TraceState.decode(raw)
        got.append([orjson.dumps(other.feed(line)[0]) for line in lines[8:]])
    assert got[0] == got[1] == [orjson.dumps(rp.feed(line)[0]) for line in lines[8:]]
    with pytest.raises(ValueError, match="unknown encoding"):
        TraceState.decode(b"\x02" + compact)


def test_a_new_runs_state_stores_its_own_config_values_and_no_memory() -> None:
    st = TraceState(run_id="r", config=RunConfig(task="t"))
    stored = orjson.loads(st.encode())
    assert stored["config"] == {"task": "t"} and "monitors" not in stored
    assert set(stored) == set(orjson.loads(orjson.dumps(st))) - {"monitors"}
    assert TraceState.decode(st.encode()) == st
