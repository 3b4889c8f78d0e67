"""The Faust worker: a thin adapter that feeds Kafka events through `core.engine.handle`."""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

import faust
from faust.types import EventT

from . import wire
from .core.engine import Result, handle
from .core.events import Rejected, deadletter_record
from .core.monitors import Semantics, load_profiles
from .core.state import TraceState
from .metrics import STATES, Metrics
from .settings import Settings

log = logging.getLogger(__name__)


class Worker:
    """Owns the Faust app, its topics and table, and the per-event glue."""

    def __init__(self, settings: Settings, steering_partitions: int | None = None) -> None:
        self.settings = s = settings
        self.steering_partitions = steering_partitions or s.partitions
        self.metrics = Metrics()
        if s.monitor_profiles:
            log.info("monitor profiles loaded: %s", load_profiles(s.monitor_profiles))
        from .embedder import default_semantics

        self.sem: Semantics = default_semantics()
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
            producer_acks=-1,
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
        self.runs.on_recover(self._recount)
        self.app.timer(1.0, name="rb-gauges")(self._update_gauges)
        self._views()

    # -- HTTP ---------------------------------------------------------------
    def _views(self) -> None:
        app, runs, metrics, worker = self.app, self.runs, self.metrics, self

        def not_found(view: Any, run_id: str) -> Any:
            return view.json({"error": "unknown run", "run_id": run_id}, status=404)

        @app.page("/runs/{run_id}")
        @app.table_route(table=runs, match_info="run_id")
        async def run_view(view: Any, request: Any, run_id: str) -> Any:
            st = worker._lookup(run_id)
            return not_found(view, run_id) if st is None else view.json(st.summary())

        @app.page("/runs/{run_id}/steps")
        @app.table_route(table=runs, match_info="run_id")
        async def steps_view(view: Any, request: Any, run_id: str) -> Any:
            st = worker._lookup(run_id)
            if st is None:
                return not_found(view, run_id)
            return view.json({"run_id": run_id, "step": st.last_step, "steps": st.step_log_entries()})

        @app.page("/metrics")
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
        for raw in self.runs.values():
            st = TraceState.decode(raw)
            if st.finished:
                finished += 1
            else:
                by_state[st.state] += 1
        self._by_state, self._finished = by_state, finished
        self._publish_counts()

    def _account(self, old: TraceState | None, new: TraceState) -> None:
        if old is not None:
            if old.finished:
                self._finished -= 1
            else:
                self._by_state[old.state] -= 1
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
        for tp in consumer.assignment():
            if tp.topic != self.settings.steps_topic:
                continue
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
        async for event in stream.events():
            await self.process(event)

    def _lookup(self, run_id: str) -> TraceState | None:
        raw = self.runs.get(run_id.encode("utf-8"))
        return None if raw is None else TraceState.decode(raw)

    async def process(self, event: EventT[Any]) -> None:
        t0 = time.perf_counter()
        now = time.time()
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
            self._account(seen[0] if seen else None, result.state)
        self.metrics.observe(result, time.perf_counter() - t0, now)
