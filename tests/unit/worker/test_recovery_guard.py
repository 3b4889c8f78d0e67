"""A restart's changelog replay never moves a run's state backwards (issue 38, item 1): the
local RocksDB of a real Faust table keeps a state newer than a replayed record, takes newer and
unreadable ones, applies deletions, and records the offset read past skipped records."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faust
import orjson
from faust.types import TP

from streams.worker.recovery_guard import behind, forward_only, progress

TOPIC = "rb-guard-runs-changelog"


@dataclass
class Msg:
    key: bytes
    value: bytes | None
    offset: int
    partition: int = 0

    @property
    def tp(self) -> TP:
        return TP(TOPIC, self.partition)


@dataclass
class Ev:
    message: Msg


def state(step: int, finished: bool = False, duplicates: int = 0) -> bytes:
    return orjson.dumps({"run_id": "r", "last_step": step, "finished": finished, "duplicates": duplicates})


def store(tmp_path: Path) -> Any:
    app = faust.App("rb-guard", broker="kafka://127.0.0.1:1", store="rocksdb://", datadir=str(tmp_path))
    table = app.Table("runs", partitions=1, key_type=bytes, value_type=bytes)
    return table.data


def replay(data: Any, *events: Msg) -> None:
    data.apply_changelog_batch([Ev(m) for m in events], to_key=lambda k: k, to_value=lambda v: v)


def test_a_replayed_record_older_than_the_local_state_is_skipped_and_the_offset_moves_on(tmp_path):
    data = store(tmp_path)
    assert forward_only(data)
    db = data._db_for_partition(0)
    db.put(b"run-a", state(2))  # written locally before the kill; its changelog record never went out
    replay(data, Msg(b"run-a", state(1), offset=7))  # acknowledged, but its offset was not recorded
    assert progress(db.get(b"run-a")) == (2, False, 0)
    assert data.persisted_offset(TP(TOPIC, 0)) == 7


def test_newer_records_deletions_and_unreadable_states_are_applied(tmp_path):
    data = store(tmp_path)
    forward_only(data)
    db = data._db_for_partition(0)
    db.put(b"run-a", state(2))
    db.put(b"run-b", state(5))
    db.put(b"run-c", state(1))
    replay(
        data,
        Msg(b"run-a", state(2, duplicates=1), offset=1),  # a re-sent copy moved it on
        Msg(b"run-b", None, offset=2),  # evicted
        Msg(b"run-c", b"not json", offset=3),
        Msg(b"run-d", state(0), offset=4),  # a run the local store never saw
    )
    assert progress(db.get(b"run-a")) == (2, False, 1)
    assert db.get(b"run-b") is None
    assert db.get(b"run-c") == b"not json"
    assert progress(db.get(b"run-d")) == (0, False, 0)


def test_within_one_batch_a_run_is_compared_with_its_latest_record_not_the_disk(tmp_path):
    data = store(tmp_path)
    forward_only(data)
    db = data._db_for_partition(0)
    replay(data, Msg(b"r", state(3), offset=1), Msg(b"r", state(2), offset=2), Msg(b"r", state(4), offset=3))
    assert progress(db.get(b"r")) == (4, False, 0)
    replay(data, Msg(b"r", None, offset=4), Msg(b"r", state(0), offset=5))  # evicted, the id reused
    assert progress(db.get(b"r")) == (0, False, 0)


def test_order_is_last_step_then_finished_then_duplicates():
    assert behind(state(1), state(2)) and not behind(state(2), state(1))
    assert behind(state(3), state(3, finished=True))
    assert behind(state(3, duplicates=1), state(3, duplicates=2))
    assert not behind(state(3), None) and not behind(state(3), state(3))


def test_a_store_without_local_partitions_is_left_alone():
    class Memory:
        def apply_changelog_batch(self, *_a: object, **_k: object) -> None: ...

    assert not forward_only(Memory())
