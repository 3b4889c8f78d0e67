"""The run table's RocksDB store, without RocksDB's own write-ahead log.

Every event rewrites its run's ~8 KB state, and the changelog topic already keeps each write
durably: Faust recovers a partition by reading the changelog from the offset persisted in the
same RocksDB. RocksDB's write-ahead log wrote every state to disk a second time, a write
system call per event on the worker's event loop (~5 % of its CPU per event). Kafka Streams
turns the log off in its RocksDB stores for the same reason.

Without the log, a worker killed outright loses what RocksDB had not flushed to its files yet:
the states and the persisted offset written after them, together (a flush keeps the order of
writes, and both live in the partition's one database). Recovery then reads the changelog from
the older offset and restores the same states, only later. A graceful stop or a revoked
partition flushes first, so a restart after one reads no more of the changelog than before.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import faust
import rocksdict
from faust.stores import rocksdb
from faust.types import TP, CollectionT, StoreT
from yarl import URL


def _no_wal() -> rocksdict.WriteOptions:
    opts = rocksdict.WriteOptions()
    setattr(opts, "disable_wal", True)  # noqa: B010  # a property at run time; the stubs say a method
    return opts


class RunStore(rocksdb.Store):
    """Faust's RocksDB store (rocksdict driver) with the write-ahead log off; flushed before
    a partition's database is let go."""

    def _open_for_partition(self, partition: int) -> Any:
        db = super()._open_for_partition(partition)
        if self.use_rocksdict:
            db.set_write_options(_no_wal())
        return db

    def flush(self, partitions: Iterable[int] | None = None) -> None:
        """Write the memtables of these partitions' databases (default: all) to disk."""
        for p in list(self._dbs) if partitions is None else partitions:
            db = self._dbs.get(p)
            if db is not None and self.use_rocksdict:
                db.flush(True)

    def revoke_partitions(self, table: CollectionT, tps: set[TP]) -> None:
        self.flush(tp.partition for tp in tps if tp.topic in table.changelog_topic.topics)
        super().revoke_partitions(table, tps)

    async def stop(self) -> None:
        self.flush()
        await super().stop()


class RunsTable(faust.Table):  # type: ignore[type-arg]  # keys and values: bytes
    """A Faust table whose `rocksdb://` store is a `RunStore` (`faust.App(Table=RunsTable)`)."""

    def _new_store_by_url(self, url: str | URL) -> StoreT:  # type: ignore[type-arg]
        if URL(url).scheme != "rocksdb":
            return super()._new_store_by_url(url)
        return RunStore(
            url,
            self.app,
            self,
            table_name=self.name,
            key_type=self.key_type,
            key_serializer=self.key_serializer,
            value_serializer=self.value_serializer,
            value_type=self.value_type,
            loop=self.loop,
            options=self.options,
        )
