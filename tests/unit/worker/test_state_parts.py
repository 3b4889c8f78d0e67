"""A run's state stored as its record and parts (`state_parts`, `RunTable(parts=True)`): the
same state comes back, a step writes only what changed, in an order a crash cannot break, and
whatever a crash or an attacker leaves behind is read as an error or removed."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest

from bench.state_bytes import Recorder  # a table that keeps its writes in order, as the changelog
from streams.core.results import Sealed
from streams.core.state import RunConfig, TraceState
from streams.worker import state_parts
from streams.worker.run_table import RunTable
from streams.worker.state_codec import JsonStateCodec
from tests.fixtures.golden_decisions import REAL_DEV

CLOCK = 1_767_225_600.0
SOURCE = REAL_DEV / "openhands_swe.jsonl"
pytestmark = pytest.mark.skipif(not SOURCE.is_file(), reason="the dev data set is not here")


def _sealed_steps(limit: int = 400) -> list[Sealed]:
    """The sealed step states of the first runs of the OpenHands dev file, as the worker's
    pipeline makes them."""
    from streams.replay import Replayer
    from tests.models import semantics

    rp = Replayer(clock=lambda: CLOCK, sem=semantics())
    out = []
    with SOURCE.open("rb") as f:
        for line in itertools.islice(f, limit):
            if not line.strip():
                continue
            s = rp.pipeline.run(line.rstrip(b"\r\n"), CLOCK, rp.retriever.answer_now)
            if isinstance(s, Sealed) and s.state is not None and s.state_bytes is not None and s.run_id:
                out.append(s)
    return out


@pytest.fixture(scope="module")
def sealed() -> list[Sealed]:
    got = _sealed_steps()
    assert len({s.run_id for s in got}) >= 2 and any(_window(s.state) for s in got)
    return got


def _window(st: TraceState) -> list[Any]:
    loop = st.monitors.get("loop")
    if loop is None:
        return []
    return list(loop["window"] if type(loop) is dict else loop.window)


def _table(parts: bool = True) -> tuple[Recorder, RunTable]:
    t = Recorder()
    return t, RunTable(t, 0, lambda run_id: 0, 1, parts=parts)


def _fresh(t: Recorder, parts: bool = True) -> RunTable:
    """A worker that has never seen the table (a restart or a rebalance): nothing kept decoded."""
    rt = RunTable(t, 0, lambda run_id: 0, 1, parts=parts)
    rt.recount()
    return rt


def _replayed(t: Recorder) -> Recorder:
    """What a new worker's store holds after replaying the changelog (the writes in order)."""
    out = Recorder()
    for k, v in t.log:
        if v is None:
            out.pop(k, None)
        else:
            dict.__setitem__(out, k, v)
    return out


def _store_all(rt: RunTable, steps: list[Sealed]) -> None:
    prior: dict[str, TraceState] = {}
    for s in steps:
        assert s.run_id is not None and s.state_bytes is not None
        rt.store(s.run_id, s.state_bytes, prior.get(s.run_id), s.state)
        prior[s.run_id] = s.state  # type: ignore[assignment]


def test_every_dev_state_stored_in_parts_reads_back_as_the_state_the_engine_sealed(
    sealed: list[Sealed],
) -> None:
    t, rt = _table()
    for s in sealed:
        assert s.run_id is not None and s.state_bytes is not None
        rt.store(s.run_id, s.state_bytes, None, s.state)
        back = _fresh(t).lookup(s.run_id)
        assert back is not None and back.encode() == s.state_bytes
        rt.lookup(s.run_id)  # (the decoded state kept beside the table)


def test_a_step_writes_its_record_and_a_window_chunk_only_every_few_steps(sealed: list[Sealed]) -> None:
    """Past its run_start a run's steps write their record; the window's entries go in chunks
    of CHUNK, one written (and, once the window is full, one removed) every CHUNK steps; the
    config never again. Within a step: parts first, the record, then the tombstones."""
    t, rt = _table()
    run = sealed[0].run_id
    steps = [s for s in sealed if s.run_id == run and s.event_type == "step"]
    n = 3 * state_parts.CHUNK
    assert len(steps) > n + 12 and len(_window(steps[-n - 1].state)) >= 8  # type: ignore[arg-type]
    _store_all(rt, [s for s in sealed if s.run_id == run][:1])  # the run_start
    _store_all(rt, steps[:-n])
    record = run.encode()  # type: ignore[union-attr]
    parts_written = tombstones = 0
    for s in steps[-n:]:
        t.log.clear()
        _store_all(rt, [s])
        keys = [k for k, _ in t.log]
        assert keys.count(record) == 1
        at = keys.index(record)
        assert all(v is not None for _, v in t.log[:at]) and all(v is None for _, v in t.log[at + 1 :])
        assert all(k.startswith(record + state_parts.SEP + b"w") for k in keys if k != record)  # no config
        parts_written += at
        tombstones += len(t.log) - at - 1
    assert 2 <= parts_written <= 4 and tombstones <= 4  # 3 chunks' worth of steps
    assert rt.lookup(run).encode() == steps[-1].state_bytes  # type: ignore[arg-type,union-attr]
    assert _fresh(t).lookup(run).encode() == steps[-1].state_bytes  # type: ignore[arg-type,union-attr]


