"""`rb-streams deadletters`: read the dead-letter topic, one line per record (time, run,
reason, step, detail), filtered by run, reason and age; `--follow` keeps reading.

Why a command: a run the worker refused (a bad setting in its run_start, a gap in its
steps) is never steered, and its agent only sees decisions come back late. The reason is
in the dead-letter topic; this reads it without a Kafka tool.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any, TextIO

from aiokafka import AIOKafkaConsumer, TopicPartition

from ..kafka.client_settings import KafkaSettings
from ..kafka.security import client_kwargs
from ..shared.logsafe import safe_for_log

DETAIL_CHARS = 120  # of a record's detail on its line (--json for all of it)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")


def reasons() -> tuple[str, ...]:
    """The dead-letter reasons of the wire contract (deadletter.schema.json)."""
    text = resources.files("streams.schemas").joinpath("deadletter.schema.json").read_text("utf-8")
    return tuple(json.loads(text)["properties"]["reason"]["enum"])


def parse_since(raw: str) -> float:
    """`90`, `30s`, `10m`, `2h`, `1d` -> seconds; ValueError otherwise."""
    m = _DURATION.match(raw.strip())
    if m is None or float(m.group(1)) <= 0:
        raise ValueError(f"--since {raw!r}: expected a positive duration such as 30s, 10m, 2h or 1d")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


class TopicMissing(Exception):
    """The dead-letter topic does not exist on the broker (no worker has run there yet)."""


@dataclass(frozen=True)
class Query:
    run: str | None = None
    reason: str | None = None
    since_s: float | None = None
    limit: int = 50
    follow: bool = False


@dataclass(frozen=True)
class Record:
    ts: float  # the worker's processed_ts, else the Kafka timestamp
    key: bytes | None
    value: bytes
    data: dict[str, Any] | None  # None: not a JSON object (never written by a worker)

    @property
    def run_id(self) -> str | None:
        rid = self.data.get("run_id") if self.data else None
        return rid if isinstance(rid, str) else None

    @property
    def reason(self) -> str | None:
        r = self.data.get("reason") if self.data else None
        return r if isinstance(r, str) else None

    def matches(self, q: Query) -> bool:
        if q.reason is not None and self.reason != q.reason:
            return False
        if q.run is not None:
            return self.run_id == q.run or self.key == q.run.encode("utf-8", "surrogatepass")
        return True


def record_of(key: bytes | None, value: bytes | None, kafka_ts_ms: int) -> Record:
    raw = value or b""
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        data = None
    ts = data.get("processed_ts") if data else None
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        ts = kafka_ts_ms / 1000.0
    return Record(float(ts), key, raw, data)


def _when(ts: float) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    except (OverflowError, OSError, ValueError):  # a processed_ts no clock can show
        return "????-??-??T??:??:??Z"


def line(rec: Record) -> str:
    """time  run  reason  step  detail: one line whatever the record holds, every field from
    the record escaped (`safe_for_log`: no control character or escape sequence reaches the
    terminal). The run is the record's run_id, else its key."""
    when = _when(rec.ts)
    if rec.data is None:
        return f"{when}  -  (not a dead-letter record: {len(rec.value)} bytes)"
    step = rec.data.get("step")
    detail = rec.data.get("detail")
    run = rec.run_id or (rec.key.decode("utf-8", "replace") if rec.key else "-")
    return "  ".join(
        [
            when,
            safe_for_log(run, 64),
            safe_for_log(rec.reason or "?", 40),
            f"step {step}" if type(step) is int else "-",
            safe_for_log(detail if isinstance(detail, str) else "", DETAIL_CHARS),
        ]
    )


def json_line(rec: Record) -> str:
    """The record as one line of ASCII JSON: a dead-letter as written (re-encoded, so nothing
    in it reaches the terminal raw), anything else wrapped as {"not_a_deadletter": ...}."""
    if rec.data is not None:
        try:
            return json.dumps(rec.data, ensure_ascii=True, allow_nan=False)
        except ValueError:  # NaN or Infinity: not JSON after all
            pass
    return json.dumps(
        {
            "not_a_deadletter": True,
            "key": None if rec.key is None else rec.key.decode("utf-8", "replace"),
            "bytes": len(rec.value),
            "value": rec.value[:4096].decode("utf-8", "replace"),
            "ts": rec.ts,
        },
        ensure_ascii=True,
    )


def newest(per_partition: Iterable[Iterable[Record]], limit: int) -> list[Record]:
    """The `limit` newest records across partitions, oldest first (each partition's own tail
    is enough: the newest N overall are among the newest N of each)."""
    merged = [(rec.ts, i, j, rec) for i, recs in enumerate(per_partition) for j, rec in enumerate(recs)]
    merged.sort(key=lambda t: t[:3])
    return [t[3] for t in merged[-limit:]] if limit > 0 else []


