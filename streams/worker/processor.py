"""The worker's side of the pipeline: per-run order, E-trace answers, send, store, ack, the
error boundary, metrics. What an event comes to is decided by `streams.pipeline.Pipeline`
(evict, cap, step, seal, store), the same as in `replay`; this module does Faust's part.

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

from ..core.engine import Engine, describe
from ..core.events import Limits, Rejected, deadletter_bytes, deadletter_record
from ..core.monitors import Semantics
from ..core.outcome import encode as encode_outcome
from ..core.policy import Policy
from ..core.results import Decided, Outcome, Sealed
from ..core.retention import parse_evict
from ..etraces.retrieval import Retriever
from ..pipeline import Evicted, ObserveOnly, Pipeline, outcome_of
from ..shared.logsafe import safe_for_log, safe_traceback
from .ack_order import AckOrder
from .chains import RunChains
from .deadlettered import RecentDeadletters
from .metrics import Metrics
from .retention_sweep import Retention
from .run_table import RunTable

log = logging.getLogger(__name__)
TRACEBACK_EVERY_S = 60.0  # an internal error's traceback is logged at most this often per stage
# Dead-letters logged one line each, at most this many per window (a producer sending junk
# must not flood the log); the rest are counted in one line when the window ends.
DEADLETTER_LOG_LINES = 20
DEADLETTER_LOG_WINDOW_S = 10.0


class SendDecision(Protocol):
    """Publish a decision (key, value, partition) to the steering topic of `tenant` (None: the
    shared one, single-tenant mode)."""

    def __call__(
        self, key: bytes, value: bytes, partition: int, *, tenant: str | None
    ) -> Awaitable[object]: ...


class SendDeadletter(Protocol):
    """Publish a dead-letter record to the dead-letter topic of `tenant` (None: the shared one)."""

    def __call__(self, key: bytes | None, value: bytes, *, tenant: str | None) -> Awaitable[object]: ...


class SendOutcome(Protocol):
    """Publish a run's outcome record (key: its run_id) to the outcomes topic; `delivered`:
    return only once the broker has it."""

    def __call__(self, key: bytes, value: bytes, *, delivered: bool = False) -> Awaitable[object]: ...


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
        policy: Policy | None = None,
        send_outcome: SendOutcome | None = None,
        observe_only: ObserveOnly | None = None,
    ) -> None:
        """`tenant_of`: the tenant a steps topic belongs to (multi-tenant mode; Kafka's ACLs
        prove it): the core takes the run's org from it, and the event's answers go to that
        tenant's topics. `policy`: the scorers, transitions and profiles runs may name."""
        self.runs = runs
        self.retention = retention
        self.retriever = retriever
        self.limits = limits
        self.pipeline = Pipeline(
            Engine(policy, semantics, limits),
            runs,
            retention.rule,
            observe_only,  # the guard's verdict (core.guard), asked per event
            defer_removal=send_outcome is not None,
        )
        self.metrics = metrics
        self._send_decision = send_decision
        self._send_deadletter = send_deadletter
        self._send_outcome = send_outcome
        self._steering_partition = steering_partition
        self.chains = chains or RunChains()
        self.ack_order: AckOrder[Any] = ack_order or AckOrder()
        self._clock = clock
        self._prefetch_embeddings = prefetch_embeddings
        self._tenant_of = tenant_of
        # tp -> the last offset taken, in the consumer's order (the lag gauge, the progress watch)
        self.processed: dict[Hashable, int] = {}
        self._traced: dict[str, float] = {}  # stage -> when its last traceback was logged
        self.deadlettered = RecentDeadletters()  # what /runs/{id} says of a refused run
        self._dl_window = (-DEADLETTER_LOG_WINDOW_S, 0, 0)  # (start, lines logged, left unlogged)

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
        # Here, not at evaluation: an event queued behind its run's pending one is evaluated
        # after later offsets of other runs, and would set its partition back (what the lag
        # gauge and the progress watch then take for events waiting, forever once idle).
        self.processed[event.message.tp] = event.message.offset
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
        if prev is not None:
            if parse_evict(job.event.value) is None:  # queue behind the run's pending event
                await self.chains.spawn(key, self._detached(job, prev=prev))
                return True
            await prev_done(prev)  # an eviction: after the run's pending event, like its events
            job.now = self._clock()  # judged by the clock when it applies, not when it arrived
        # The run is held from the lookup until its state is stored: another tenant's agent
        # taking an event of the same run id meanwhile chains behind (chains.RunChains).
        hold = self.chains.hold(key)
        after: asyncio.Future[None] | None = None
        try:
            taken = self._evaluate(job)
            if isinstance(taken, Evicted):
                await self._evicted(job, taken)
                return False
            plan = taken.effects.answer_now if isinstance(taken, Decided) else None
            if isinstance(taken, Decided) and plan and not self.retriever.ready(taken.run_id, plan):
                after = await self.chains.spawn(key, self._detached(job, outcome=taken), replace=hold)
                return True
            await self._conclude(job, taken)
            return False
        finally:
            self.chains.release(key, hold, after)

    async def _detached(
        self, job: _Job, prev: asyncio.Future[None] | None = None, outcome: Outcome | None = None
    ) -> None:
        """An event finished off the agent loop: after its run's previous event, if any."""
        try:
            if prev is not None:
                await prev_done(prev)
            if outcome is None:
                job.t0, job.now = time.perf_counter(), self._clock()
                taken = self._evaluate(job)
                assert not isinstance(taken, Evicted)  # evictions are never detached (see _take)
                outcome = taken
            await self._conclude(job, outcome)
        except Exception as exc:  # the same boundary as `process`: nothing awaits this task
            await self._fail(job, exc)
        await self._release(job)

    def _evaluate(self, job: _Job) -> Outcome | Evicted:
        job.stage = "evaluate"
        event = job.event
        msg = event.message
        taken = self.pipeline.take(
            event.value,
            job.now,
            key=event.key,
            tenant=job.tenant,
            source=_source(msg),
            partition=msg.partition,  # a run's events must be on its key's partition
        )
        if isinstance(taken, Evicted):
            job.stage, job.run_id = "evict", taken.run_id
        else:
            job.run_id, job.step = taken.run_id, taken.step
        return taken

    async def _evicted(self, job: _Job, ev: Evicted) -> None:
        """Count an applied eviction, dead-letter a refused one; either way the sweep may ask
        again for a run whose request was judged."""
        if not ev.forged:
            self.retention.settled(job.event.key)
        if ev.applied is not None:
            self.metrics.evictions.labels(ev.applied).inc()
            log.info("evicted run %s (%s)", safe_for_log(ev.run_id), ev.applied)
        if ev.outcome is not None:
            # on the broker before the run's state goes: nothing else would send it again
            await self._publish_outcome(job, ev.outcome, count=True, delivered=True)
            job.stage = "evict"
            self.pipeline.remove(ev)
        if ev.rejection is not None and ev.deadletter is not None:
            if ev.rejection.reason == "internal_error":
                self._internal(job, "evict", None)
            await self._send_record(job, ev.rejection, ev.deadletter)

    async def _conclude(self, job: _Job, outcome: Outcome) -> None:
        """Answer the E-trace queries the outcome needs now (if any), seal, send, store; then
        start what the decision asks for ahead (the next step's queries and embeddings)."""
        try:
            answers: list[Any] = []
            plan = outcome.effects.answer_now if isinstance(outcome, Decided) else None
            if isinstance(outcome, Decided) and plan:
                job.stage = "etraces"
                t0 = time.perf_counter()
                try:
                    answers = await self.retriever.answer(plan, outcome.run_id)
                except Exception as exc:  # the retriever answers errors itself; a bug must not stop us
                    self._internal(job, "etraces", exc)
                    answers = []  # the decision goes out without E-traces, saying why
                self.metrics.etrace_wait(time.perf_counter() - t0)
            job.stage = "encode"
            sealed = self.pipeline.seal(outcome, answers, _source(job.event.message))
            await self._finish(job, sealed)
        except BaseException:  # a failure or a cancellation before the state was stored
            self.pipeline.release(outcome)
            raise
        if sealed.run_id is None:
            return
        if sealed.to_embed and self._prefetch_embeddings is not None:
            job.stage = "prefetch"
            try:  # the next step's monitor check, embedded ahead (streams.embeddings.prefetch)
                self._prefetch_embeddings(sealed.to_embed)
            except Exception as exc:  # the decision is out: only count it
                self._internal(job, "prefetch", exc)
        job.stage = "etraces"
        if sealed.finishes_run:
            self.retriever.discard(sealed.run_id)
        elif sealed.prefetch:
            self.retriever.prefetch(sealed.run_id, sealed.prefetch)

    async def _finish(self, job: _Job, sealed: Sealed) -> None:
        """Send the decision or dead-letter, then store the state (after the send: a crash in
        between re-sends the same decision rather than losing it), then count."""
        if sealed.failed_stage is not None:  # the core caught a failure of its own
            self._internal(job, sealed.failed_stage, sealed.error)
        if sealed.decision_bytes is not None and sealed.run_id is not None:
            job.stage = "send"
            try:
                await self._send_decision(
                    sealed.run_id.encode("utf-8"),
                    sealed.decision_bytes,
                    self._steering_partition(sealed.run_id),
                    tenant=job.tenant,
                )
            except Exception as exc:
                # The decision is lost and says so; the state still moves on exactly as in
                # replay, so the run's later decisions are the same.
                await self._fail(job, exc)
        if sealed.rejection is not None and sealed.deadletter is not None:
            await self._send_record(job, sealed.rejection, sealed.deadletter)
        record = outcome_of(sealed)
        if record is not None:  # before the store, like the decision: a copy re-sends it
            await self._publish_outcome(job, record, count=not sealed.duplicate)
        job.stage = "store"
        self.pipeline.store(sealed)
        if sealed.rejection is None:
            job.stage = "metrics"
            try:
                self.metrics.observe(sealed, time.perf_counter() - job.t0, job.now)
            except Exception as exc:  # the event was answered: only count it
                self._internal(job, "metrics", exc)

    async def _publish_outcome(
        self, job: _Job, record: dict[str, Any], *, count: bool, delivered: bool = False
    ) -> None:
        """Send a run's outcome record (the same bytes for the same final state, so a copy sent
        again after a restart replaces the first on the compacted topic), then count it (not a
        copy's: a run_finish read twice by one worker is one finished run)."""
        if self._send_outcome is not None:
            job.stage = "outcome"
            try:
                key = record["run_id"].encode("utf-8")
                await self._send_outcome(key, encode_outcome(record), delivered=delivered)
            except Exception as exc:
                await self._fail(job, exc)
        if count:
            try:
                self.metrics.outcome(record)
            except Exception as exc:  # the record is out: only count it
                self._internal(job, "metrics", exc)

    async def _fail(self, job: _Job, exc: BaseException) -> None:
        """Dead-letter the event as internal_error naming the stage. Never raises."""
        self._internal(job, job.stage, exc)
        rej = Rejected("internal_error", f"{job.stage}: {describe(exc)}", job.run_id, job.step)
        await self._deadletter(job, rej)

    async def _deadletter(self, job: _Job, rej: Rejected) -> None:
        """Dead-letter the event for a failure outside the core (the error boundary)."""
        try:
            rec = deadletter_record(job.event.value, rej, self.limits, job.now, _source(job.event.message))
        except Exception as exc:  # nothing left to tell: count and log it
            self._internal(job, "deadletter", exc)
            return
        await self._send_record(job, rej, rec)

    async def _send_record(self, job: _Job, rej: Rejected, rec: dict[str, Any]) -> None:
        try:
            key = rej.run_id.encode("utf-8", "surrogatepass") if rej.run_id else None
            await self._send_deadletter(key, deadletter_bytes(rec), tenant=job.tenant)
        except Exception as exc:  # nothing left to tell: count and log it
            self._internal(job, "deadletter", exc)
            return
        self.metrics.deadletter(rej.reason)
        if rej.run_id:
            self.deadlettered.add(rej.run_id, rej.reason, rej.detail, rej.step, job.now, job.tenant)
        self._log_deadletter(job, rej)

    def _log_deadletter(self, job: _Job, rej: Rejected) -> None:
        """One WARNING line per dead-letter, naming the run, the reason and the detail, within
        DEADLETTER_LOG_LINES per window; past it, one line counting the rest."""
        now = time.monotonic()
        start, lines, unlogged = self._dl_window
        if now - start >= DEADLETTER_LOG_WINDOW_S:
            if unlogged:
                log.warning(
                    "%d more dead-letters in the last %.0f s not logged (rb_deadletters_total; "
                    "`rb-streams deadletters` reads them)",
                    unlogged,
                    now - start,
                )
            start, lines, unlogged = now, 0, 0
        if lines >= DEADLETTER_LOG_LINES:
            self._dl_window = (start, lines, unlogged + 1)
            return
        self._dl_window = (start, lines + 1, unlogged)
        msg = job.event.message
        log.warning(
            "dead-lettered run %s%s (%s[%s] offset %s): %s: %s",
            "?" if rej.run_id is None else safe_for_log(rej.run_id),
            "" if rej.step is None else f" step {rej.step}",
            msg.topic,
            msg.partition,
            msg.offset,
            rej.reason,
            safe_for_log(rej.detail),
        )

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


async def prev_done(prev: asyncio.Future[None]) -> None:
    """Wait for a run's earlier event to finish, whatever its outcome (it has its own boundary)."""
    await asyncio.wait([prev])


def _source(msg: Message) -> dict[str, Any]:
    """Where an event was read: the dead-letter record's `source`."""
    return {"topic": msg.topic, "partition": msg.partition, "offset": msg.offset}
