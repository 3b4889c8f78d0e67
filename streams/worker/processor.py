"""The per-event glue around the pure core: order, E-traces, send, store, ack, error boundary.

Broker-free: events come in as anything with `key`, `value` and `message` (topic, partition,
offset, tp), records go out through two send functions, run state lives in a `RunTable` over
any mapping, and acks go to the stream passed with the event. The worker feeds it Faust
events and topics; the unit tests feed it plain records.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.engine import Result, complete, describe, evict_refusal, handle, seal
from ..core.events import Limits, Rejected, deadletter_bytes, deadletter_record
from ..core.monitors import Semantics
from ..core.retention import parse_evict
from ..etraces.retrieval import Retriever
from ..logsafe import safe_for_log, safe_traceback
from .ack_order import AckOrder
from .chains import RunChains
from .metrics import Metrics
from .retention import Retention
from .run_table import RunTable

log = logging.getLogger(__name__)
TRACEBACK_EVERY_S = 60.0  # an internal error's traceback is logged at most this often per stage


class SendDecision(Protocol):
    """Publish a decision (key, value, partition) to the steering topic of `tenant` (None: the
    shared one, single-tenant mode)."""

    def __call__(
        self, key: bytes, value: bytes, partition: int, *, tenant: str | None
    ) -> Awaitable[object]: ...


class SendDeadletter(Protocol):
    """Publish a dead-letter record to the dead-letter topic of `tenant` (None: the shared one)."""

    def __call__(self, key: bytes | None, value: bytes, *, tenant: str | None) -> Awaitable[object]: ...


def no_tenant(_topic: str) -> str | None:
    """Single-tenant mode: no topic belongs to a tenant."""
    return None


class Message(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def tp(self) -> Hashable: ...


class Event(Protocol):
    @property
    def key(self) -> Any: ...
    @property
    def value(self) -> Any: ...
    @property
    def message(self) -> Message: ...


class Acker(Protocol):
    async def ack(self, event: Any) -> Any: ...


@dataclass
class _Job:
    """One event on its way through the worker: the stage it is at, for the error boundary."""

    event: Event
    stream: Acker | None
    t0: float
    now: float
    stage: str = "dispatch"
    run_id: str | None = None
    step: int | None = None
    released: bool = False
    tenant: str | None = None  # whose topic the event came from (multi-tenant mode)


class Processor:
    """Takes each event of a partition in offset order and finishes it exactly once."""

    def __init__(
        self,
        *,
        runs: RunTable,
        retention: Retention,
        retriever: Retriever,
        semantics: Semantics,
        limits: Limits,
        metrics: Metrics,
        send_decision: SendDecision,
        send_deadletter: SendDeadletter,
        steering_partition: Callable[[str], int],
        chains: RunChains | None = None,
        ack_order: AckOrder[Any] | None = None,
        clock: Callable[[], float] = time.time,
        prefetch_embeddings: Callable[[Sequence[str]], None] | None = None,
        tenant_of: Callable[[str], str | None] = no_tenant,
    ) -> None:
        """`tenant_of`: the tenant a steps topic belongs to (multi-tenant mode; Kafka's ACLs
        prove it): the core takes the run's org from it, and the event's answers go to that
        tenant's topics."""
        self.runs = runs
        self.retention = retention
        self.retriever = retriever
        self.sem = semantics
        self.limits = limits
        self.metrics = metrics
        self._send_decision = send_decision
        self._send_deadletter = send_deadletter
        self._steering_partition = steering_partition
        self.chains = chains or RunChains()
        self.ack_order: AckOrder[Any] = ack_order or AckOrder()
        self._clock = clock
        self._prefetch_embeddings = prefetch_embeddings
        self._tenant_of = tenant_of
        self.processed: dict[Hashable, int] = {}  # tp -> last offset evaluated (the lag gauge)
        self._traced: dict[str, float] = {}  # stage -> when its last traceback was logged

    async def process(self, event: Event, stream: Acker | None = None) -> None:
        """Take one event: inline, unless its run waits on E-traces or it needs them.

        The error boundary: this never raises (cancellation aside). Whatever fails on the way
        (evaluate, E-traces, complete, encode, send, store, ...) dead-letters the event as
        internal_error naming the stage and the exception, and the event is acked all the
        same. Acks are released in offset order (AckOrder), so one event left unacked would
        hold back every later ack of its partition, stop its commits and block shutdown.
        """
        job = _Job(event, stream, t0=time.perf_counter(), now=self._clock())
        job.tenant = self._tenant_of(event.message.topic)
        if stream is not None:
            self.ack_order.received(event.message.tp, event.message.offset)
        try:
            if await self._take(job):
                return  # a task finishes and acks it
        except Exception as exc:
            await self._fail(job, exc)
        await self._release(job)

    async def _take(self, job: _Job) -> bool:
        """Process the event, or hand it to a task (True: the task will ack it)."""
        key = job.event.key
        prev = self.chains.pending(key)
        req = parse_evict(job.event.value)
        if req is not None:
            if prev is not None:
                await prev_done(prev)  # after the run's pending event, like any of its events
            job.stage, job.run_id = "evict", req.run_id
            refused = evict_refusal(self.runs.lookup(req.run_id), job.tenant)
            if refused is None:
                refused = self.retention.apply(key, req, self._clock())
            if refused is not None:
                await self._deadletter(job, Rejected("invalid_control", refused, req.run_id))
            return False
        if prev is not None:  # queue behind the run's pending event
            await self.chains.spawn(key, self._detached(job, prev=prev))
            return True
        result = self._evaluate(job)
        if result.plan and not self.retriever.ready(result.run_id, result.plan):
            await self.chains.spawn(key, self._detached(job, result=result))
            return True
        await self._conclude(job, result)
        return False

    async def _detached(
        self, job: _Job, prev: asyncio.Task[None] | None = None, result: Result | None = None
    ) -> None:
        """An event finished off the agent loop: after its run's previous event, if any."""
        try:
            if prev is not None:
                await prev_done(prev)
            if result is None:
                job.t0, job.now = time.perf_counter(), self._clock()
                result = self._evaluate(job)
            await self._conclude(job, result)
        except Exception as exc:  # the same boundary as `process`: nothing awaits this task
            await self._fail(job, exc)
        await self._release(job)

    def _evaluate(self, job: _Job) -> Result:
        job.stage = "evaluate"
        event = job.event
        self.processed[event.message.tp] = event.message.offset
        held = self.runs.held
        result = handle(
            event.value,
            self.runs.lookup,
            self.limits,
            job.now,
            self.sem,
            key=event.key,
            runs_cap=held.refusal,
            tenant=job.tenant,
        )
        job.run_id, job.step = result.run_id, result.step
        if result.opens_run and result.run_id is not None and result.state is not None:
            # Counted now, in the partition's event order (a new run's run_start is never
            # queued behind another event), as replay counts it.
            held.add(result.run_id, result.state.config.org_id)
        return result

    async def _conclude(self, job: _Job, result: Result) -> None:
        """Answer the E-trace plan (if any), encode, send, store; then start the queries this
        step planned for the run's next decision."""
        opened = result.opens_run
        prefetch = result.prefetch
        if result.plan:
            job.stage = "etraces"
            t0 = time.perf_counter()
            try:
                answers = await self.retriever.answer(result.plan, result.run_id)
            except Exception as exc:  # the retriever answers errors itself; a bug must not stop us
                self._internal(job, "etraces", exc)
                answers = []  # the decision goes out without E-traces, saying why
            self.metrics.etrace_wait(time.perf_counter() - t0)
            job.stage = "complete"
            result = complete(result, answers)
        job.stage = "encode"
        result = seal(result, self.limits)
        if opened and not result.opens_run and result.run_id is not None:
            self.runs.held.remove(result.run_id)  # the run_start failed after all: no run
        await self._finish(job, result)
        if result.run_id is None:
            return
        if result.to_embed and self._prefetch_embeddings is not None and result.rejection is None:
            job.stage = "prefetch"
            try:  # the next step's monitor check, embedded ahead (streams.embeddings.prefetch)
                self._prefetch_embeddings(result.to_embed)
            except Exception as exc:  # the decision is out: only count it
                self._internal(job, "prefetch", exc)
        job.stage = "etraces"
        if result.event_type == "run_finish" and not result.duplicate:
            self.retriever.discard(result.run_id)
        elif (
            prefetch
            and result.rejection is None
            and result.state is not None
            # only what the stored state says is pending (a failed step keeps the old state)
            and result.state.etraces_pending == [q.to_wire() for q in prefetch.queries]
        ):
            self.retriever.prefetch(result.run_id, prefetch)

    async def _finish(self, job: _Job, result: Result) -> None:
        """Send the decision or dead-letter, then store the state (after the send: a crash in
        between re-sends the same decision rather than losing it), then count."""
        if result.failed_stage is not None:  # the core caught a failure of its own
            self._internal(job, result.failed_stage, result.error)
        if result.rejection is None and result.wire_decision is not None and result.run_id is not None:
            job.stage = "send"
            try:
                await self._send_decision(
                    result.run_id.encode("utf-8"),
                    result.wire_decision,
                    self._steering_partition(result.run_id),
                    tenant=job.tenant,
                )
            except Exception as exc:
                # The decision is lost and says so; the state still moves on exactly as in
                # replay, so the run's later decisions are the same.
                await self._fail(job, exc)
        if result.rejection is not None:
            await self._deadletter(job, result.rejection)
        if result.wire_state is not None and result.run_id is not None:
            job.stage = "store"
            self.runs.store(result.run_id, result.wire_state, result.prior, result.state)
        if result.rejection is None:
            job.stage = "metrics"
            try:
                self.metrics.observe(result, time.perf_counter() - job.t0, job.now)
            except Exception as exc:  # the event was answered: only count it
                self._internal(job, "metrics", exc)

    async def _fail(self, job: _Job, exc: BaseException) -> None:
        """Dead-letter the event as internal_error naming the stage. Never raises."""
        self._internal(job, job.stage, exc)
        rej = Rejected("internal_error", f"{job.stage}: {describe(exc)}", job.run_id, job.step)
        await self._deadletter(job, rej)

    async def _deadletter(self, job: _Job, rej: Rejected) -> None:
        msg = job.event.message
        try:
            rec = deadletter_record(
                job.event.value,
                rej,
                self.limits,
                job.now,
                {"topic": msg.topic, "partition": msg.partition, "offset": msg.offset},
            )
            key = rej.run_id.encode("utf-8", "surrogatepass") if rej.run_id else None
            await self._send_deadletter(key, deadletter_bytes(rec), tenant=job.tenant)
        except Exception as exc:  # nothing left to tell: count and log it
            self._internal(job, "deadletter", exc)
            return
        self.metrics.deadletter(rej.reason)
        log.info("dead-lettered offset %s: %s", msg.offset, rej.reason)

    def _internal(self, job: _Job, stage: str, exc: BaseException | None) -> None:
        """Count and log an internal error; the traceback at most once a minute per stage
        (an event that fails every time must not flood the log)."""
        try:
            self.metrics.internal_error(stage)
            msg = job.event.message
            now = time.monotonic()
            trace = exc is not None and now - self._traced.get(stage, -TRACEBACK_EVERY_S) >= TRACEBACK_EVERY_S
            if trace:
                self._traced[stage] = now
            log.error(
                "internal error at stage %s, offset %s of %s[%s]: %s (dead-lettered internal_error, acked)%s",
                stage,
                msg.offset,
                msg.topic,
                msg.partition,
                "unknown" if exc is None else safe_for_log(describe(exc), None),  # may quote the event
                f"\n{safe_traceback(exc)}" if trace and exc is not None else "",
            )
        except Exception:  # pragma: no cover - logging and counting must not break the boundary
            pass

    async def _release(self, job: _Job) -> None:
        """Ack the event (released in offset order). Exactly once; never raises."""
        if job.released or job.stream is None:
            return
        job.released = True
        msg = job.event.message
        try:
            ready = self.ack_order.done(msg.tp, msg.offset, job.event)
        except Exception as exc:
            self._internal(job, "ack", exc)
            ready = [job.event]
        for ev in ready:
            try:
                await job.stream.ack(ev)
            except Exception as exc:
                self._internal(job, "ack", exc)


async def prev_done(prev: asyncio.Task[None]) -> None:
    """Wait for a run's earlier event to finish, whatever its outcome (it has its own boundary)."""
    await asyncio.wait([prev])
