"""Offline evaluation: feed wire events through the same core as the worker, no Kafka."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

from .core.decision import Decision
from .core.engine import NO_KEY, complete, evict_refusal, handle, seal
from .core.events import Limits, Rejected, deadletter_bytes, deadletter_record
from .core.monitors import Semantics
from .core.retention import (
    DEFAULT_MAX_RUNS_PER_ORG,
    NOT_KEYED,
    RunsHeld,
    judge,
    parse_evict,
)
from .core.state import TraceState
from .etraces.retrieval import Retriever
from .kafka import wire

DEFAULT_PARTITIONS = 8  # RB_PARTITIONS' default: the per-partition run cap needs the count


class Replayer:
    """Holds run states in memory, as the worker's table does on Kafka.

    Runs the worker's pipeline (handle, E-traces, complete, seal) in order, so a failure inside
    the core ends the same way here (internal_error, same fallback state) as in the worker.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
        *,
        sem: Semantics,
        retriever: Retriever | None = None,
        max_runs_per_org: int = DEFAULT_MAX_RUNS_PER_ORG,
        partitions: int = DEFAULT_PARTITIONS,
        control_key: str = "",
    ) -> None:
        self.limits = limits or Limits()
        # Without a store, planned E-trace queries are answered "no pattern store configured".
        self.retriever = retriever or Retriever(None)
        self.states: dict[str, TraceState] = {}
        self.clock = clock
        self.control_key = control_key
        self.held = RunsHeld(max_runs_per_org, lambda rid: wire.partition_for(rid, partitions), partitions)
        self.sem = sem

    def feed(
        self, raw: bytes | str | None, key: object = NO_KEY, tenant: str | None = None
    ) -> tuple[Decision | None, dict[str, Any] | None]:
        """One input -> (decision or None, dead-letter record or None). `key`: the message key,
        when replaying records read from Kafka (checked as the worker checks it). `tenant`: the
        tenant whose topic the input came from (multi-tenant mode, as the worker takes it)."""
        req = parse_evict(raw)
        if req is not None:  # a recorded eviction: judged by the worker's rule (core.retention)
            if key is not NO_KEY and key != req.run_id.encode("utf-8"):
                rej = Rejected("invalid_control", NOT_KEYED, req.run_id)
                return None, deadletter_record(raw, rej, self.limits, self.clock())
            foreign = evict_refusal(self.states.get(req.run_id), tenant)
            if foreign is not None:
                return None, deadletter_record(
                    raw, Rejected("invalid_control", foreign, req.run_id), self.limits, self.clock()
                )
            applies, refused = judge(req, self.states.get(req.run_id), self.control_key)
            if refused is not None:
                rej = Rejected("invalid_control", refused, req.run_id)
                return None, deadletter_record(raw, rej, self.limits, self.clock())
            if applies:
                del self.states[req.run_id]
                self.held.remove(req.run_id)
            return None, None
        now = self.clock()
        result = handle(
            raw,
            self.states.get,
            self.limits,
            now,
            self.sem,
            key=key,
            runs_cap=self.held.refusal,
            tenant=tenant,
        )
        if result.plan:
            result = complete(result, self.retriever.answer_now(result.plan))
        result = seal(result, self.limits)
        if result.state is not None and result.run_id is not None:
            self.states[result.run_id] = result.state
            if result.opens_run:
                self.held.add(result.run_id, result.state.config.org_id)
        if result.rejection is not None:
            return None, deadletter_record(raw, result.rejection, self.limits, now)
        return result.decision, None

    def run(
        self, lines: Iterable[bytes], tenant: str | None = None
    ) -> Iterator[tuple[Decision | None, dict[str, Any] | None]]:
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
    retriever: Retriever | None = None,
    max_runs_per_org: int = DEFAULT_MAX_RUNS_PER_ORG,
    partitions: int = DEFAULT_PARTITIONS,
    control_key: str = "",
    tenant: str | None = None,
) -> tuple[int, int]:
    """Write one decision per line; return (decisions, dead-letters). `tenant`: every line came
    from that tenant's steps topic (multi-tenant mode)."""
    n_dec = n_dl = 0
    rp = Replayer(
        limits,
        sem=sem,
        retriever=retriever,
        max_runs_per_org=max_runs_per_org,
        partitions=partitions,
        control_key=control_key,
    )
    for decision, dl in rp.run(src, tenant):
        if decision is not None:
            out.write(wire.dumps(decision) + b"\n")
            n_dec += 1
        if dl is not None:
            n_dl += 1
            if deadletters is not None:
                deadletters.write(deadletter_bytes(dl) + b"\n")
    return n_dec, n_dl
