"""The Faust worker: a thin adapter that feeds Kafka events through `core.engine.handle`."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import faust
from faust.types import EventT

from ..core.engine import Result, complete, describe, handle, seal
from ..core.events import Rejected, deadletter_bytes, deadletter_record
from ..core.monitors import Semantics, load_profiles
from ..core.retention import (
    BAD_SIGNATURE,
    NOT_KEYED,
    EvictRequest,
    RunsHeld,
    evict_request,
    expiry,
    parse_evict,
    retention_clock,
    verified,
    version,
)
from ..core.state import TraceState
from ..etraces.retrieval import Retriever, open_store
from ..kafka import wire
from ..kafka.security import faust_credentials
from ..settings import Settings
from .ack_order import AckOrder
from .metrics import STATES, Metrics
from .web_auth import bearer_guard

log = logging.getLogger(__name__)
MAX_IN_FLIGHT = 512  # events waiting on E-traces (or queued behind them) before the agent waits
TRACEBACK_EVERY_S = 60.0  # an internal error's traceback is logged at most this often per stage
SHUTDOWN_GRACE_S = 5.0  # a graceful stop gets the session timeout plus this, then the process exits


@dataclass
class _Job:
    """One event on its way through the worker: the stage it is at, for the error boundary."""

    event: EventT[Any]
    stream: Any
    t0: float
    now: float
    stage: str = "dispatch"
    run_id: str | None = None
    step: int | None = None
    released: bool = False


class Worker:
    """Owns the Faust app, its topics and table, and the per-event glue."""

    def __init__(self, settings: Settings, steering_partitions: int | None = None) -> None:
        self.settings = s = settings
        self.steering_partitions = steering_partitions or s.partitions
        self.metrics = Metrics()
        if s.processing_guarantee == "exactly_once":
            log.warning(
                "RB_PROCESSING_GUARANTEE=exactly_once: Faust's transactions lost decisions in our "
                "kill -9 test; at_least_once is the tested guarantee (README: Reliability)"
            )
        if s.monitor_profiles:
            log.info("monitor profiles loaded: %s", load_profiles(s.monitor_profiles))
        from ..embeddings.embedder import default_semantics

        self.sem: Semantics = default_semantics()
        self.retriever = self._open_retriever()
        # run key -> the task finishing that run's latest event that waits on E-traces; later
        # events of the same run queue behind it, other runs go on (per-run order kept).
        self._chains: dict[bytes | None, asyncio.Task[None]] = {}
        self._ack_order: AckOrder[EventT[Any]] = AckOrder()
        self._in_flight: asyncio.Semaphore | None = None
        self.app = faust.App(
            s.app_id,
            broker=s.faust_broker,
            store=s.store,
            datadir=str(s.data_path),
            web_host=s.web_host,
            web_port=s.web_port,
            web_bind=s.web_host,
            canonical_url=s.advertised_url,
            processing_guarantee=s.processing_guarantee,
            broker_session_timeout=s.session_timeout_s,
            broker_heartbeat_interval=s.heartbeat_interval_s,
            broker_request_timeout=max(30.0, s.session_timeout_s + 5),
            topic_partitions=s.partitions,
            topic_replication_factor=s.replication_factor,
            key_serializer="raw",
            value_serializer="raw",
            table_cleanup_interval=60.0,
            web_enabled=True,
            # Faust's own /table and /router pages would show raw table values (step text):
            # the run views below are the only way in.
            web_tables_enabled=False,
            web_router_enabled=False,
            producer_acks=-1,
            broker_credentials=faust_credentials(s),
        )
        self.steps = self.app.topic(
            s.steps_topic, partitions=s.partitions, key_serializer="raw", value_serializer="raw"
        )
        self.steering = self.app.topic(
            s.steering_topic, partitions=s.partitions, key_serializer="raw", value_serializer="raw"
        )
        self.deadletter = self.app.topic(
            s.deadletter_topic, partitions=s.partitions, key_serializer="raw", value_serializer="raw"
        )
        self.runs = self.app.Table(
            "runs",
            partitions=s.partitions,
            key_type=bytes,
            value_type=bytes,
            help="TraceState per run_id (orjson)",
        )
        self.app.agent(self.steps, name="evaluate")(self._evaluate)
        # Unfinished runs by FSM state and finished runs held, kept incrementally and
        # recounted from the table after every recovery (rebalance).
        self._by_state: Counter[str] = Counter()
        self._finished = 0
        self._processed: dict[Any, int] = {}
        # Retention index of the runs this worker holds: key -> (updated_ts, finished), kept
        # incrementally and rebuilt on recovery, so the eviction sweep never reads the table.
        self._seen: dict[bytes, tuple[float | None, bool, tuple[int, bool, int]]] = {}
        self._evicting: dict[bytes, float] = {}  # requests sent, not yet applied
        self._held = RunsHeld(
            s.max_runs_per_org, lambda rid: wire.partition_for(rid, s.partitions), s.partitions
        )
        self._traced: dict[str, float] = {}  # stage -> when its last traceback was logged
        self._install_shutdown_deadline()
        self.runs.on_recover(self._recount)
        self.app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]  # stubs: a plain fn
        self.app.timer(1.0, name="rb-gauges")(self._update_gauges)
        self.app.timer(s.evict_interval_s, name="rb-evict")(self._sweep)
        self._views()

    def _open_retriever(self) -> Retriever:
        s = self.settings
        store = None
        try:
            store = open_store(s)
            if s.patterns_seed:
                from ..etraces.patterns import read_file

                good, bad = read_file(s.patterns_seed)
                for err in bad:
                    log.error("patterns seed %s: %s", s.patterns_seed, err)
                store.upsert(good)
                log.info("patterns seed: %d patterns from %s", len(good), s.patterns_seed)
        except Exception:
            log.exception("the pattern store could not be opened; E-traces are off")
        r = Retriever(
            store,
            timeout_s=s.etrace_timeout_ms / 1000.0,
            concurrency=s.etrace_concurrency,
            retry_after_s=s.etrace_retry_s,
            observe=self._observe_query,
        )
        self.metrics.store_up.set(1 if store is not None else 0)
        return r

    def _observe_query(self, tier: str, seconds: float, outcome: str) -> None:
        self.metrics.etrace_query(tier, seconds, outcome)
        self.metrics.store_up.set(1 if self.retriever.up else 0)

    # -- HTTP ---------------------------------------------------------------
    def _views(self) -> None:
        app, runs, metrics, worker = self.app, self.runs, self.metrics, self

        def not_found(view: Any, run_id: str) -> Any:
            return view.json({"error": "unknown run", "run_id": run_id}, status=404)

        guarded = bearer_guard(self.settings.web_token)

        @app.page("/runs/{run_id}")
        @guarded
        @app.table_route(table=runs, match_info="run_id")
        async def run_view(view: Any, request: Any, run_id: str) -> Any:
            st = worker._lookup(run_id)
            return not_found(view, run_id) if st is None else view.json(st.summary())

        @app.page("/runs/{run_id}/steps")
        @guarded
        @app.table_route(table=runs, match_info="run_id")
        async def steps_view(view: Any, request: Any, run_id: str) -> Any:
            st = worker._lookup(run_id)
            if st is None:
                return not_found(view, run_id)
            return view.json({"run_id": run_id, "step": st.last_step, "steps": st.step_log_entries()})

        @app.page("/metrics")
        @guarded
        async def metrics_view(view: Any, request: Any) -> Any:
            body, ctype = metrics.render()
            return view.bytes(body, content_type=ctype)

        @app.page("/health")
        async def health_view(view: Any, request: Any) -> Any:
            return view.json({"status": "ok"})

        @app.page("/ready")
        async def ready_view(view: Any, request: Any) -> Any:
            stalled = worker.stalled()
            ready = worker.ready() and not stalled
            body: dict[str, Any] = {"ready": ready}
            if stalled:
                body["stalled_partitions"] = stalled
            return view.json(body, status=200 if ready else 503)

    def ready(self) -> bool:
        """Tables recovered and no rebalance in progress."""
        recovery = self.app.tables.recovery  # type: ignore[attr-defined]
        return bool(recovery.completed.is_set() and not self.app.in_recovery and not self.app.rebalancing)

    def stalled(self) -> dict[str, float]:
        """Partitions whose oldest unacked event has waited past RB_STALL_THRESHOLD_S:
        partition -> seconds. Nothing on them commits until that event is finished."""
        limit = self.settings.stall_threshold_s
        return {
            str(getattr(tp, "partition", tp)): round(age, 1)
            for tp, age in self._ack_order.oldest_age().items()
            if age >= limit
        }

    def _install_shutdown_deadline(self) -> None:
        """A graceful stop waits for every event read to be acked. The boundary makes that
        finite, and this makes it certain: once the app starts stopping, the process exits
        after the session timeout plus SHUTDOWN_GRACE_S whatever is still running. Anything
        not committed by then is processed again by the partition's next owner (the same as
        after a crash, which loses nothing)."""
        stop = self.app.on_stop
        limit = self.settings.session_timeout_s + SHUTDOWN_GRACE_S

        def overdue() -> None:
            log.error(
                "graceful shutdown not done after %.0fs: exiting now (uncommitted events "
                "will be processed again by the next owner of their partitions)",
                limit,
            )
            logging.shutdown()
            os._exit(1)

        async def on_stop() -> None:
            timer = threading.Timer(limit, overdue)
            timer.daemon = True
            timer.start()
            await stop()

        setattr(self.app, "on_stop", on_stop)  # noqa: B010 (a bound method of the instance)

    # -- gauges -------------------------------------------------------------
    async def _recount(self) -> None:
        by_state: Counter[str] = Counter()
        finished = 0
        seen: dict[bytes, tuple[float | None, bool, tuple[int, bool, int]]] = {}
        orgs: dict[str, str] = {}
        for key, raw in self.runs.items():
            st = TraceState.decode(raw)
            seen[key] = (retention_clock(st), st.finished, version(st))
            orgs[st.run_id] = st.config.org_id
            if st.finished:
                finished += 1
            else:
                by_state[st.state] += 1
        self._by_state, self._finished, self._seen = by_state, finished, seen
        self._held.reset(orgs)
        self._publish_counts()

    def _account(self, old: TraceState | None, new: TraceState | None) -> None:
        if old is not None:
            if old.finished:
                self._finished -= 1
            else:
                self._by_state[old.state] -= 1
        if new is None:
            return
        self._seen[new.run_id.encode("utf-8")] = (retention_clock(new), new.finished, version(new))
        if new.finished:
            self._finished += 1
        else:
            self._by_state[new.state] += 1

    def _publish_counts(self) -> None:
        m = self.metrics
        for state in STATES:
            m.runs_by_state.labels(state).set(self._by_state.get(state, 0))
        active = sum(self._by_state.values())
        m.active_runs.set(active)
        m.table_entries.set(active + self._finished)

    async def _update_gauges(self) -> None:
        self._publish_counts()
        gauge, stall = self.metrics.consumer_lag, self.metrics.partition_stall
        gauge.clear()
        stall.clear()
        consumer = self.app.consumer
        owned = [tp for tp in consumer.assignment() if tp.topic == self.settings.steps_topic]
        self.metrics.assigned_partitions.set(len(owned))
        ages = self._ack_order.oldest_age()
        for tp in owned:
            stall.labels(str(tp.partition)).set(round(ages.get(tp, 0.0), 3))
            try:
                high = consumer.highwater(tp)
            except Exception:  # not fetched yet
                continue
            # Not yet acknowledged (so a stuck event shows as lag), else not yet evaluated.
            nxt = self._ack_order.next_unreleased(tp)
            if nxt is None:
                done = self._processed.get(tp)
                nxt = None if done is None else done + 1
            if high is None or nxt is None:
                continue
            gauge.labels(str(tp.partition)).set(max(0, high - nxt))

    # -- the agent ----------------------------------------------------------
    async def _evaluate(self, stream: Any) -> None:
        # Acks are manual: an event is acked (its offset may commit) only once its decision is
        # sent and its state written, which for E-trace events happens after the query.
        manual = stream.noack()
        async for event in manual.events():
            await self.process(event, manual)

    def _lookup(self, run_id: str) -> TraceState | None:
        raw = self.runs.get(run_id.encode("utf-8"))
        return None if raw is None else TraceState.decode(raw)

    async def process(self, event: EventT[Any], stream: Any = None) -> None:
        """Take one event: inline, unless its run waits on E-traces or it needs them.

        The error boundary: this never raises (cancellation aside). Whatever fails on the way
        (evaluate, E-traces, complete, encode, send, store, ...) dead-letters the event as
        internal_error naming the stage and the exception, and the event is acked all the
        same. Acks are released in offset order (AckOrder), so one event left unacked would
        hold back every later ack of its partition, stop its commits and block shutdown.
        """
        job = _Job(event, stream, t0=time.perf_counter(), now=time.time())
        if stream is not None:
            self._ack_order.received(event.message.tp, event.message.offset)
        try:
            if await self._take(job):
                return  # a task finishes and acks it
        except Exception as exc:
            await self._fail(job, exc)
        await self._release(job)

    async def _take(self, job: _Job) -> bool:
        """Process the event, or hand it to a task (True: the task will ack it)."""
        key = job.event.key
        prev = self._chains.get(key)
        req = parse_evict(job.event.value)
        if req is not None:
            if prev is not None:
                await asyncio.wait([prev])  # after the run's pending event, like any of its events
            job.stage, job.run_id = "evict", req.run_id
            refused = self._evict(key, req)
            if refused is not None:
                await self._deadletter(job, Rejected("invalid_control", refused, req.run_id))
            return False
        if prev is not None:  # queue behind the run's pending event
            await self._spawn(key, self._detached(job, prev=prev))
            return True
        result = self._evaluate_one(job)
        if result.plan:
            await self._spawn(key, self._detached(job, result=result))
            return True
        await self._conclude(job, result)
        return False

    async def _spawn(self, key: bytes | None, coro: Any) -> None:
        if self._in_flight is None:
            self._in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)
        await self._in_flight.acquire()  # backpressure on the partition when too much waits
        # The task copies this context, so Faust's current event (the table's changelog
        # partition) is this event's.
        task = asyncio.ensure_future(coro)
        self._chains[key] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._chains.get(key) is t:
                del self._chains[key]
            assert self._in_flight is not None
            self._in_flight.release()

        task.add_done_callback(done)

    async def _detached(
        self, job: _Job, prev: asyncio.Task[None] | None = None, result: Result | None = None
    ) -> None:
        """An event finished off the agent loop: after its run's previous event, if any."""
        try:
            if prev is not None:
                await asyncio.wait([prev])
            if result is None:
                job.t0, job.now = time.perf_counter(), time.time()
                result = self._evaluate_one(job)
            await self._conclude(job, result)
        except Exception as exc:  # the same boundary as `process`: nothing awaits this task
            await self._fail(job, exc)
        await self._release(job)

    def _evaluate_one(self, job: _Job) -> Result:
        job.stage = "evaluate"
        event = job.event
        self._processed[event.message.tp] = event.message.offset
        result = handle(
            event.value,
            self._lookup,
            self.settings.limits,
            job.now,
            self.sem,
            key=event.key,
            runs_cap=self._held.refusal,
        )
        job.run_id, job.step = result.run_id, result.step
        if result.opens_run and result.run_id is not None and result.state is not None:
            # Counted now, in the partition's event order (a new run's run_start is never
            # queued behind another event), as replay counts it.
            self._held.add(result.run_id, result.state.config.org_id)
        return result

    async def _conclude(self, job: _Job, result: Result) -> None:
        """Answer the E-trace plan (if any), encode, send, store."""
        opened = result.opens_run
        if result.plan:
            job.stage = "etraces"
            try:
                answers = await self.retriever.answer(result.plan)
            except Exception as exc:  # the retriever answers errors itself; a bug must not stop us
                self._internal(job, "etraces", exc)
                answers = []  # the decision goes out without E-traces, saying why
            job.stage = "complete"
            result = complete(result, answers)
        job.stage = "encode"
        result = seal(result)
        if opened and not result.opens_run and result.run_id is not None:
            self._held.remove(result.run_id)  # the run_start failed after all: no run
        await self._finish(job, result)

    async def _finish(self, job: _Job, result: Result) -> None:
        """Send the decision or dead-letter, then store the state (after the send: a crash in
        between re-sends the same decision rather than losing it), then count."""
        if result.failed_stage is not None:  # the core caught a failure of its own
            self._internal(job, result.failed_stage, result.error)
        if result.rejection is None and result.wire_decision is not None and result.run_id is not None:
            job.stage = "send"
            try:
                await self.steering.send(
                    key=result.run_id.encode("utf-8"),
                    value=result.wire_decision,
                    partition=wire.partition_for(result.run_id, self.steering_partitions),
                )
            except Exception as exc:
                # The decision is lost and says so; the state still moves on exactly as in
                # replay, so the run's later decisions are the same.
                await self._fail(job, exc)
        if result.rejection is not None:
            await self._deadletter(job, result.rejection)
        if result.wire_state is not None and result.run_id is not None:
            job.stage = "store"
            self.runs[result.run_id.encode("utf-8")] = result.wire_state
            self._account(result.prior, result.state)
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
                self.settings.limits,
                job.now,
                {"topic": msg.topic, "partition": msg.partition, "offset": msg.offset},
            )
            await self.deadletter.send(
                key=rej.run_id.encode("utf-8", "surrogatepass") if rej.run_id else None,
                value=deadletter_bytes(rec),
            )
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
                "internal error at stage %s, offset %s of %s[%s]: %s (dead-lettered internal_error, acked)",
                stage,
                msg.offset,
                msg.topic,
                msg.partition,
                "unknown" if exc is None else describe(exc),
                exc_info=exc if trace else None,
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
            ready = self._ack_order.done(msg.tp, msg.offset, job.event)
        except Exception as exc:
            self._internal(job, "ack", exc)
            ready = [job.event]
        for ev in ready:
            try:
                await job.stream.ack(ev)
            except Exception as exc:
                self._internal(job, "ack", exc)

    # -- retention ----------------------------------------------------------
    async def _sweep(self) -> None:
        """Ask for the eviction of every expired run this worker holds (see core.retention)."""
        s, now = self.settings, time.time()
        for key, (seen_ts, finished, ver) in list(self._seen.items()):
            if expiry(finished, seen_ts, now, s.finished_retention_s, s.idle_timeout_s) is None:
                continue
            if now - self._evicting.get(key, 0.0) < 10 * s.evict_interval_s:
                continue  # asked already; not applied yet
            self._evicting[key] = now
            run_id = key.decode("utf-8")
            await self.steps.send(
                key=key,
                value=evict_request(run_id, ver, s.control_key),
                partition=wire.partition_for(run_id, self.steering_partitions),
            )

    def _evict(self, key: bytes | None, req: EvictRequest) -> str | None:
        """Remove the run if it is still as expired as when the request was made. Returns why
        the record is refused (dead-lettered invalid_control), None when applied or stale."""
        if key is None or key != req.run_id.encode("utf-8"):
            return NOT_KEYED
        s = self.settings
        if not verified(req, s.control_key):
            return BAD_SIGNATURE
        self._evicting.pop(key, None)
        st = self._lookup(req.run_id)
        if st is None or version(st) != req.version:
            return None  # evicted already, or the run moved on since the request: keep it
        reason = expiry(
            st.finished, retention_clock(st), time.time(), s.finished_retention_s, s.idle_timeout_s
        )
        if reason is None:
            return (
                f"run {req.run_id[:100]!r} is not expired: eviction refused (a record no worker "
                "wrote, or the retention settings changed since)"
            )
        del self.runs[key]  # a changelog tombstone: recovery will not bring it back
        self._seen.pop(key, None)
        self._held.remove(req.run_id)
        self._account(st, None)
        self.metrics.evictions.labels(reason).inc()
        log.info("evicted run %s (%s)", req.run_id, reason)
        return None

    async def _on_revoked(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        self._ack_order.forget(set(args[0] if args else kwargs.get("revoked", ())))
