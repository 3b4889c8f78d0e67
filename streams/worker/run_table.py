"""The runs table as the worker sees it: run state by run id, plus the indexes kept beside it.

The table itself is a Faust table in the worker (a changelogged mapping of run key to encoded
`TraceState`, as the state codec stores it: `state_codec`) and a plain dict in tests. Beside
it, three things are kept incrementally, so no per-event or periodic work ever scans the table:
unfinished runs per FSM state and finished runs held (the gauges), each run's retention clock
and version (the eviction sweep), and the runs each org holds (the per-org cap). All three are
rebuilt from the table after a recovery.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass

import orjson

from ..core.retention import RunsHeld, Version, retention_clock, version
from ..core.state import TraceState
from . import state_parts
from .metrics import STATES, Metrics
from .state_codec import StateCodec, ZstdStateCodec, unpack_part

log = logging.getLogger(__name__)

# Decoded states kept beside the table, by run key, with the bytes they were decoded from or
# encoded to (as stored). A run's next event then skips decompressing and decoding 4-30 KB of
# JSON into dataclasses whenever the table still holds exactly those bytes. About 34 KB per
# state: 1024 runs ~ 35 MB.
DECODED_KEPT = 1024

# RocksDB memory of the run table, per partition store. Faust's defaults are up to three
# 64 MB memtables and a 2 GB block cache per partition: hundreds of MB that fill over the
# first minutes of load (and whose freed blocks fragment the heap) to hold ~500 live states
# of ~8 KB. 4 MB memtables hold the last ~500 writes of a partition, so a run's next read
# still finds its state in memory; the table's changelog topic is the durable copy either way.
ROCKSDB_WRITE_BUFFER_BYTES = 4 * 1024 * 1024
ROCKSDB_WRITE_BUFFERS = 2  # one being written, one being flushed
ROCKSDB_BLOCK_CACHE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Seen:
    """What the eviction sweep needs of a run, without decoding it."""

    clock: float | None  # when the run last moved (None: never)
    finished: bool
    version: Version


def bound_rocksdb(store: object) -> bool:
    """Set the run table's RocksDB memory bounds on a Faust RocksDB store (True), before its
    partitions open (on assignment); any other store (memory://) is left as is (False)."""
    options = getattr(store, "rocksdb_options", None)
    if options is None:
        return False
    options.write_buffer_size = ROCKSDB_WRITE_BUFFER_BYTES
    options.max_write_buffer_number = ROCKSDB_WRITE_BUFFERS
    options.block_cache_size = ROCKSDB_BLOCK_CACHE_BYTES
    return True


def store_reader(store: Mapping[bytes, bytes]) -> Callable[[bytes], bytes | None]:
    """A key's value read straight from a Faust table's store (`table.data`). `table.get`
    reads each present key twice (its `__missing__` support tests `key in store`, a full
    RocksDB get of the ~8 KB state, before getting it) and counts the read in Faust's sensors;
    this is one get."""

    def read(key: bytes) -> bytes | None:
        try:
            return store[key]
        except KeyError:
            return None

    return read


class RunTable:
    def __init__(
        self,
        table: MutableMapping[bytes, bytes],
        max_runs_per_org: int,
        partition_of: Callable[[str], int],
        partitions: int,
        read: Callable[[bytes], bytes | None] | None = None,
        max_runs: int = 0,
        codec: StateCodec | None = None,
        on_stored: Callable[[int], None] | None = None,
        parts: bool = True,
    ) -> None:
        """`read`: how a run key is read (default `table.get`); the worker reads its Faust
        table's store directly (see `store_reader`). `max_runs`: the overall cap (RB_MAX_RUNS).
        `codec`: how a state's JSON is stored (default: zstd with the shipped dictionary);
        `on_stored`: told the bytes each step writes (`rb_state_stored_bytes`). `parts`: store
        a state as its record and parts (`state_parts`, RB_STATE_LAYOUT=parts) or whole; both
        layouts are read either way."""
        self.table = table
        self._read = read or table.get
        self.codec = codec or ZstdStateCodec()
        self._on_stored = on_stored
        self.parts = parts
        # The parts the table holds per run key, and whether this process wrote them to the
        # changelog (False after a recount: the local store may hold parts whose changelog
        # records never went out, so the run's next write sends them all again).
        self._held_parts: dict[bytes, tuple[frozenset[bytes], bool]] = {}
        self._chunks: dict[bytes, tuple[state_parts.Chunk, ...]] = {}  # each run's window chunks
        # Parts no record names (a crash between a step's writes), by partition: removed with
        # the next write in their partition (a write outside an event has no partition).
        self._orphans: dict[int, list[bytes]] = {}
        self.held = RunsHeld(max_runs_per_org, partition_of, partitions, max_runs)
        self.by_state: Counter[str] = Counter()
        self.finished = 0
        self.seen: dict[bytes, Seen] = {}
        self._decoded: OrderedDict[bytes, tuple[bytes, TraceState]] = OrderedDict()
        # Called with the run id of every run evicted, so what others keep per run goes too
        # (the retriever's prefetched answers: abandoned runs never send run_finish).
        self.on_delete: list[Callable[[str], None]] = []

    def lookup(self, run_id: str) -> TraceState | None:
        """The run's state as the table holds it. The table is always read; the decoded state
        kept for those exact bytes is reused (the engine never mutates a state it is given, it
        replaces it, which is also how `replay` passes states along)."""
        key = run_id.encode("utf-8")
        raw = self._read(key)
        if raw is None:
            return None
        kept = self._decoded.get(key)
        if kept is not None and kept[0] == raw:
            self._decoded.move_to_end(key)
            return kept[1]
        st, _ = self._decode(key, raw)
        self._keep(key, raw, st)
        return st

    def _decode(self, key: bytes, raw: bytes) -> tuple[TraceState, list[str]]:
        """A stored record as a state, its parts read back, and the parts' names (ValueError:
        damaged, or a part the table does not hold)."""
        d = orjson.loads(self.codec.unpack(raw))
        if type(d) is not dict:
            raise ValueError("run state: not a JSON object")
        named = state_parts.names(d)
        return TraceState.from_dict(state_parts.join(d, lambda name: self._part(key, name))), named

    def _part(self, key: bytes, name: str) -> bytes:
        raw = self._read(state_parts.part_key(key, name))
        if raw is None:
            raise ValueError(f"run state names part {name}, which the table does not hold")
        return unpack_part(raw)

    def store(self, run_id: str, wire_state: bytes, prior: TraceState | None, new: TraceState | None) -> None:
        """Write a run's new state (after its decision was sent; `wire_state` is its JSON, as
        the engine sealed it) and account for the move. In parts (`state_parts`): the parts
        the table lacks first, then the record, then tombstones for the parts it no longer
        names, so a record is never stored before its parts."""
        key = run_id.encode("utf-8")
        held, fresh = self._held_parts.get(key, (frozenset(), False))
        wrote = 0
        if self.parts and new is not None:
            sp = state_parts.split(new, wire_state, self._chunks.get(key, ()) if fresh else ())
            keys = [(state_parts.key_of(key, n), raw) for n, raw in sp.parts.items()]
            named = frozenset([*(pk for pk, _ in keys), *(state_parts.key_of(key, n) for n, _ in sp.chunks)])
            for pk, raw in keys:
                if pk not in held or not fresh:
                    packed = self.codec.pack(raw)
                    self.table[pk] = packed
                    wrote += len(packed)
            stored = self.codec.pack(sp.record)
        else:
            named = frozenset()
            stored = self.codec.pack(wire_state)
        self.table[key] = stored
        for pk in held - named:
            self._drop(pk)
        if named:
            self._held_parts[key] = (named, True)
            self._chunks[key] = sp.chunks
        else:
            self._held_parts.pop(key, None)
            self._chunks.pop(key, None)
        for pk in self._orphans.pop(self.held.partition_of(run_id), ()):
            if pk not in named:
                self._drop(pk)
        if self._on_stored is not None:
            self._on_stored(wrote + len(stored))
        if new is not None:
            self._keep(key, stored, new)
        else:
            self._decoded.pop(key, None)
        self._account(prior, new)

    def _drop(self, part: bytes) -> None:
        with contextlib.suppress(KeyError):
            del self.table[part]

    def _keep(self, key: bytes, raw: bytes, st: TraceState) -> None:
        self._decoded[key] = (raw, st)
        self._decoded.move_to_end(key)
        if len(self._decoded) > DECODED_KEPT:
            self._decoded.popitem(last=False)

    def delete(self, key: bytes, st: TraceState) -> None:
        """Remove an evicted run: a changelog tombstone, so recovery will not bring it back;
        its parts after its record."""
        del self.table[key]
        held, _ = self._held_parts.pop(key, (frozenset(), False))
        self._chunks.pop(key, None)
        for pk in held:
            self._drop(pk)
        self.seen.pop(key, None)
        self._decoded.pop(key, None)
        self.held.remove(st.run_id)
        self._account(st, None)
        for forget in self.on_delete:
            forget(st.run_id)

    def recount(self, items: Iterable[tuple[bytes, bytes]] | None = None) -> None:
        """Rebuild every index from the table (after a recovery or rebalance), and find the
        parts no record names."""
        by_state: Counter[str] = Counter()
        finished = 0
        seen: dict[bytes, Seen] = {}
        orgs: dict[str, str] = {}
        parts: dict[bytes, set[bytes]] = {}
        records: dict[bytes, bytes] = {}
        for key, raw in self.table.items() if items is None else items:
            if state_parts.is_part(key):
                parts.setdefault(state_parts.run_key_of(key), set()).add(key)
            else:
                records[key] = raw
        held_parts: dict[bytes, tuple[frozenset[bytes], bool]] = {}
        orphans: dict[int, list[bytes]] = {}
        for key, raw in records.items():
            try:
                st, names = self._decode(key, raw)
                named = frozenset(state_parts.part_key(key, n) for n in names)
            except Exception as exc:  # damaged: its run's events fail on it, recovery goes on
                log.warning("run table: the state under %r cannot be read (%s)", key[:80], exc)
                parts.pop(key, None)  # kept: they may be what a repair needs
                continue
            have = parts.pop(key, set())
            if named:
                held_parts[key] = (named, False)
            stray = have - named
            if stray:
                orphans.setdefault(self.held.partition_of(st.run_id), []).extend(sorted(stray))
            seen[key] = Seen(retention_clock(st), st.finished, version(st))
            orgs[st.run_id] = st.config.org_id
            if st.finished:
                finished += 1
            else:
                by_state[st.state] += 1
        for run_key, stray in parts.items():  # parts of a run whose record is gone
            try:
                p = self.held.partition_of(run_key.decode("utf-8"))
            except UnicodeDecodeError:
                continue
            orphans.setdefault(p, []).extend(sorted(stray))
        self.by_state, self.finished, self.seen = by_state, finished, seen
        self._held_parts, self._orphans = held_parts, orphans
        self._chunks = {}  # a run's next write chunks its window anew (and sends every part)
        self.held.reset(orgs)

    def _account(self, old: TraceState | None, new: TraceState | None) -> None:
        if old is not None:
            if old.finished:
                self.finished -= 1
            else:
                self.by_state[old.state] -= 1
        if new is None:
            return
        self.seen[new.run_id.encode("utf-8")] = Seen(retention_clock(new), new.finished, version(new))
        if new.finished:
            self.finished += 1
        else:
            self.by_state[new.state] += 1

    @property
    def decoded_kept(self) -> int:
        """Decoded states kept (at most DECODED_KEPT): the `decoded_states` cache gauge."""
        return len(self._decoded)

    @property
    def active(self) -> int:
        return sum(self.by_state.values())

    def publish(self, metrics: Metrics) -> None:
        """Set the run gauges from the counts (cheap: no table read)."""
        for state in STATES:
            metrics.runs_by_state.labels(state).set(self.by_state.get(state, 0))
        active = self.active
        metrics.active_runs.set(active)
        metrics.table_entries.set(active + self.finished)