def test_a_crash_between_any_two_writes_leaves_a_table_that_reads_back_a_state_the_run_had(
    sealed: list[Sealed],
) -> None:
    """The changelog cut after each record: every run record it holds reads back whole (and as
    one of the run's sealed states), and a new worker removes the parts no record names."""
    t, rt = _table()
    steps = sealed[:60]
    _store_all(rt, steps)
    states = {s.state_bytes for s in steps}
    for cut in range(1, len(t.log) + 1):
        part = Recorder()
        part.log = t.log[:cut]
        store = _replayed(part)
        fresh = _fresh(store)
        for k in [k for k in store if not state_parts.is_part(k)]:
            st = fresh.lookup(k.decode())
            assert st is not None and st.encode() in states
    # after the last write no part is stray
    store = _replayed(t)
    fresh = _fresh(store)
    assert not fresh._orphans


def test_parts_a_crash_left_unnamed_go_with_the_partitions_next_write(sealed: list[Sealed]) -> None:
    t, rt = _table()
    steps = [s for s in sealed if s.run_id == sealed[0].run_id]
    _store_all(rt, steps[:-1])
    stray = steps[0].run_id.encode() + state_parts.SEP + b"w" + b"\x00" * 8  # type: ignore[union-attr]
    gone_run = b"gone" + state_parts.SEP + b"c" + b"\x01" * 8  # a run whose record was evicted
    dict.__setitem__(t, stray, b"[1]")
    dict.__setitem__(t, gone_run, b"{}")
    rt = _fresh(t)
    assert sorted(rt._orphans[0]) == sorted([stray, gone_run])
    _store_all(rt, steps[-1:])
    assert stray not in t and gone_run not in t and not rt._orphans
    assert rt.lookup(steps[-1].run_id).encode() == steps[-1].state_bytes  # type: ignore[arg-type,union-attr]


def test_after_a_recovery_a_runs_next_write_sends_every_part_again(sealed: list[Sealed]) -> None:
    """The local store may hold parts whose changelog records never went out (a kill -9 before
    the producer sent them): the first write after a recount sends them all, so a worker that
    rebuilds the table from the changelog alone finds every part its record names."""
    t, rt = _table()
    steps = [s for s in sealed if s.run_id == sealed[0].run_id]
    _store_all(rt, steps[:-1])
    rt = _fresh(t)
    t.log.clear()  # the changelog lost everything written so far
    _store_all(rt, steps[-1:])
    from_changelog = _replayed(t)
    assert _fresh(from_changelog).lookup(steps[-1].run_id).encode() == steps[-1].state_bytes  # type: ignore[arg-type,union-attr]


def test_an_evicted_run_leaves_no_part_behind(sealed: list[Sealed]) -> None:
    t, rt = _table()
    steps = [s for s in sealed if s.run_id == sealed[0].run_id]
    _store_all(rt, steps)
    key = steps[0].run_id.encode()  # type: ignore[union-attr]
    last = rt.lookup(steps[0].run_id)  # type: ignore[arg-type]
    assert last is not None
    rt.delete(key, last)
    assert not [k for k in t if k.startswith(key)]
    assert [v for k, v in t.log if k == key][-1] is None  # the record's tombstone came first
    first_tombstone = next(i for i, (k, v) in enumerate(t.log) if k == key and v is None)
    assert all(v is None for _, v in t.log[first_tombstone:])


def test_a_record_naming_a_part_the_table_lacks_is_an_error_not_a_new_run(sealed: list[Sealed]) -> None:
    t, rt = _table()
    s = sealed[-1]
    _store_all(rt, [s])
    key = s.run_id.encode()  # type: ignore[union-attr]
    part = next(k for k in t if k.startswith(key + state_parts.SEP + b"c"))
    dict.__delitem__(t, part)
    with pytest.raises(ValueError, match="does not hold"):
        RunTable(t, 0, lambda r: 0, 1).lookup(s.run_id)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "config",
    ["c", "x" + "0" * 16, "c" + "g" * 16, 7, "c" + "0" * 15],
)
def test_a_record_naming_no_parts_shape_is_refused(config: object) -> None:
    """A damaged or hostile record: its names are checked before any key is made of them."""
    t: dict[bytes, bytes] = {b"r": orjson.dumps({"run_id": "r", "config": config})}
    with pytest.raises(ValueError, match="no part's name" if type(config) is str else "neither an object"):
        RunTable(t, 0, lambda r: 0, 1).lookup("r")


def test_no_run_id_makes_a_key_that_is_another_runs_part() -> None:
    """0xff is never in UTF-8, so a run id cannot spell a part's key (or its run's prefix)."""
    for run_id in ["r", "r\xff", "\U0010ffff", "é" * 40, "r\x00c"]:
        assert not state_parts.is_part(run_id.encode("utf-8"))


