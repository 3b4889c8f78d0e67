"""Recovery never moves a run's state backwards.

A worker restarted on its own data directory (compose, Kubernetes) keeps its local RocksDB,
and Faust replays the changelog from the offset it last recorded there. That offset is
written when the broker acknowledges a changelog record; a kill -9 after a record reached the
broker but before its acknowledgement was handled leaves the offset behind, so the replay
writes that record again over a local state that had moved on: the run's later steps, whose
decisions may already be out, are undone. Their events were not committed (the commit waits
for the changelog, `producer_guard`), so they come back, and are evaluated again from the
older state: a second, different decision for the same step (a new `processed_ts`).

Kept forward, the local state holds those steps, and their redelivered events re-send the
decisions as first sent (`core.engine._resend`), which also rewrites the state, so the
changelog catches up. A run's states move forward in (last step, finished, duplicates): a
replayed record behind the local one is skipped. A deletion (an evicted run) always applies.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from .state_codec import unpack

log = logging.getLogger(__name__)

Progress = tuple[int, bool, int]


def progress(raw: bytes) -> Progress | None:
    """How far a stored run state (in any encoding the table writes: `state_codec`) has got;
    None when it cannot be read (then it is applied)."""
    try:
        d = orjson.loads(unpack(raw))
        return (int(d["last_step"]), bool(d.get("finished", False)), int(d.get("duplicates", 0)))
    except Exception:
        return None


def behind(record: bytes, local: bytes | None) -> bool:
    """Is a replayed record's state older than the one the store holds?"""
    if local is None:
        return False
    new, old = progress(record), progress(local)
    return new is not None and old is not None and new < old


def forward_only(store: Any, on_skipped: Callable[[int], None] = lambda _n: None) -> bool:
    """Make a Faust RocksDB store's changelog replay skip records behind the local state.
    Returns False (and changes nothing) for a store without local partitions (memory://)."""
    apply = getattr(store, "apply_changelog_batch", None)
    db_for = getattr(store, "_db_for_partition", None)
    if apply is None or db_for is None:
        return False

    def guarded(batch: Iterable[Any], to_key: Callable[[Any], Any], to_value: Callable[[Any], Any]) -> None:
        kept: list[Any] = []
        skipped = 0
        seen: dict[tuple[int, bytes], bytes | None] = {}  # this batch's latest value per key
        last: dict[Any, int] = {}  # the highest offset read per partition, kept or skipped
        for event in batch:
            msg = event.message
            last[msg.tp] = max(msg.offset, last.get(msg.tp, msg.offset))
            where = (msg.partition, msg.key)
            if msg.value is not None and msg.key is not None:
                local = seen[where] if where in seen else db_for(msg.partition).get(msg.key)
                if behind(msg.value, local):
                    skipped += 1
                    continue
            seen[where] = msg.value
            kept.append(event)
        apply(kept, to_key, to_value)
        for tp, offset in last.items():  # the replay has read past the skipped records too
            store.set_persisted_offset(tp, offset)
        if skipped:
            log.info("recovery kept %d run state(s) newer than their changelog record", skipped)
            on_skipped(skipped)

    store.apply_changelog_batch = guarded
    return True
