"""The run table's RocksDB store keeps no write-ahead log; a flush puts its writes on disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import faust
import rocksdict
from faust.stores import rocksdb

from streams.worker.store import RunsTable, RunStore


def _store(tmp_path: Path, table_class: type[faust.Table]) -> rocksdb.Store:  # type: ignore[type-arg]
    app = faust.App(
        "store-test",
        broker="kafka://127.0.0.1:1",  # never contacted: the store is used directly
        store="rocksdb://",
        datadir=str(tmp_path / "app"),
        Table=table_class,
    )
    table = app.Table("runs", partitions=2, key_type=bytes, value_type=bytes)
    store = table.data
    assert isinstance(store, rocksdb.Store)
    return store


def _on_disk(store: rocksdb.Store, partition: int, key: bytes, copy: Path) -> bytes | None:
    """What a worker killed now would find for `key`: the database's files as they are
    (copied while it is open), opened as RocksDB opens them after a crash."""
    shutil.copytree(store.partition_path(partition), copy)
    (copy / "LOCK").unlink(missing_ok=True)
    db = rocksdict.Rdict(str(copy), options=rocksdict.Options(raw_mode=True))
    try:
        value = db.get(key)
        return None if value is None else bytes(value)
    finally:
        db.close()


def test_the_worker_table_stores_runs_in_a_run_store(tmp_path: Path) -> None:
    assert isinstance(_store(tmp_path, RunsTable), RunStore)


def test_a_write_reaches_disk_only_when_flushed(tmp_path: Path) -> None:
    store = _store(tmp_path, RunsTable)
    assert isinstance(store, RunStore)
    store._db_for_partition(1).put(b"run-1", b"state")
    # no write-ahead log: a crash now loses the write (the changelog still has it)
    assert _on_disk(store, 1, b"run-1", tmp_path / "crash-1") is None
    store.flush([1])
    assert _on_disk(store, 1, b"run-1", tmp_path / "crash-2") == b"state"


def test_fausts_own_store_logs_every_write_ahead(tmp_path: Path) -> None:
    """The contrast that shows the check above can tell the two apart."""
    store = _store(tmp_path, faust.Table)
    assert not isinstance(store, RunStore)
    store._db_for_partition(0).put(b"run-1", b"state")
    assert _on_disk(store, 0, b"run-1", tmp_path / "crash") == b"state"


async def test_stop_and_revoke_flush_the_partitions_they_let_go(tmp_path: Path) -> None:
    store = _store(tmp_path, RunsTable)
    assert isinstance(store, RunStore)
    for p in (0, 1):
        store._db_for_partition(p).put(b"run-1", b"state")
    changelog = store.table.changelog_topic.get_topic_name()
    store.revoke_partitions(store.table, {faust.types.TP(changelog, 0)})
    assert _on_disk(store, 0, b"run-1", tmp_path / "after-revoke") == b"state"
    assert _on_disk(store, 1, b"run-1", tmp_path / "still-held") is None
    await store.stop()
    assert _on_disk(store, 1, b"run-1", tmp_path / "after-stop") == b"state"
