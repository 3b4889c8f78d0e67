"""Prometheus metrics of the worker: base units, `rb_` prefix, no unbounded labels."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.metrics_core import Metric

from ..core.fsm import FSMState
from ..core.ladder import RUNGS
from ..core.monitors import MONITORS
from ..core.outcome import outcome_label
from ..core.results import Sealed
from ..shared.contract import load_schema

# A decision takes ~0.1-5 ms of worker time; buckets resolve that range and the tail.
PROCESSING_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
LAG_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RETRIEVAL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
WAIT_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.5, 1.0)
SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# The event-to-decision lag is observed only when the agent's ts is plausible: at most this far
# ahead of the worker's clock (counted as 0) or this far behind. Any other ts (one run_start
# with ts=-1e300 made the histogram's sum 1e300) is counted in rb_event_ts_implausible_total.
LAG_AHEAD_MAX_S = 60.0
LAG_MAX_S = 86_400.0
LABELS_CAP = 200  # distinct orgs (and routed models) the rb_cost_* metrics label; then OTHER
# A finished run's steps and cost (rb_run_steps, rb_run_cost_usd): runs of 1 to 1,000+ calls,
# costing cents to tens of dollars.
RUN_STEPS_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
STATE_BYTES_BUCKETS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
RUN_COST_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 100.0)
NO_ARM = "none"  # the arm (and experiment) label of a run in no experiment
OTHER = "other"

STATES = tuple(s.value for s in FSMState)
TRANSITIONS = (
    ("INIT", "NORMAL"),
    ("NORMAL", "FAST"),
    ("NORMAL", "SLOW"),
    ("FAST", "NORMAL"),
    ("SLOW", "NORMAL"),
    ("SLOW", "SKIP"),
    ("SKIP", "NORMAL"),
)
DEADLETTER_REASONS: tuple[str, ...] = tuple(load_schema("deadletter")["properties"]["reason"]["enum"])
# Where an event's processing can fail (rb_internal_errors_total{stage}); see Processor.process.
STAGES = (
    "evaluate",  # decode, validate, state transition, monitors (Engine.read, Engine.step)
    "etraces",  # the pattern store query (the decision still goes out, without E-traces)
    "complete",  # applying the E-trace answers (Engine.seal)
    "encode",  # the decision and state encoders (Engine.seal)
    "state_size",  # a state or decision over its cap (Engine.seal; the run keeps its state)
    "send",  # the decision to the steering topic
    "outcome",  # a run's outcome record to the outcomes topic
    "deadletter",  # a dead-letter record to its topic
    "store",  # the run's state to the table
    "changelog",  # a table record the producer refused (worker.producer_guard; never a crash)
    "evict",  # an rb.evict control record
    "metrics",  # counting the event
    "prefetch",  # handing the next step's monitor texts to the embedding process
    "ack",  # releasing the event's ack
    "dispatch",  # anything else between reading the event and finishing it
)
# The worker's in-memory structures that must stay bounded, by `rb_cache_entries{cache}` label
# (gauges.CacheProbe reads them; a soak's growth shows in the one that keeps rising).
CACHES = (
    "decoded_states",  # run states kept decoded beside the table (run_table.DECODED_KEPT)
    "run_index",  # retention clock per table entry (run_table.RunTable.seen)
    "runs_held",  # run -> org for the run caps (core.retention.RunsHeld; bound: RB_MAX_RUNS)
    "evictions_asked",  # eviction requests sent, not yet applied (retention.Retention)
    "fast_vectors",  # static-model vectors (embeddings.models.FAST_CACHE)
    "full_vectors",  # MiniLM vectors of the monitors (embeddings.models.FULL_CACHE)
    "query_vectors",  # MiniLM vectors of E-trace queries (embeddings.models.FULL_CACHE)
    "similarity_stacks",  # stacked anchor sets (core.monitors.semantics)
    "task_names",  # names in each run's task (core.monitors.drift)
    "etrace_prefetched",  # runs with E-trace answers in flight or waiting (etraces.retrieval)
    "run_chains",  # runs with an event finished off the agent loop (chains.RunChains)
    "acks_pending",  # events read, not yet acked (ack_order.AckOrder)
    "embed_prefetch_in_flight",  # batches in the embedding process (embeddings.prefetch)
)
# RocksDB's own memory, summed over the run table's partition stores (rb_rocksdb_memory_bytes).
ROCKSDB_MEMORY = {
    "memtables": "rocksdb.cur-size-all-mem-tables",
    "block_cache": "rocksdb.block-cache-usage",
    "table_readers": "rocksdb.estimate-table-readers-mem",
}
MALLOC = ("in_use", "free", "mmapped")  # rb_malloc_bytes kinds: see streams.runtime.allocator.stats
RENDER_MAX_AGE_S = 1.0  # /metrics renders at most once per second, however many scrape
# aiohttp takes the charset separately; the exposition format is UTF-8 anyway.
CONTENT_TYPE = "; ".join(p for p in CONTENT_TYPE_LATEST.split("; ") if not p.startswith("charset="))


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None, process: bool = True) -> None:
        self.registry = r = registry or CollectorRegistry()
        if process:  # process_resident_memory_bytes, process_cpu_seconds_total, python_info, ...
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
        self.steps = Counter(
            "rb_steps_processed", "Valid events processed, by event type", ["type"], registry=r
        )
        self.decisions = Counter("rb_decisions_emitted", "Decisions sent to the steering topic", registry=r)
        # What a step costs the broker and the disk: each stored state is one table write (the
        # local store and one changelog record), each decision one steering record. Sizing a
        # deployment starts from these (docs/production.md).
        self.state_bytes = Histogram(
            "rb_state_bytes",
            "Size of each run state's JSON written to the table, before the state codec and "
            "the producer's compression, one per stored event",
            buckets=STATE_BYTES_BUCKETS,
            registry=r,
        )
        self.state_stored_bytes = Histogram(
            "rb_state_stored_bytes",
            "Bytes each stored event writes to the run table, as the state codec stores them "
            "(the run's record and the parts it had not written: the local store's values and "
            "the changelog records'), one per stored event",
            buckets=STATE_BYTES_BUCKETS,
            registry=r,
        )
        self.decision_bytes = Counter(
            "rb_decision_written_bytes",
            "Bytes of decisions sent to the steering topic (before the producer's compression)",
            registry=r,
        )
        # Runs with model_routing. Calls by the model routing named ("home": the run's
        # own) and why, and the core's estimate of what they cost under prompt caching against
        # never switching (priced runs only; core.routing). Orgs and models: LABELS_CAP each.
        self.routed_calls = Counter(
            "rb_cost_routed_calls",
            "Model calls by org, routed model and routing reason",
            ["org", "model", "reason"],
            registry=r,
        )
        self.cost = Counter(
            "rb_cost_usd",
            "Estimated USD of model calls under prompt caching, routed and never switching, by org",
            ["org", "kind"],
            registry=r,
        )
        self._label_values: dict[str, set[str]] = {
            "org": set(),
            "model": set(),
            "experiment": set(),
            "monitor": set(),
            "guard_monitor": set(),
        }
        # How runs end, by org, experiment and arm (core.outcome; outcome record).
        self.runs_finished = Counter(
            "rb_runs_finished",
            "Runs ended (one outcome record each), by org, experiment, arm and outcome (success, "
            "failure, stopped_by_steering, abandoned: evicted without a run_finish)",
            ["org", "experiment", "arm", "outcome"],
            registry=r,
        )
        self.run_steps = Histogram(
            "rb_run_steps",
            "Steps of each ended run, by org, experiment and arm",
            ["org", "experiment", "arm"],
            buckets=RUN_STEPS_BUCKETS,
            registry=r,
        )
        self.run_cost = Histogram(
            "rb_run_cost_usd",
            "Cost of each ended run's model calls (reported usage or the estimate, at the price "
            "table's prices), by org, experiment and arm",
            ["org", "experiment", "arm"],
            buckets=RUN_COST_BUCKETS,
            registry=r,
        )
        self.compliance = Counter(
            "rb_compliance",
            "Interventions of ended runs judged complied or ignored (control: would-be ones), by "
            "monitor, the run's most-called model and arm",
            ["monitor", "model", "arm", "verdict"],
            registry=r,
        )
        self.duplicates = Counter(
            "rb_duplicate_events", "Replayed events ignored idempotently", ["type"], registry=r
        )
        self.deadletters = Counter(
            "rb_deadletters", "Inputs sent to the dead-letter topic", ["reason"], registry=r
        )
        self.transitions = Counter(
            "rb_fsm_transitions", "FSM transitions", ["from_state", "to_state"], registry=r
        )
        self.runs_by_state = Gauge(
            "rb_runs", "Runs held by this worker, by current FSM state", ["state"], registry=r
        )
        self.active_runs = Gauge("rb_active_runs", "Unfinished runs held by this worker", registry=r)
        self.table_entries = Gauge("rb_table_entries", "Entries in this worker's run-state table", registry=r)
        self.latency = Histogram(
            "rb_decision_processing_seconds",
            "Worker time from taking an event to having its decision sent",
            buckets=PROCESSING_BUCKETS,
            registry=r,
        )
        self.lag = Histogram(
            "rb_event_to_decision_seconds",
            "End-to-end lag: the event's ts (agent clock) to the decision",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.lag_implausible = Counter(
            "rb_event_ts_implausible",
            "Decisions left out of rb_event_to_decision_seconds: their event ts was more than "
            "60 s ahead of the worker's clock or more than a day behind it",
            registry=r,
        )
        self.monitor_scores = Histogram(
            "rb_monitor_score",
            "Monitor scores per scored step",
            ["monitor"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        self.monitor_fires = Counter(
            "rb_monitor_fires", "Monitor fires (score >= 0.6)", ["monitor"], registry=r
        )
        self.injections = Counter("rb_injections", "Injections sent, by source", ["source"], registry=r)
        self.suppressions = Counter(
            "rb_suppressions", "Monitor injections held back, by guardrail", ["guardrail"], registry=r
        )
        self.escalations = Counter(
            "rb_escalations",
            "Runs the escalation ladder moved up after ignored warnings, by the rung reached "
            "(escalate: the next calls go to the escalation model; stop: the run is told to end) "
            "and the monitor whose warning was ignored",
            ["action", "monitor"],
            registry=r,
        )
        self.retrieval = Histogram(
            "rb_etrace_retrieval_seconds",
            "E-trace retrieval latency",
            ["tier"],
            buckets=RETRIEVAL_BUCKETS,
            registry=r,
        )
        self.etrace_waits = Histogram(
            "rb_etrace_wait_seconds",
            "How long a decision with E-traces to answer waited for them (0 when prefetched in time)",
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.lookups = Counter(
            "rb_etrace_lookups",
            "E-trace lookups by tier and result (hit, miss, error)",
            ["tier", "result"],
            registry=r,
        )
        self.store_up = Gauge(
            "rb_etrace_store_up", "1 while the pattern store answers, 0 while it is failing", registry=r
        )
        self.store_failures = Counter(
            "rb_etrace_store_failures",
            "E-trace queries the store did not answer in time or at all, by tier and kind",
            ["tier", "kind"],
            registry=r,
        )
        self.evictions = Counter(
            "rb_runs_evicted",
            "Runs removed from the table (changelog tombstone), by reason: finished or idle",
            ["reason"],
            registry=r,
        )
        self.broker_connected = Gauge(
            "rb_broker_connected",
            "1 while the Kafka broker answers this worker (a metadata request each second), 0 while not",
            registry=r,
        )
        self.assigned_partitions = Gauge(
            "rb_assigned_partitions",
            "Partitions of the steps topic this worker owns (they split across replicas)",
            registry=r,
        )
        self.consumer_lag = Gauge(
            "rb_consumer_lag_messages",
            "Steps not yet processed, per assigned partition",
            ["partition"],
            registry=r,
        )
        self.internal_errors = Counter(
            "rb_internal_errors",
            "Failures inside the worker while processing an event, by stage (each event is "
            "dead-lettered internal_error and acked: processing goes on)",
            ["stage"],
            registry=r,
        )
        self.partition_stall = Gauge(
            "rb_partition_stall_seconds",
            "Per assigned partition: how long the oldest event read but not yet acked has waited "
            "(the committed offset cannot pass it); 0 when none waits",
            ["partition"],
            registry=r,
        )
        self.progress_stall = Gauge(
            "rb_progress_stall_seconds",
            "Per assigned partition: how long events have waited on it with none evaluated, once "
            "past RB_STALL_THRESHOLD_S (the worker is then not ready); 0 otherwise",
            ["partition"],
            registry=r,
        )
        self.prefetched = Counter(
            "rb_embed_prefetch_texts",
            "Texts a monitor check of the next step needs, embedded ahead in the embedding "
            "process, by outcome (embedded; cached: nothing to do; skipped: too many in flight; "
            "failed). Skipped and failed ones are embedded on the decision path instead",
            ["outcome"],
            registry=r,
        )
        self.cache_entries = Gauge(
            "rb_cache_entries",
            "Entries in each of the worker's bounded in-memory caches and indexes",
            ["cache"],
            registry=r,
        )
        self.cache_capacity = Gauge(
            "rb_cache_capacity",
            "The bound of each cache in rb_cache_entries (0: bounded by something else, e.g. "
            "the table's entries or in-flight work)",
            ["cache"],
            registry=r,
        )
        self.rocksdb_memory = Gauge(
            "rb_rocksdb_memory_bytes",
            "Memory RocksDB reports for the run table's stores (all partitions), by kind",
            ["kind"],
            registry=r,
        )
        self.malloc = Gauge(
            "rb_malloc_bytes",
            "The worker process's C heap (glibc mallinfo2): bytes in use, free but kept in the "
            "arenas (fragmentation: RSS the process cannot use for anything else), mmapped",
            ["kind"],
            registry=r,
        )
        # The guard (core.guard, RB_GUARD): steering switched to observe-only ("*": all of an
        # org's experiment), and the switches (the alert rule watches these).
        self.guard_observe_only = Gauge(
            "rb_guard_observe_only",
            "1 when the guard has switched this steering of an org's experiment to observe-only "
            "(monitor '*': all of it): its treatment runs were doing worse than control",
            ["org", "experiment", "monitor"],
            registry=r,
        )
        self.guard_switches = Counter(
            "rb_guard_switches",
            "Guard switches to observe-only, by org, experiment and monitor ('*': all steering)",
            ["org", "experiment", "monitor"],
            registry=r,
        )
        self._body = b""
        self._rendered = -RENDER_MAX_AGE_S
        # The metrics labelled by org: all a tenant's token reads of /metrics (`render_org`).
        self._by_org = [
            m for m in vars(self).values() if isinstance(m, MetricWrapperBase) and "org" in m._labelnames
        ]
        self._org_bodies: dict[str, tuple[bytes, float]] = {}
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        # Known label values start at zero so rate() sees the first increase.
        for stage in STAGES:
            self.internal_errors.labels(stage)
        for reason in ("finished", "idle"):
            self.evictions.labels(reason)
        for s in STATES:
            self.runs_by_state.labels(s).set(0)
        for t in ("run_start", "step", "run_finish"):
            self.steps.labels(t)
            self.duplicates.labels(t)
        for reason in DEADLETTER_REASONS:
            self.deadletters.labels(reason)
        for a, b in TRANSITIONS:
            self.transitions.labels(a, b)
        for name in MONITORS:
            self.monitor_fires.labels(name)
        for source in ("monitor", "e1", "e2", "e3"):
            self.injections.labels(source)
        for action in ("escalate", "stop"):
            for name in MONITORS:
                self.escalations.labels(action, name)
        for g in ("cooldown", "cap", "duplicate"):
            self.suppressions.labels(g)
        for outcome in ("embedded", "cached", "skipped", "failed"):
            self.prefetched.labels(outcome)
        for cache in CACHES:
            self.cache_entries.labels(cache).set(0)
            self.cache_capacity.labels(cache).set(0)
        for kind in ROCKSDB_MEMORY:
            self.rocksdb_memory.labels(kind).set(0)
        for kind in MALLOC:
            self.malloc.labels(kind).set(0)
        for tier in ("e1", "e2", "e3"):
            for result in ("hit", "miss", "error"):
                self.lookups.labels(tier, result)
            for kind in ("error", "timeout", "skipped"):
                self.store_failures.labels(tier, kind)

    def observe(self, result: Sealed, seconds: float, now: float) -> None:
        """Count one answered event. Called for every event: label children come from
        `_child` (a dict hit) rather than `labels()` (validation and a lock each time)."""
        child = self._child
        etype = result.event_type or "unknown"
        if result.state_bytes is not None:
            self.state_bytes.observe(len(result.state_bytes))
        if result.decision_bytes is not None:
            self.decision_bytes.inc(len(result.decision_bytes))
        if result.duplicate:
            child(self.duplicates, etype).inc()
            return
        child(self.steps, etype).inc()
        d = result.decision
        if d is not None:
            self.decisions.inc()
            self.latency.observe(seconds)
            ts = d.get("event_ts")
            if isinstance(ts, (int, float)):
                lag = now - ts
                if -LAG_AHEAD_MAX_S <= lag <= LAG_MAX_S:
                    self.lag.observe(max(0.0, lag))
                else:
                    self.lag_implausible.inc()
            mon = d["monitors"]
            for name, score in mon["scores"].items():
                child(self.monitor_scores, name).observe(score)
            for name in mon["fired"]:
                child(self.monitor_fires, name).inc()
            for inj in d["injections"]:
                child(self.injections, inj["source"]).inc()
            if d["suppressed"]:
                child(self.suppressions, d["suppressed"]).inc()
            prior, st = result.prior, result.state
            before = prior.rung if prior is not None else "continue"
            if st is not None and RUNGS.index(st.rung) > RUNGS.index(before):  # a climb (not progress)
                why = st.rung_reason
                if st.rung in ("escalate", "stop") and why is not None:
                    child(self.escalations, st.rung, why["monitor"]).inc()
        if d is not None and d.get("routing_reason") is not None:
            self._count_routing(result, d)
        if result.transition is not None:
            child(self.transitions, *result.transition).inc()
        for tier, outcome in result.etrace_outcomes.items():
            child(self.lookups, tier, outcome).inc()

    def outcome(self, record: dict[str, Any]) -> None:
        """Count one ended run from its outcome record (called once per run by one worker)."""
        child = self._child
        org = self._bounded("org", str(record["org_id"]))
        experiment = self._bounded("experiment", str(record["experiment"] or NO_ARM)[:64])
        arm = record["arm"] if record["arm"] in ("treatment", "control") else NO_ARM
        child(self.runs_finished, org, experiment, arm, outcome_label(record["outcome"])).inc()
        child(self.run_steps, org, experiment, arm).observe(record["steps"])
        child(self.run_cost, org, experiment, arm).observe(record["cost_usd"])
        # per served model (the model of the step each intervention answered); a record
        # without the split counts on the run's most-called model
        by_model = record.get("compliance_by_model") or {}
        if not by_model and record.get("compliance"):
            calls = record["model_calls"]
            top = min(calls, key=lambda m: (-calls[m], m)) if calls else "unknown"
            by_model = {name: {top: v} for name, v in record["compliance"].items()}
        for name, models in by_model.items():
            monitor = self._bounded("monitor", str(name)[:64])
            for served, verdicts in models.items():
                model = self._bounded("model", str(served)[:100])
                for verdict in ("complied", "ignored"):
                    n = verdicts.get(verdict, 0)
                    if n:
                        child(self.compliance, monitor, model, arm, verdict).inc(n)

    def guard_switched(self, org: str, experiment: str, monitor: str) -> None:
        """The guard switched `monitor` ('*': everything) of the org's experiment off."""
        labels = (
            self._bounded("org", org),
            self._bounded("experiment", experiment[:64]),
            self._bounded("guard_monitor", monitor[:64]),
        )
        self._child(self.guard_observe_only, *labels).set(1)
        self._child(self.guard_switches, *labels).inc()

    def _bounded(self, kind: str, value: str) -> str:
        """`value` as a label, or "other" once LABELS_CAP values of `kind` have been seen."""
        seen = self._label_values[kind]
        if value in seen:
            return value
        if len(seen) >= LABELS_CAP:
            return OTHER
        seen.add(value)
        return value

    def _count_routing(self, result: Sealed, d: Any) -> None:
        st, prior = result.state, result.prior
        if st is None:
            return
        org = self._bounded("org", st.config.org_id)
        model = self._bounded("model", str(d["model"] or "home")[:100])
        code = str(d["routing_reason"]).split(":", 1)[0][:20]
        self._child(self.routed_calls, org, model, code).inc()
        mem, before = st.routing, prior.routing if prior is not None else None
        if mem is not None and before is not None and mem.get("dollars"):
            routed = float(mem.get("cost", 0.0)) - float(before.get("cost", 0.0))
            base = float(mem.get("base", 0.0)) - float(before.get("base", 0.0))
            if routed > 0:
                self._child(self.cost, org, "routed").inc(routed)
            if base > 0:
                self._child(self.cost, org, "never_switching").inc(base)

    def _child(self, metric: MetricWrapperBase, *values: str) -> Any:
        """`metric.labels(*values)`, remembered: label values here are few and bounded."""
        key = (id(metric), values)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = metric.labels(*values)
        return c

    def etrace_query(self, tier: str, seconds: float, outcome: str) -> None:
        """Called by the retriever per query: latency of answered ones, failures by kind."""
        if outcome == "answered":
            self.retrieval.labels(tier).observe(seconds)
        else:
            self.store_failures.labels(tier, outcome).inc()

    def prefetch(self, outcome: str, texts: int) -> None:
        """Called by `EmbedPrefetch` (from the embedding pool's thread too)."""
        self.prefetched.labels(outcome).inc(texts)

    def etrace_wait(self, seconds: float) -> None:
        self.etrace_waits.observe(seconds)

    def deadletter(self, reason: str) -> None:
        self.deadletters.labels(reason).inc()

    def internal_error(self, stage: str) -> None:
        self.internal_errors.labels(stage if stage in STAGES else "dispatch").inc()

    def render_org(self, org: str, now: float | None = None) -> tuple[bytes, str]:
        """The exposition a tenant reads: only the series labelled with its org (the rb_cost_*
        and rb_run* families), never another org's series, and none of the worker-wide ones (they count
        every tenant's events together: the operator's). Rendered at most once per
        RENDER_MAX_AGE_S per org (one entry per tenant with a token: bounded by RB_TENANTS)."""
        now = time.monotonic() if now is None else now
        kept = self._org_bodies.get(org)
        if kept is None or now - kept[1] >= RENDER_MAX_AGE_S:
            # past LABELS_CAP orgs, "other" sums every later org: no tenant of that name reads it
            shared = org == OTHER and len(self._label_values["org"]) >= LABELS_CAP
            view = _OrgView([] if shared else self._by_org, org)
            kept = self._org_bodies[org] = (generate_latest(view), now)
        return kept[0], CONTENT_TYPE

    def render(self, now: float | None = None) -> tuple[bytes, str]:
        """The exposition, rendered at most once per RENDER_MAX_AGE_S: the web server shares
        the event loop with processing, so a burst of scrapes must not cost a render each."""
        now = time.monotonic() if now is None else now
        if now - self._rendered >= RENDER_MAX_AGE_S:
            self._body, self._rendered = generate_latest(self.registry), now
        return self._body, CONTENT_TYPE


class _OrgView(CollectorRegistry):
    """The org-labelled metrics with only `org`'s samples, as a registry to render."""

    def __init__(self, metrics: list[MetricWrapperBase], org: str) -> None:
        super().__init__(auto_describe=False)
        self._metrics, self._org = metrics, org

    def collect(self) -> Any:
        for metric in self._metrics:
            for family in metric.collect():
                mine = Metric(family.name, family.documentation, family.type, family.unit)
                mine.samples = [s for s in family.samples if s.labels.get("org") == self._org]
                yield mine
