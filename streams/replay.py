"""Offline evaluation: feed wire events through the same core as the worker, no Kafka."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

from .core.decision import DecisionRecord
from .core.engine import Engine
from .core.events import Limits, deadletter_bytes
from .core.guard import Guard, Switch
from .core.monitors import Semantics
from .core.outcome import encode as encode_outcome
from .core.outcome import outcome_record
from .core.policy import Policy
from .core.results import NO_KEY, Raw
from .core.retention import DEFAULT_MAX_RUNS, DEFAULT_MAX_RUNS_PER_ORG, RunsHeld
from .core.state import TraceState
from .etraces.retrieval import Retriever
from .kafka import wire
from .pipeline import Evicted, EvictionRule, MemoryRuns, Pipeline, outcome_of

DEFAULT_PARTITIONS = 8  # RB_PARTITIONS' default: the per-partition run cap needs the count


class Replayer:
    """The worker's pipeline (`streams.pipeline.Pipeline`) over run states kept in memory, with
    E-traces answered synchronously: a failure inside the core ends the same way here
    (internal_error, same fallback state) as in the worker, and so do evictions and caps."""

    def __init__(
        self,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
        *,
        sem: Semantics,
        policy: Policy | None = None,
        retriever: Retriever | None = None,
        max_runs_per_org: int = DEFAULT_MAX_RUNS_PER_ORG,
        partitions: int = DEFAULT_PARTITIONS,
        control_key: str = "",
        max_runs: int = DEFAULT_MAX_RUNS,
        guard: Guard | None = None,
    ) -> None:
        """`guard`: fed the outcome records replay produces (`on_outcome`), in order, and asked
        per event as the worker asks its own: the same switch after the same record."""
        # Without a store, planned E-trace queries are answered "no pattern store configured".
        self.retriever = retriever or Retriever(None)
        self.clock = clock
        held = RunsHeld(
            max_runs_per_org, lambda rid: wire.partition_for(rid, partitions), partitions, max_runs
        )
        self.runs = MemoryRuns(held)
        self.engine = Engine(policy, sem, limits)
        self.limits = self.engine.limits
        self.guard = guard
        self.pipeline = Pipeline(
            self.engine, self.runs, EvictionRule(control_key), None if guard is None else guard.observe_only
        )

    def on_outcome(self, record: dict[str, Any]) -> list[Switch]:
        """An outcome record replay wrote: the guard counts it (the switches it made)."""
        return [] if self.guard is None else self.guard.feed(record)

    @property
    def states(self) -> dict[str, TraceState]:
        return self.runs.states

    @property
    def held(self) -> RunsHeld:
        return self.runs.held

    def feed(
        self, raw: Raw, key: object = NO_KEY, tenant: str | None = None, partition: int | None = None
    ) -> tuple[DecisionRecord | None, dict[str, Any] | None]:
        """One input -> (decision or None, dead-letter record or None). `key`: the message key,
        when replaying records read from Kafka (checked as the worker checks it). `tenant`: the
        tenant whose topic the input came from (multi-tenant mode, as the worker takes it).
        `partition`: the partition it was read from, when known (checked as the worker checks
        it: `wrong_partition`); a file's lines have none, and are taken as the client produces
        them, on their key's partition."""
        decision, dl, _ = self.take(raw, key, tenant, partition)
        return decision, dl

    def take(
        self, raw: Raw, key: object = NO_KEY, tenant: str | None = None, partition: int | None = None
    ) -> tuple[DecisionRecord | None, dict[str, Any] | None, dict[str, Any] | None]:
        """`feed`, and the outcome record the input sends, as the worker sends it (a run_finish
        applied or read again, an unfinished run evicted), or None."""
        out = self.pipeline.run(
            raw, self.clock(), self.retriever.answer_now, key=key, tenant=tenant, partition=partition
        )
        if isinstance(out, Evicted):
            return None, out.deadletter, out.outcome
        return out.decision, out.deadletter, outcome_of(out)

    def unfinished(self) -> Iterator[dict[str, Any]]:
        """The outcome records of the runs still held unfinished (in the order they started):
        what the worker sends when it evicts them as idle ("abandoned")."""
        for st in list(self.runs.states.values()):
            if not st.finished:
                yield outcome_record(st, "evicted")

    def run(
        self, lines: Iterable[bytes], tenant: str | None = None
    ) -> Iterator[tuple[DecisionRecord | None, dict[str, Any] | None]]:
        for line in lines:
            if not line.strip():
                continue
            yield self.feed(line.rstrip(b"\r\n"), tenant=tenant)


def replay_file(
    src: Iterable[bytes],
    out: BinaryIO,
    deadletters: BinaryIO | None = None,
    limits: Limits | None = None,
    *,
    sem: Semantics,
    policy: Policy | None = None,
    retriever: Retriever | None = None,
    max_runs_per_org: int = DEFAULT_MAX_RUNS_PER_ORG,
    partitions: int = DEFAULT_PARTITIONS,
    control_key: str = "",
    max_runs: int = DEFAULT_MAX_RUNS,
    tenant: str | None = None,
    on_deadletter: Callable[[int, dict[str, Any]], None] | None = None,
    outcomes: BinaryIO | None = None,
    guard: Guard | None = None,
    on_event: Callable[[Replayer, DecisionRecord | None], None] | None = None,
) -> tuple[int, int]:
    """Write one decision per line; return (decisions, dead-letters). `tenant`: every line came
    from that tenant's steps topic (multi-tenant mode). `on_deadletter(line_number, record)`
    hears of each refused line (1-based, blank lines counted), so a user can find it.
    `outcomes`: where the runs' outcome records go, one per line, as the worker sends them
    (a run the file leaves unfinished gets the "abandoned" record its idle eviction sends).
    `on_event(replayer, decision)` is called after each line is applied (`--html`'s page)."""
    n_dec = n_dl = 0
    rp = Replayer(
        limits,
        sem=sem,
        policy=policy,
        retriever=retriever,
        max_runs_per_org=max_runs_per_org,
        partitions=partitions,
        control_key=control_key,
        max_runs=max_runs,
        guard=guard,
    )
    for lineno, line in enumerate(src, 1):
        if not line.strip():
            continue
        decision, dl, record = rp.take(line.rstrip(b"\r\n"), tenant=tenant)
        if record is not None:
            rp.on_outcome(record)  # the guard (if any) counts it, as the worker's counts its own
            if outcomes is not None:
                outcomes.write(encode_outcome(record) + b"\n")
        if dl is not None and on_deadletter is not None:
            on_deadletter(lineno, dl)
        if decision is not None:
            out.write(wire.dumps(decision) + b"\n")
            n_dec += 1
        if dl is not None:
            n_dl += 1
            if deadletters is not None:
                deadletters.write(deadletter_bytes(dl) + b"\n")
        if on_event is not None:
            on_event(rp, decision)
    if outcomes is not None:
        for record in rp.unfinished():
            outcomes.write(encode_outcome(record) + b"\n")
    return n_dec, n_dl