def test_the_whole_layout_writes_one_record_and_reads_states_stored_in_parts(sealed: list[Sealed]) -> None:
    t, rt = _table(parts=True)
    _store_all(rt, sealed[:40])
    whole = RunTable(t, 0, lambda r: 0, 1, parts=False)
    whole.recount()
    s = sealed[40]
    t.log.clear()
    whole.store(s.run_id, s.state_bytes, whole.lookup(s.run_id), s.state)  # type: ignore[arg-type]
    assert [k for k, v in t.log if v is not None] == [s.run_id.encode()]  # type: ignore[union-attr]
    assert not [k for k in t if k.startswith(s.run_id.encode() + state_parts.SEP)]  # type: ignore[union-attr]
    assert RunTable(t, 0, lambda r: 0, 1).lookup(s.run_id).encode() == s.state_bytes  # type: ignore[arg-type,union-attr]


def test_a_state_stored_whole_before_parts_existed_still_loads() -> None:
    st = TraceState("old", RunConfig(org_id="acme", task="fix it"))
    t = {b"old": st.encode()}
    rt = RunTable(t, 0, lambda r: 0, 1, codec=JsonStateCodec())
    rt.recount()
    got = rt.lookup("old")
    assert got is not None and got.encode() == st.encode()


def test_parts_cost_fewer_bytes_a_step_than_the_whole_state(sealed: list[Sealed]) -> None:
    written: dict[bool, int] = {}
    for parts in (True, False):
        sizes: list[int] = []
        rt = RunTable({}, 0, lambda r: 0, 1, parts=parts, on_stored=sizes.append)
        _store_all(rt, sealed)
        written[parts] = sum(sizes)
    assert written[True] < 0.85 * written[False]


def test_the_record_cut_from_the_states_json_is_the_one_made_anew(sealed: list[Sealed]) -> None:
    """`split` cuts the record out of the engine's bytes (no second encoding); it is byte for
    byte the record a fresh encoding makes, and a state's bytes laid out otherwise are not cut."""
    chunks: dict[str, tuple[state_parts.Chunk, ...]] = {}
    for s in sealed:
        assert s.state is not None and s.state_bytes is not None and s.run_id is not None
        prior = chunks.get(s.run_id, ())
        cut, anew = state_parts.split(s.state, s.state_bytes, prior), state_parts.split(s.state, None, prior)
        assert cut == anew
        chunks[s.run_id] = cut.chunks
    s = next(s for s in sealed if len(_window(s.state)) > state_parts.CHUNK)  # type: ignore[arg-type]
    assert s.state is not None and s.state_bytes is not None
    entries = [state_parts._entry(e) for e in _window(s.state)]
    got, skip, inline, _ = state_parts._chunked(entries, ())
    refs = [skip, *(n for n, _ in got)]
    cname, cfg = state_parts._config(s.state.config)
    assert state_parts._cut(s.state, s.state_bytes, cname, cfg, entries, refs, inline) is not None
    moved = s.state_bytes.replace(b'"monitors":{"loop":{"window":[[', b'"monitors":{"loop":{"window":[ [', 1)
    assert state_parts._cut(s.state, moved, cname, cfg, entries, refs, inline) is None
    assert state_parts.split(s.state, moved) == state_parts.split(s.state)  # made anew instead


def test_a_record_whose_window_skips_more_than_it_holds_is_refused() -> None:
    t: dict[bytes, bytes] = {}
    rt = RunTable(t, 0, lambda r: 0, 1)
    st = TraceState("r", RunConfig(org_id="acme"))
    rt.store("r", st.encode(), None, st)
    d = orjson.loads(t[b"r"]) if t[b"r"][:1] == b"{" else orjson.loads(rt.codec.unpack(t[b"r"]))
    d["monitors"] = {"loop": {"window": [99, [1, "x"]]}}
    t[b"r"] = orjson.dumps(d)
    with pytest.raises(ValueError, match="skips 99"):
        RunTable(t, 0, lambda r: 0, 1).lookup("r")


def test_a_recovery_reads_every_other_run_when_one_record_cannot_be_read(
    sealed: list[Sealed], caplog: pytest.LogCaptureFixture
) -> None:
    t, rt = _table()
    _store_all(rt, sealed[:80])
    runs = {s.run_id for s in sealed[:80]}
    assert len(runs) >= 2
    broken = sorted(runs)[0].encode()  # type: ignore[union-attr]
    dict.__delitem__(t, next(k for k in t if k.startswith(broken + state_parts.SEP + b"c")))
    fresh = _fresh(t)
    assert set(fresh.seen) == {r.encode() for r in runs} - {broken}  # type: ignore[union-attr]
    assert "cannot be read" in caplog.text
    with pytest.raises(ValueError, match="does not hold"):
        fresh.lookup(broken.decode())
