"""The Faust worker: wires a `Processor` to its `Topics`, a changelogged table and timers.

Everything it needs is passed in (built once by `streams.worker.assemble`); the per-event
logic, per-run ordering, acks, retention and gauges live in their own broker-free units.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer

from ..core.guard import Guard, GuardSettings
from ..core.monitors import Semantics
from ..core.policy import Policy
from ..etraces.retrieval import Retriever
from ..kafka.security import client_kwargs, faust_credentials
from ..settings import Settings
from . import views
from .broker_watch import PROBE_METADATA_MAX_AGE_MS, BrokerWatch, QuietKafkaLogs, StartupCoordinatorLog
from .fairness import FairShare, share_fetched_records, shorten_fetch_wait
from .gauges import PartitionProbe, ProgressWatch
from .guard_feed import GuardFeed
from .metrics import Metrics
from .output_topics import Topics
from .processor import Processor
from .producer_guard import guard_buffer
from .retention_sweep import Retention
from .rewind import rewind_uncommitted
from .run_table import RunTable, store_reader
from .state_codec import state_codec
from .web_auth import WebAuth

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_S = 5.0  # a graceful stop gets the session timeout plus this, then the process exits
# Bytes per producer batch (one per partition). aiokafka keeps one produce request in flight
# per broker and, once a partition's open batch is full, makes the next send wait until that
# batch goes out. At Faust's 16 KB default two ~8 KB run states filled a changelog batch, so
# the agent stalled on a broker round trip every other event of a partition. Well under the
# broker's default 1 MB per batch (message.max.bytes); no linger, so no added latency.
PRODUCER_MAX_BATCH_BYTES = 256 * 1024
STREAM_BUFFER = 4096  # events read ahead of the agent (Faust's stream_buffer_maxsize default)
TENANT_STREAM_BUFFER = 64  # the same, per tenant in multi-tenant mode
# Multi-tenant mode: records one fetch hands over (Faust's default: all that were fetched,
# ~500 small steps per partition). Faust delivers them one by one and waits while the next
# one's buffer is full, so a flood's batch held every other tenant's records behind it (small
# steps: the other tenant's p95 196x its unloaded p95). Faust stops fetching a partition once
# its buffer is 80% full (51 of 64), so a batch of at most the other 20% (12) never waits.
TENANT_MAX_POLL_RECORDS = 12
# Multi-tenant mode: how often another thread may take the interpreter lock (Python's default
# is 5 ms). 1 ms took the other tenant's p95 under a flood from ~4x to ~2.3x its unloaded p95.
TENANTS_SWITCH_INTERVAL_S = 0.001
STALL_EXIT_CODE = 3  # events waited RB_STALL_EXIT_S with none evaluated: restart me


class Worker:
    """Owns the Faust app, its topics and table, and hands every event to the processor."""

    def __init__(
        self,
        settings: Settings,
        *,
        policy: Policy,
        semantics: Semantics,
        retriever: Retriever,
        metrics: Metrics,
        steering_partitions: int | None = None,
        prefetch_embeddings: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self.settings = s = settings
        s.check_web_exposure()  # no anonymous /runs and /metrics beyond loopback unless asked for
        if s.web_exposed:
            log.warning(
                "RB_WEB_ALLOW_ANONYMOUS=true: /runs and /metrics answer anyone who reaches %s:%s",
                s.web_host,
                s.web_port,
            )
        if not s.check_decision_key():  # multi-tenant mode without a key: refused there
            log.warning(
                "RB_DECISION_KEY is not set: decisions go out unsigned, so any process that can "
                "write %s can steer every agent (set it on workers and agents: docs/production.md)",
                s.steering_topic,
            )
        if s.tenant_names:
            without = [t for t in s.tenant_names if t not in s.tenant_tokens]
            if s.web_token.get_secret_value() and without:
                log.info(
                    "tenants without a web token of their own (RB_TENANT_TOKEN_<TENANT>): %s; "
                    "only the operator's RB_WEB_TOKEN reads their runs",
                    ", ".join(without),
                )
        self.metrics = metrics
        self.retriever = retriever
        if s.processing_guarantee == "exactly_once":
            log.warning(
                "RB_PROCESSING_GUARANTEE=exactly_once: Faust's transactions lost decisions in our "
                "kill -9 test; at_least_once is the tested guarantee (RELIABILITY.md)"
            )
        self.policy = policy  # what runs may name: built by the composition root (streams.plugins)
        log.info(
            "runs may name scorers %s, transitions %s, profiles %s (rb-streams plugins: their origin)",
            ", ".join(sorted(policy.scorers)),
            ", ".join(sorted(policy.transitions)),
            ", ".join(sorted(policy.profiles)),
        )
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
            # the run views are the only way in.
            web_tables_enabled=False,
            web_router_enabled=False,
            producer_acks=-1,
            # One producer writes the changelog, decisions and dead letters: all compressed
            # (zstd: the changelog's run states ~3.5x smaller a record; docs/production.md).
            producer_compression_type=None if s.producer_compression == "none" else s.producer_compression,
            producer_max_batch_size=PRODUCER_MAX_BATCH_BYTES,
            broker_credentials=faust_credentials(s),
            # Multi-tenant mode reads each tenant's topic into a buffer of its own, kept small: a
            # tenant's backlog then waits in Kafka, not in the worker's memory, and fetching it
            # does not crowd out the other tenants' fetches (Faust pauses a partition whose
            # buffer is 80% full).
            stream_buffer_maxsize=TENANT_STREAM_BUFFER if s.tenant_names else STREAM_BUFFER,
            broker_max_poll_records=TENANT_MAX_POLL_RECORDS if s.tenant_names else None,
        )
        # A changelog record the producer refuses is counted and logged, never a crash.
        guard_buffer(self.app.producer.buffer, lambda _exc: metrics.internal_error("changelog"))
        self.topics = topics = Topics(self.app, s, steering_partitions or s.partitions)
        # A steps partition never committed is read from its start after each rebalance, not
        # from past the records Faust fetched and dropped meanwhile (streams.worker.rewind).
        if not rewind_uncommitted(
            self.app.consumer,
            lambda tp: tp.topic in topics.steps_names,
            self.app.conf.consumer_auto_offset_reset,
        ):
            log.warning("could not guard the consumer's seeks: a quick restart may skip waiting steps")
        self.table = self.app.Table(
            "runs",
            partitions=s.partitions,
            key_type=bytes,
            value_type=bytes,
            help="TraceState per run_id (orjson)",
        )
        self.runs = RunTable(
            self.table,
            s.max_runs_per_org,
            topics.steps_partition,
            s.partitions,
            read=store_reader(self.table.data),
            max_runs=s.max_runs,
            codec=state_codec(s.state_codec),
            on_stored=metrics.state_stored_bytes.observe,
            parts=s.state_layout == "parts",
        )
        self.retention = Retention(
            self.runs,
            topics.eviction_sender(self.runs.lookup),
            topics.steps_partition,
            finished_retention_s=s.finished_retention_s,
            idle_timeout_s=s.idle_timeout_s,
            evict_interval_s=s.evict_interval_s,
            control_key=s.control_key.get_secret_value(),
        )
        # Do no harm (RB_GUARD=on): every worker reads the whole outcomes topic into one guard,
        # which the pipeline asks per event (streams.worker.guard_feed, core.guard).
        self.guard_feed: GuardFeed | None = None
        if s.guard == "on":
            self.guard_feed = GuardFeed(
                Guard(GuardSettings(enabled=True, alpha=s.guard_alpha, min_runs=s.guard_min_runs)),
                lambda sw: metrics.guard_switched(sw.org, sw.experiment, sw.monitor),
            )
            self.app.task(self._guard)
        self.processor = Processor(
            observe_only=None if self.guard_feed is None else self.guard_feed.observe_only,
            runs=self.runs,
            retention=self.retention,
            retriever=retriever,
            policy=policy,
            semantics=semantics,
            limits=s.limits,
            metrics=metrics,
            send_decision=topics.send_decision,
            send_deadletter=topics.send_deadletter,
            steering_partition=topics.steering_partition,
            prefetch_embeddings=prefetch_embeddings,
            tenant_of=topics.tenant_of,
            send_outcome=topics.send_outcome,
        )
        # One agent per tenant (multi-tenant mode): each has its own stream buffer, paused on
        # its own when full, and the agents take turns event by event, so a tenant's backlog
        # waits behind itself, not in front of another tenant's steps; a tenant with a backlog
        # is paced while others are active (streams.worker.fairness; RELIABILITY.md).
        self.fair = FairShare()
        if len(topics.sources()) > 1:
            # Faust's consumer thread fetches every tenant's events and needs the interpreter
            # lock for a moment at each step of a fetch; while an agent works through a
            # backlog it got the lock only every 5 ms (Python's default switch interval).
            sys.setswitchinterval(TENANTS_SWITCH_INTERVAL_S)
            # A fetch long-polls the broker; a short wait lets the next one ask for a calm
            # tenant's partitions (streams.worker.fairness.TENANT_FETCH_MAX_WAIT_MS), and each
            # hand-over of fetched records is shared between the partitions that have some
            # (streams.worker.fairness.share_fetched_records).
            self.app.on_partitions_assigned.connect(self._on_assigned)  # type: ignore[arg-type]  # stubs: a plain fn
        for tenant, name, source in topics.sources():
            self.app.agent(source, name=name)(self._evaluate if tenant is None else self._shared(tenant))
        self._install_shutdown_deadline()
        self.table.on_recover(self._recount)
        self.app.on_partitions_revoked.connect(self._on_revoked)  # type: ignore[arg-type]  # stubs: a plain fn
        gauges = self.gauges = PartitionProbe(
            metrics,
            self.runs,
            lambda: self.app.consumer,
            topics.steps_names,
            self.processor.ack_order,
            self.processor.processed,
            watch=ProgressWatch(s.stall_threshold_s, s.stall_exit_s, _exit_stalled),
            active=self.ready,
        )
        self.app.timer(1.0, name="rb-gauges")(gauges.publish)
        # Is the broker there? /ready, rb_broker_connected, one log line per outage.
        self._steps_names = topics.steps_names
        # a fresh worker's "GroupCoordinatorNotAvailable" ERROR, normal at start: one INFO line
        self.coordinator_log = StartupCoordinatorLog()
        self.coordinator_log.install()
        self.quiet_logs = QuietKafkaLogs()
        self.quiet_logs.install()
        self.broker = BrokerWatch(self._probe_client, metrics.broker_connected, self.quiet_logs)
        self.app.timer(1.0, name="rb-broker")(self.broker.probe)
        self.app.timer(s.evict_interval_s, name="rb-evict")(self._sweep)
        views.install(
            self.app,
            self.table,
            self.runs.lookup,
            metrics,
            WebAuth(
                s.web_token.get_secret_value(),
                {t: v.get_secret_value() for t, v in s.tenant_tokens.items()},
            ),
            self.ready,
            self.stalled,
            deadlettered=self.processor.deadlettered.get,
            not_progressing=lambda: gauges.not_progressing,
            held=self.runs.held.orgs,
            tenants=bool(s.tenant_names),
            missing=self._missing,
        )

    # -- health -------------------------------------------------------------
    def ready(self) -> bool:
        """Tables recovered, no rebalance in progress, the broker answering and partitions of
        the steps topic owned: a worker without its broker or without partitions decides
        nothing, so a load balancer or an orchestrator must not count it."""
        recovery = self.app.tables.recovery  # type: ignore[attr-defined]
        return bool(
            recovery.completed.is_set()
            and not self.app.in_recovery
            and not self.app.rebalancing
            and self.broker.connected
            and self._owns_partitions()
        )

    def _missing(self) -> list[str]:
        """What /ready names when the worker is not ready for want of it."""
        return [
            name
            for name, have in (("broker", self.broker.connected), ("partitions", self._owns_partitions()))
            if not have
        ]

    def _owns_partitions(self) -> bool:
        try:
            return any(tp.topic in self._steps_names for tp in self.app.consumer.assignment())
        except Exception:  # no consumer yet
            return False

    def _probe_client(self) -> Any:
        """The broker watch's own connection (made on the loop that probes)."""
        from aiokafka import AIOKafkaClient

        s = self.settings
        return AIOKafkaClient(
            bootstrap_servers=s.bootstrap_servers,
            client_id=f"{s.app_id}-probe",
            metadata_max_age_ms=PROBE_METADATA_MAX_AGE_MS,
            **client_kwargs(s),
        )

    def stalled(self) -> dict[str, float]:
        """Partitions whose oldest unacked event has waited past RB_STALL_THRESHOLD_S:
        partition -> seconds. Nothing on them commits until that event is finished."""
        limit = self.settings.stall_threshold_s
        return {
            str(getattr(tp, "partition", tp)): round(age, 1)
            for tp, age in self.processor.ack_order.oldest_age().items()
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
            await self.broker.close()
            await stop()

        setattr(self.app, "on_stop", on_stop)  # noqa: B010 (a bound method of the instance)

    # -- timers and callbacks -----------------------------------------------
    async def _recount(self) -> None:
        self.runs.recount()
        self.runs.publish(self.metrics)

    async def _guard(self) -> None:
        assert self.guard_feed is not None
        s = self.settings
        await self.guard_feed.run(
            lambda: AIOKafkaConsumer(
                bootstrap_servers=s.bootstrap_servers,
                client_id=f"{s.app_id}-guard",
                group_id=None,  # every worker reads every partition
                enable_auto_commit=False,
                isolation_level="read_committed",
                **client_kwargs(s),
            ),
            f"{s.topic_prefix}.outcomes",
        )

    async def _sweep(self) -> None:
        await self.retention.sweep(time.time())

    async def _on_assigned(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        if not shorten_fetch_wait(self.app.consumer):
            log.warning("could not shorten the consumer's fetch wait: a tenant may wait on another's fetch")
        if not share_fetched_records(self.app.consumer):
            log.warning("could not share the consumer's hand-overs: a tenant may wait on another's records")

    async def _on_revoked(self, sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        self.processor.ack_order.forget(set(args[0] if args else kwargs.get("revoked", ())))

    # -- the agent ----------------------------------------------------------
    async def _evaluate(self, stream: Any) -> None:
        # Acks are manual: an event is acked (its offset may commit) only once its decision is
        # sent and its state written, which for E-trace events happens after the query.
        manual = stream.noack()
        async for event in manual.events():
            await self.processor.process(event, manual)

    def _shared(self, tenant: str) -> Callable[[Any], Awaitable[None]]:
        """The agent of one tenant's steps topic: as `_evaluate`, paced by `self.fair`."""

        async def evaluate(stream: Any) -> None:
            manual = stream.noack()
            queue = getattr(stream.channel, "queue", None)  # this tenant's buffer
            async for event in manual.events():
                t0 = time.perf_counter()
                await self.processor.process(event, manual)
                backlog = queue is None or queue.qsize() > 0
                pause = self.fair.took(tenant, time.perf_counter() - t0, backlog)
                if pause:
                    await asyncio.sleep(pause)

        return evaluate


def _exit_stalled(line: str) -> None:
    """The progress watch gave up: one clear line, then exit without a graceful stop (which
    would wait on the consumer that is stuck); compose and Kubernetes start the worker again."""
    log.error("%s (exit code %d)", line, STALL_EXIT_CODE)
    logging.shutdown()
    os._exit(STALL_EXIT_CODE)
