"""The run table's state codec: lossless, small, reads every encoding ever written, and refuses
a damaged or hostile record with a ValueError (the worker then treats it as any unreadable state)."""

from __future__ import annotations

from importlib.resources import files

import orjson
import pytest
import zstandard

from streams.core.state import RunConfig, TraceState
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.replay import Replayer
from streams.worker.recovery_guard import progress
from streams.worker.run_table import RunTable
from streams.worker.state_codec import (
    CURRENT_DICT,
    MAGIC,
    MAX_STATE_BYTES,
    JsonStateCodec,
    ZstdStateCodec,
    dictionary,
    state_codec,
    unpack,
)
from tests.factories import run_start, step
from tests.models import semantics

SEED = 777  # neither the dictionary's training seeds (10,000 on) nor the benchmarks'


@pytest.fixture(scope="module")
def monitored_states() -> list[bytes]:
    """A monitored run's states, as the engine seals them (its JSON), step by step."""
    rp = Replayer(sem=semantics(), clock=lambda: 1_767_225_600.0)
    task, gen = trajectory(BEHAVIOURS[0], 30, seed=SEED)
    rp.pipeline.run(orjson.dumps(run_start("c", task=task)), 1_767_225_600.0, rp.retriever.answer_now)
    out = []
    for k in range(1, 31):
        s = rp.pipeline.run(orjson.dumps(step("c", k, **next(gen))), 1_767_225_600.0, rp.retriever.answer_now)
        assert s.state_bytes is not None
        out.append(s.state_bytes)
    return out


def test_a_state_comes_back_byte_for_byte_and_a_monitored_one_at_under_a_fifth(
    monitored_states: list[bytes],
) -> None:
    codec = ZstdStateCodec()
    packed = [codec.pack(s) for s in monitored_states]
    assert [codec.unpack(p) for p in packed] == monitored_states
    assert all(p[:4] == MAGIC and zstandard.get_frame_parameters(p).dict_id == CURRENT_DICT for p in packed)
    late = monitored_states[-1]
    assert len(late) > 8000  # a state whose memories are full
    assert len(codec.pack(late)) * 5 < len(late)
    assert codec.pack(late) == codec.pack(late)  # deterministic: the decoded cache compares bytes


def test_either_codec_reads_both_encodings(monitored_states: list[bytes]) -> None:
    """A state written before (plain JSON) loads, and switching RB_STATE_CODEC back to json
    still reads what zstd wrote: no migration either way."""
    js, z = JsonStateCodec(), ZstdStateCodec()
    s = monitored_states[5]
    assert js.pack(s) == s
    for codec in (js, z):
        assert codec.unpack(s) == s and codec.unpack(z.pack(s)) == s
    assert state_codec("json").name == "json" and state_codec("zstd").name == "zstd"


def test_every_shipped_dictionary_loads_under_its_own_id() -> None:
    shipped = sorted(
        p.name for p in files("streams").joinpath("data/state").iterdir() if p.name.endswith(".zdict")
    )
    assert f"rb-state-{CURRENT_DICT}.zdict" in shipped
    for name in shipped:
        dict_id = int(name.removeprefix("rb-state-").removesuffix(".zdict"))
        assert dictionary(dict_id).dict_id() == dict_id


def _frame(payload: bytes, **kw: object) -> bytes:
    return zstandard.ZstdCompressor(**kw).compress(payload)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"", "unknown encoding"),
        (b"\x00garbage", "unknown encoding"),
        (MAGIC + b"\x00\x01\x02", "zstd frame"),
        (_frame(b'{"run_id": "r"}')[:-3], "damaged"),
        (_frame(b"not a state at all"), "holds no state"),
        (_frame(b"{}", write_content_size=False), "at most"),  # no declared size: refused unread
    ],
)
def test_a_damaged_or_foreign_record_is_a_value_error(raw: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        unpack(raw)


def test_a_frame_declaring_a_huge_state_is_refused_before_anything_is_allocated() -> None:
    """An attacker with write access to the changelog cannot make recovery allocate gigabytes:
    the declared size is checked before decompressing."""
    big = b"{" + b" " * (MAX_STATE_BYTES + 1) + b"}"
    bomb = _frame(big, level=1)
    assert len(bomb) < 4096
    with pytest.raises(ValueError, match="at most"):
        unpack(bomb)


def test_a_dictionary_this_release_does_not_have_is_named() -> None:
    other = zstandard.train_dictionary(
        4096,
        [orjson.dumps({"run_id": f"r{i}", "last_step": i, "x": "y" * (i % 50)}) for i in range(500)],
        dict_id=9999,
    )
    raw = zstandard.ZstdCompressor(dict_data=other).compress(b'{"run_id": "r"}')
    with pytest.raises(ValueError, match="dictionary 9999"):
        unpack(raw)


def test_the_run_table_stores_compressed_states_and_reads_old_plain_ones() -> None:
    table: dict[bytes, bytes] = {}
    sizes: list[int] = []
    runs = RunTable(table, 0, lambda _run_id: 0, 1, on_stored=sizes.append, parts=False)
    st = TraceState("r", RunConfig(org_id="acme", task="fix the flaky test " * 40))
    runs.store("r", st.encode(), None, st)
    assert table[b"r"][:4] == MAGIC and sizes == [len(table[b"r"])] and sizes[0] < len(st.encode())
    fresh = RunTable(table, 0, lambda _run_id: 0, 1)  # nothing kept decoded: read from the bytes
    assert fresh.lookup("r") == st
    table[b"old"] = TraceState("old", RunConfig(org_id="acme")).encode()  # written by a release before
    fresh.recount()
    assert fresh.lookup("old") == TraceState("old", RunConfig(org_id="acme"))
    assert fresh.held.orgs() == {"r": "acme", "old": "acme"} and len(fresh.seen) == 2


def test_recovery_reads_how_far_a_compressed_state_has_got(monitored_states: list[bytes]) -> None:
    s = monitored_states[-1]
    assert progress(ZstdStateCodec().pack(s)) == progress(s) == (30, False, 0)
