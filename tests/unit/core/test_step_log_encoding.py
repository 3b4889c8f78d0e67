"""The step log keeps its monitor scores compactly (names once, values per entry) and still
reads every entry the way the HTTP view always showed it, old entries included."""

from __future__ import annotations

import orjson

from streams.core.engine import LOG_SCORE_DIGITS, log_entry
from streams.core.events import Limits
from streams.core.state import TraceState
from tests.driving import sealed
from tests.factories import b, run_start, step
from tests.models import semantics


def _run(steps: int, limits: Limits | None = None) -> tuple[TraceState, list[dict[str, object]]]:
    lim = limits or Limits()
    st = sealed(b(run_start("r")), lambda _r: None, lim, 1.0, semantics()).state
    decisions = []
    for i in range(1, steps + 1):
        res = sealed(
            b(step("r", i, thought=f"step {i}: run the tests")), lambda _r, s=st: s, lim, 2.0, semantics()
        )
        st = res.state
        decisions.append(res.decision)
    assert st is not None
    return st, decisions


def test_entries_keep_scores_as_values_and_the_view_names_them_again():
    st, decisions = _run(4)
    assert st.log_score_names == list(decisions[-1]["monitors"]["scores"])
    assert all(type(e[8]) is list for e in st.step_log)
    for entry, d in zip(st.step_log_entries()[-4:], decisions, strict=True):
        assert entry["scores"] == {k: round(v, LOG_SCORE_DIGITS) for k, v in d["monitors"]["scores"].items()}


def test_the_compact_step_log_round_trips_through_the_table_encoding():
    st, _ = _run(3)
    back = TraceState.decode(st.encode())
    assert back == st
    assert back.encode() == st.encode()
    assert back.step_log_entries() == st.step_log_entries()


def test_a_state_written_before_the_compact_log_decodes_reads_and_goes_on():
    st, _ = _run(2)
    old = orjson.loads(st.encode())
    names = old.pop("log_score_names")
    # what earlier code stored: each entry's scores as a dict, no names field
    old["step_log"] = [[*e[:8], dict(zip(names, e[8], strict=False)), *e[9:]] for e in old["step_log"]]
    prior = TraceState.decode(orjson.dumps(old))
    assert prior.log_score_names == []
    before = prior.step_log_entries()
    assert before == st.step_log_entries()
    res = sealed(b(step("r", 3)), lambda _r: prior, Limits(), 2.0, semantics())
    assert res.state is not None
    after = res.state.step_log_entries()
    assert after[: len(before)] == before  # the old dict entries still read as they did
    assert type(res.state.step_log[-1][8]) is list and after[-1]["scores"]


def test_a_decision_with_other_monitor_names_keeps_its_scores_named():
    d = {
        "step": 7,
        "fsm_state": "NORMAL",
        "difficulty": 0.2,
        "model": None,
        "injections": [],
        "monitors": {"scores": {"b": 0.5, "a": 0.25}, "fired": []},
        "suppressed": None,
        "processed_ts": 1.0,
        "skipped_reason": None,
    }
    assert log_entry(d, ["a", "b"])[8] == {"b": 0.5, "a": 0.25}  # another order: named
    assert log_entry(d, ["b"])[8] == {"b": 0.5, "a": 0.25}
    assert log_entry(d, ["b", "a"])[8] == [0.5, 0.25]


def test_twenty_entries_of_seven_scores_take_well_under_half_the_named_form():
    st, _ = _run(25)
    kept = orjson.dumps(st.step_log)
    named = orjson.dumps(
        [[*e[:8], dict(zip(st.log_score_names, e[8], strict=False)), *e[9:]] for e in st.step_log]
    )
    assert len(st.step_log) == Limits().step_log_kept and len(st.log_score_names) >= 7
    assert len(kept) < 0.6 * len(named), (len(kept), len(named))