def topic_of(s: KafkaSettings, tenant: str = "") -> str:
    """The shared dead-letter topic, or a tenant's own in multi-tenant mode."""
    return s.tenant_topic(tenant, "deadletter") if tenant else s.deadletter_topic


async def read(
    s: KafkaSettings,
    topic: str,
    q: Query,
    emit: Callable[[Record], None],
    stop: asyncio.Event | None = None,
) -> int:
    """Emit the matching records (the last `q.limit`, oldest first), then with `q.follow` each
    new match until `stop` is set. Returns how many were emitted."""
    c = reader(s, "rb-deadletters")
    await c.start()
    try:
        tps = await partitions_of(c, topic)
        c.assign(tps)
        ends = await c.end_offsets(tps)
        begins = await c.beginning_offsets(tps)
        await _position(c, tps, q, begins, ends)
        # each partition's last `limit` matches; the newest `limit` of them all are shown
        kept = {tp: deque[Record](maxlen=q.limit) for tp in tps}
        while await _behind(c, tps, ends):
            for tp, recs in (await c.getmany(timeout_ms=500, max_records=2000)).items():
                for r in recs:
                    if r.offset < ends[tp]:
                        rec = record_of(r.key, r.value, r.timestamp)
                        if rec.matches(q):
                            kept[tp].append(rec)
        shown = newest(kept.values(), q.limit)
        for rec in shown:
            emit(rec)
        n = len(shown)
        for tp in tps:  # what came in since the start (fetched above, left out): read it again
            c.seek(tp, ends[tp])
        while q.follow and not (stop is not None and stop.is_set()):
            for recs in (await c.getmany(timeout_ms=500, max_records=2000)).values():
                for r in recs:
                    rec = record_of(r.key, r.value, r.timestamp)
                    if rec.matches(q):
                        emit(rec)
                        n += 1
        return n
    finally:
        await c.stop()


def reader(s: KafkaSettings, client_id: str) -> AIOKafkaConsumer:
    """A consumer outside any group that reads committed records where it is told (assign,
    seek): the dead-letter, outcomes and guard readers' one shape."""
    return AIOKafkaConsumer(
        bootstrap_servers=s.bootstrap_servers,
        client_id=client_id,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        **client_kwargs(s),
    )


async def partitions_of(c: AIOKafkaConsumer, topic: str, wait_s: float = 10.0) -> list[TopicPartition]:
    """The topic's partitions; TopicMissing when the broker has no such topic. (A consumer
    learns a topic's partitions once subscribed to it: subscribed here for that only.)"""
    if topic not in await c.topics():
        raise TopicMissing(topic)
    c.subscribe([topic])
    deadline = time.monotonic() + wait_s
    while not (parts := c.partitions_for_topic(topic)):
        if time.monotonic() > deadline:
            raise TopicMissing(topic)
        await asyncio.sleep(0.05)
    c.unsubscribe()
    return [TopicPartition(topic, p) for p in sorted(parts)]


async def _behind(c: AIOKafkaConsumer, tps: list[TopicPartition], ends: dict[TopicPartition, int]) -> bool:
    """Some partition is not yet read up to where it ended when the command started."""
    for tp in tps:
        if await c.position(tp) < ends[tp]:
            return True
    return False


async def _position(
    c: AIOKafkaConsumer,
    tps: list[TopicPartition],
    q: Query,
    begins: dict[TopicPartition, int],
    ends: dict[TopicPartition, int],
) -> None:
    """Where each partition is read from: `--since` by time; without a filter the last
    `limit` records of each (the tail is all that is shown); else from the beginning."""
    if q.since_s is not None:
        at = int((time.time() - q.since_s) * 1000)
        found = await c.offsets_for_times(dict.fromkeys(tps, at))
        for tp in tps:
            hit = found.get(tp)
            c.seek(tp, ends[tp] if hit is None else hit.offset)
    elif q.run is None and q.reason is None:
        for tp in tps:
            c.seek(tp, max(begins[tp], ends[tp] - q.limit))
    else:
        for tp in tps:
            c.seek(tp, begins[tp])


def printer(as_json: bool, out: TextIO = sys.stdout) -> Callable[[Record], None]:
    """One line per record: the readable line, or with `as_json` the record as JSON."""

    def emit(rec: Record) -> None:
        text = json_line(rec) if as_json else line(rec)
        print(text, file=out, flush=True)

    return emit
