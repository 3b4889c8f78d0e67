"""bench.state_bytes counts every record the run table writes, tombstones too, per step."""

from __future__ import annotations

import pytest

from bench.state_bytes import codec_table, table_writes
from streams.core.state import RunConfig, TraceState


def _run(n: int) -> list[tuple[str, TraceState, bytes]]:
    out = []
    for i in range(n):
        st = TraceState("r", RunConfig(org_id="acme", task="fix the flaky test " * 20), last_step=i)
        out.append(("r", st, st.encode()))
    return out


def test_the_parts_layout_writes_the_config_once_and_whole_states_every_time() -> None:
    log, held, _us = table_writes(_run(5), parts=True)
    assert len([k for k, v in log if v is not None and k != b"r"]) == 1  # the config part, once
    assert [k for k, _ in log].count(b"r") == 5 and len(held) == 5
    whole, _, _ = table_writes(_run(5), parts=False)
    assert [k for k, _ in whole] == [b"r"] * 5


def test_tombstones_count_as_records_of_their_step() -> None:
    rows = codec_table([(b"a", b"x" * 100), (b"b", None)], 1, 1, steps=1)
    alone = codec_table([(b"a", b"x" * 100)], 1, 1, steps=1)
    assert rows["none/1"]["bytes_per_step"] > alone["none/1"]["bytes_per_step"]
    with pytest.raises(KeyError):
        rows["none/16"]
