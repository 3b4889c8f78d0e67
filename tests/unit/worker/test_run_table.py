"""The run table's memory bounds: RocksDB's per partition, and what leaves with an evicted run."""

from __future__ import annotations

from pathlib import Path

from faust.stores.rocksdb import RocksDBOptions

from streams.core.state import RunConfig, TraceState
from streams.worker.run_table import (
    ROCKSDB_BLOCK_CACHE_BYTES,
    ROCKSDB_WRITE_BUFFER_BYTES,
    ROCKSDB_WRITE_BUFFERS,
    RunTable,
    bound_rocksdb,
)


class _Store:
    def __init__(self) -> None:
        self.rocksdb_options = RocksDBOptions(use_rocksdict=True)


def test_rocksdb_memory_is_bounded_before_the_partitions_open(tmp_path: Path) -> None:
    store = _Store()
    assert bound_rocksdb(store)
    o = store.rocksdb_options
    assert (
        o.write_buffer_size == ROCKSDB_WRITE_BUFFER_BYTES
        and o.max_write_buffer_number == ROCKSDB_WRITE_BUFFERS
    )
    assert o.block_cache_size == ROCKSDB_BLOCK_CACHE_BYTES
    # at most this much RocksDB memory per partition, far under Faust's 3 x 64 MB + 2 GB
    assert ROCKSDB_WRITE_BUFFER_BYTES * ROCKSDB_WRITE_BUFFERS + ROCKSDB_BLOCK_CACHE_BYTES <= 16 * 2**20
    db = o.open(tmp_path / "p0")  # the options a partition opens with are accepted
    try:
        db[b"k"] = b"v" * 8000
        assert db[b"k"] == b"v" * 8000
        assert db.property_int_value("rocksdb.cur-size-all-mem-tables") is not None
    finally:
        db.close()


def test_a_store_without_rocksdb_is_left_alone() -> None:
    assert not bound_rocksdb({})


def test_an_evicted_run_is_forgotten_by_every_listener() -> None:
    table: dict[bytes, bytes] = {}
    runs = RunTable(table, 0, lambda run_id: 0, 1)
    st = TraceState("r", RunConfig(org_id="acme"))
    runs.store("r", st.encode(), None, st)
    runs.held.add("r", "acme")
    assert runs.decoded_kept == 1 and len(runs.seen) == 1
    gone: list[str] = []
    runs.on_delete.append(gone.append)
    runs.delete(b"r", st)
    assert gone == ["r"] and runs.decoded_kept == 0 and not runs.seen and len(runs.held) == 0
