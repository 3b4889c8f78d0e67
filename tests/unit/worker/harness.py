"""Broker-free parts for the worker's unit tests: records shaped like Faust events, a stream
that records acks, outputs that record what was sent, and a pattern store whose answers wait
for a gate (the store is a stand-in behind the `PatternStore` port; the processor, retriever,
run table and core under test are the real ones)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiokafka.partitioner import murmur2

from streams.core.etrace_rules import Answer, Query
from streams.core.events import Limits
from streams.core.monitors import Semantics
from streams.core.policy import Policy
from streams.etraces.retrieval import Retriever
from streams.kafka import wire
from streams.worker.metrics import Metrics
from streams.worker.processor import Processor
from streams.worker.retention_sweep import Retention
from streams.worker.run_table import RunTable

PARTITIONS = 4


@dataclass(frozen=True)
class Msg:
    topic: str
    partition: int
    offset: int

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Ev:
    key: bytes | None
    value: bytes
    message: Msg


class Stream:
    """Records the offsets acked, in the order they were acked."""

    def __init__(self) -> None:
        self.acked: list[int] = []

    async def ack(self, event: Ev) -> None:
        self.acked.append(event.message.offset)


class GatedStore:
    """Answers every query with no hits; the first `hold` queries wait for `gate`."""

    def __init__(self, hold: int = 0) -> None:
        self.gate = threading.Event()
        self.hold = hold
        self.asked: list[str] = []
        self._lock = threading.Lock()

    def answer(self, query: Query) -> Answer:
        with self._lock:
            self.asked.append(query.tier)
            held = len(self.asked) <= self.hold
        if held:
            self.gate.wait(10)
        return Answer(query.tier)

    def cached(self, query: Query) -> Answer | None:
        return None  # every query goes through `answer` (and its gate)

    def close(self) -> None:
        pass


@dataclass
class Rig:
    processor: Processor
    table: dict[bytes, bytes]
    runs: RunTable
    retention: Retention
    metrics: Metrics
    stream: Stream
    now: list[float]
    decisions: list[dict[str, Any]] = field(default_factory=list)
    deadletters: list[dict[str, Any]] = field(default_factory=list)
    steps_sent: list[tuple[bytes, bytes, int]] = field(default_factory=list)
    outcomes: list[tuple[bytes, bytes]] = field(default_factory=list)  # (key, value) as sent
    offset: int = 0
    partitions: int = PARTITIONS

    async def feed(
        self,
        ev: dict[str, Any] | bytes,
        key: bytes | None = None,
        partition: int | None = None,
        topic: str = "steps",
    ) -> None:
        """Process one record. `partition`: default the key's (Kafka's default partitioner),
        where a producer keyed by run_id puts it; 0 without a key."""
        raw = ev if isinstance(ev, bytes) else orjson.dumps(ev)
        if key is None and isinstance(ev, dict):
            key = str(ev["run_id"]).encode()
        if partition is None:
            partition = key_partition(key, self.partitions)
        msg = Msg(topic, partition, self.offset)
        self.offset += 1
        await self.processor.process(Ev(key, raw, msg), self.stream)

    async def drain(self) -> None:
        while len(self.processor.chains):
            await asyncio.sleep(0.01)

    def steps_of(self, run_id: str) -> list[int]:
        return [d["step"] for d in self.decisions if d["run_id"] == run_id]


def key_partition(key: bytes | None, partitions: int = PARTITIONS) -> int:
    """The partition Kafka's default partitioner gives a key (0 for none)."""
    return 0 if key is None else int(murmur2(key) & 0x7FFFFFFF) % partitions


def rig(
    sem: Semantics,
    store: Any = None,
    *,
    retention_s: float = 3600.0,
    idle_s: float = 86400.0,
    prefetch: Callable[[Sequence[str]], None] | None = None,
    control_key: str = "k",
    policy: Policy | None = None,
    tenant_of: Callable[[str], str | None] | None = None,
    partitions: int = PARTITIONS,
) -> Rig:
    """`partitions`: of the steps topic (1: every run on partition 0, one offset sequence)."""
    table: dict[bytes, bytes] = {}
    metrics = Metrics()
    now = [1000.0]

    def partition_of(run_id: str) -> int:
        return wire.partition_for(run_id, partitions)

    runs = RunTable(table, 0, partition_of, partitions)
    sent: list[tuple[bytes, bytes, int]] = []

    async def send_step(key: bytes, value: bytes, partition: int) -> None:
        sent.append((key, value, partition))

    retention = Retention(
        runs,
        send_step,
        partition_of,
        finished_retention_s=retention_s,
        idle_timeout_s=idle_s,
        evict_interval_s=1.0,
        control_key=control_key,
    )
    decisions: list[dict[str, Any]] = []
    deadletters: list[dict[str, Any]] = []

    async def send_decision(key: bytes, value: bytes, partition: int, *, tenant: str | None) -> None:
        decisions.append(orjson.loads(value))

    async def send_deadletter(key: bytes | None, value: bytes, *, tenant: str | None) -> None:
        deadletters.append(orjson.loads(value))

    outcomes: list[tuple[bytes, bytes]] = []

    async def send_outcome(key: bytes, value: bytes, *, delivered: bool = False) -> None:
        assert delivered or orjson.loads(value)["ended_by"] == "run_finish"  # an eviction's waits
        outcomes.append((key, value))

    processor = Processor(
        send_outcome=send_outcome,
        runs=runs,
        retention=retention,
        retriever=Retriever(store, timeout_s=10.0, concurrency=2),
        semantics=sem,
        limits=Limits(),
        metrics=metrics,
        send_decision=send_decision,
        send_deadletter=send_deadletter,
        steering_partition=partition_of,
        clock=lambda: now[0],
        prefetch_embeddings=prefetch,
        policy=policy,
        **({"tenant_of": tenant_of} if tenant_of is not None else {}),
    )
    return Rig(
        processor,
        table,
        runs,
        retention,
        metrics,
        Stream(),
        now,
        decisions,
        deadletters,
        sent,
        outcomes,
        partitions=partitions,
    )
