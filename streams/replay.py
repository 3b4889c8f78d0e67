"""Offline evaluation: feed wire events through the same core as the worker, no Kafka."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

from .core.engine import complete, handle
from .core.events import Limits, deadletter_record
from .core.monitors import Semantics
from .core.retention import parse_evict, version
from .core.state import TraceState
from .etraces.retrieval import Retriever
from .kafka import wire


class Replayer:
    """Holds run states in memory, as the worker's table does on Kafka."""

    def __init__(
        self,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
        sem: Semantics | None = None,
        retriever: Retriever | None = None,
    ) -> None:
        self.limits = limits or Limits()
        # Without a store, planned E-trace queries are answered "no pattern store configured".
        self.retriever = retriever or Retriever(None)
        self.states: dict[str, TraceState] = {}
        self.clock = clock
        if sem is None:
            from .embeddings.embedder import default_semantics

            sem = default_semantics()
        self.sem = sem

    def feed(self, raw: bytes | str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """One input line -> (decision or None, dead-letter record or None)."""
        req = parse_evict(raw)
        if req is not None:  # a recorded eviction: applied as the worker applied it
            st = self.states.get(req.run_id)
            if st is not None and version(st) == req.version:
                del self.states[req.run_id]
            return None, None
        now = self.clock()
        result = handle(raw, self.states.get, self.limits, now, self.sem)
        if result.plan:
            result = complete(result, self.retriever.answer_now(result.plan))
        if result.rejection is not None:
            return None, deadletter_record(raw, result.rejection, self.limits, now)
        if result.state is not None and result.run_id is not None:
            self.states[result.run_id] = result.state
        return result.decision, None

    def run(self, lines: Iterable[bytes]) -> Iterator[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        for line in lines:
            if not line.strip():
                continue
            yield self.feed(line.rstrip(b"\r\n"))


def replay_file(
    src: BinaryIO,
    out: BinaryIO,
    deadletters: BinaryIO | None = None,
    limits: Limits | None = None,
    sem: Semantics | None = None,
    retriever: Retriever | None = None,
) -> tuple[int, int]:
    """Write one decision per line; return (decisions, dead-letters)."""
    n_dec = n_dl = 0
    for decision, dl in Replayer(limits, sem=sem, retriever=retriever).run(src):
        if decision is not None:
            out.write(wire.dumps(decision) + b"\n")
            n_dec += 1
        if dl is not None:
            n_dl += 1
            if deadletters is not None:
                deadletters.write(wire.dumps(dl) + b"\n")
    return n_dec, n_dl
