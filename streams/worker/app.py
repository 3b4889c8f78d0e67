"""The Faust worker: a thin adapter that feeds Kafka events through `core.engine.handle`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

import faust
from faust.types import EventT

from ..core.engine import Result, complete, handle
from ..core.events import Rejected, deadletter_record
from ..core.monitors import Semantics, load_profiles
from ..core.retention import EvictRequest, evict_request, expiry, parse_evict, retention_clock, version
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
            ready = worker.ready()
            return view.json({"ready": ready}, status=200 if ready else 503)

    def ready(self) -> bool:
        """Tables recovered and no rebalance in progress."""
        recovery = self.app.tables.recovery  # type: ignore[attr-defined]
        return bool(recovery.completed.is_set() and not self.app.in_recovery and not self.app.rebalancing)

    # -- gauges -------------------------------------------------------------
    async def _recount(self) -> None:
        by_state: Counter[str] = Counter()
        finished = 0
        seen: dict[bytes, tuple[float | None, bool, tuple[int, bool, int]]] = {}
        for key, raw in self.runs.items():
            st = TraceState.decode(raw)
            seen[key] = (retention_clock(st), st.finished, version(st))
            if st.finished:
                finished += 1
            else:
                by_state[st.state] += 1
        self._by_state, self._finished, self._seen = by_state, finished, seen
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
        gauge = self.metrics.consumer_lag
        gauge.clear()
        consumer = self.app.consumer
        owned = [tp for tp in consumer.assignment() if tp.topic == self.settings.steps_topic]
        self.metrics.assigned_partitions.set(len(owned))
        for tp in owned:
            try:
                high = consumer.highwater(tp)
            except Exception:  # not fetched yet
                continue
            done = self._processed.get(tp)
            if high is None or done is None:
                continue
            gauge.labels(str(tp.partition)).set(max(0, high - done - 1))

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
        """Inline unless the event's run waits on E-traces or this event needs them."""
        key = event.key
        if stream is not None:
            self._ack_order.received(event.message.tp, event.message.offset)
        prev = self._chains.get(key)
        req = parse_evict(event.value)
        if req is not None:
            if prev is not None:
                await prev  # after the run's pending event, like any of its events
            self._evict(key, req)
            await self._ack(event, stream)
            return
        if prev is not None:  # queue behind the run's pending event
            await self._spawn(key, self._detached(event, stream, prev=prev))
            return
        t0 = time.perf_counter()
        now = time.time()
        result, old = self._evaluate_one(event, now)
        if result.plan:
            await self._spawn(key, self._detached(event, stream, evaluated=(result, old, t0, now)))
            return
        await self._conclude(result, old, event, stream, t0, now)

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
        self,
        event: EventT[Any],
        stream: Any,
        prev: asyncio.Task[None] | None = None,
        evaluated: tuple[Result, TraceState | None, float, float] | None = None,
    ) -> None:
        """An event finished off the agent loop: after its run's previous event, if any."""
        try:
            if prev is not None:
                await asyncio.wait([prev])
            if evaluated is None:
                t0, now = time.perf_counter(), time.time()
                result, old = self._evaluate_one(event, now)
            else:
                result, old, t0, now = evaluated
            await self._conclude(result, old, event, stream, t0, now)
        except Exception:  # nothing awaits this task: log, and do not hold the offset back
            log.exception("internal error finishing offset %s", event.message.offset)
            await self._ack(event, stream)

    async def _conclude(
        self, result: Result, old: TraceState | None, event: EventT[Any], stream: Any, t0: float, now: float
    ) -> None:
        """Answer the E-trace plan (if any), send, store, ack."""
        if result.plan:
            result = complete(result, await self.retriever.answer(result.plan))
        await self._finish(result, old, event, t0, now)
        await self._ack(event, stream)

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
                value=evict_request(run_id, ver),
                partition=wire.partition_for(run_id, self.steering_partitions),
            )

    def _evict(self, key: bytes | None, req: EvictRequest) -> None:
        """Remove the run if it is still as expired as when the request was made."""
        if key is None or key != req.run_id.encode("utf-8"):
            return
        self._evicting.pop(key, None)
        st = self._lookup(req.run_id)
        if st is None:
            return
        s = self.settings
        reason = expiry(
            st.finished, retention_clock(st), time.time(), s.finished_retention_s, s.idle_timeout_s
        )
        if reason is None or version(st) != req.version:
            return  # the run moved on since the request: keep it
        del self.runs[key]  # a changelog tombstone: recovery will not bring it back
        self._seen.pop(key, None)
        self._account(st, None)
        self.metrics.evictions.labels(reason).inc()
        log.info("evicted run %s (%s)", req.run_id, reason)

    async def _on_revoked(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        self._ack_order.forget(set(args[0] if args else kwargs.get("revoked", ())))

    async def _ack(self, event: EventT[Any], stream: Any) -> None:
        if stream is None:
            return
        msg = event.message
        for ready in self._ack_order.done(msg.tp, msg.offset, event):
            await stream.ack(ready)

    def _evaluate_one(self, event: EventT[Any], now: float) -> tuple[Result, TraceState | None]:
        raw = event.value
        msg = event.message
        self._processed[msg.tp] = msg.offset
        seen: list[TraceState | None] = []

        def lookup(run_id: str) -> TraceState | None:
            st = self._lookup(run_id)
            seen.append(st)
            return st

        try:
            result = handle(raw, lookup, self.settings.limits, now, self.sem)
            key = event.key
            # A run's state lives with the partition its key maps to: events keyed otherwise
            # would split it, so they are refused rather than silently mis-processed.
            if (
                result.rejection is None
                and result.run_id is not None
                and key != result.run_id.encode("utf-8")
            ):
                shown = "no key" if key is None else f"key {key[:100]!r}"
                result = Result(
                    result.run_id,
                    rejection=Rejected(
                        "key_mismatch",
                        f"message has {shown}, expected the run_id; events must be keyed by run_id",
                        result.run_id,
                    ),
                )
        except Exception as exc:  # a bug must not stop the partition: dead-letter and go on
            log.exception("internal error while processing offset %s", msg.offset)
            result = Result(
                None, rejection=Rejected("internal_error", f"{type(exc).__name__}: {str(exc)[:200]}")
            )
        return result, (seen[0] if seen else None)

    async def _finish(
        self, result: Result, old: TraceState | None, event: EventT[Any], t0: float, now: float
    ) -> None:
        raw = event.value
        msg = event.message
        if result.rejection is not None:
            rec = deadletter_record(
                raw,
                result.rejection,
                self.settings.limits,
                now,
                {"topic": msg.topic, "partition": msg.partition, "offset": msg.offset},
            )
            await self.deadletter.send(
                key=result.rejection.run_id.encode("utf-8") if result.rejection.run_id else None,
                value=wire.dumps(rec),
            )
            self.metrics.deadletter(result.rejection.reason)
            log.info("dead-lettered offset %s: %s", msg.offset, result.rejection.reason)
            return
        assert result.run_id is not None
        rid = result.run_id.encode("utf-8")
        if result.decision is not None:
            await self.steering.send(
                key=rid,
                value=wire.dumps(result.decision),
                partition=wire.partition_for(result.run_id, self.steering_partitions),
            )
        if result.state is not None:
            self.runs[rid] = result.state.encode()
            self._account(old, result.state)
        self.metrics.observe(result, time.perf_counter() - t0, now)
