"""Agent-side client: publish run events, await the matching steering decision.

The client reads only the steering partitions its own runs hash to (the worker sends a
run's decision to partition `partition_for(run_id)`), so an agent process reads roughly its
share of the traffic instead of every run's decisions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaConnectionError

from ..kafka import signing, wire
from ..kafka.client_settings import ClientSettings, SettingsError
from ..kafka.probe import MissingTopic, broker_answers, topic_partitions
from ..kafka.security import KafkaAuthError as KafkaAuthError
from ..kafka.security import client_kwargs, diagnose
from ..shared.contract import ACTIONS as ACTIONS
from ..shared.contract import SCHEMA_VERSION, fast_validator
from ..shared.contract import Action as Action
from ..shared.gate_policy import GatePolicy
from ..shared.gate_policy import load as load_gate_policy
from ..shared.logsafe import safe_for_log
from . import tracing
from .gate import ALLOW, GateMemory, GateMode, GateVerdict, check_gate_mode, log_denial
from .usage import of as usage_of
from .usage import total as usage_total
from .validation import check_run_field_names, validate_run_fields

log = logging.getLogger(__name__)
T = TypeVar("T")
NOT_STARTED = (
    "the steering client is not started: call client.start() first "
    "(or use it as a context manager: `with SyncSteeringClient(...) as client:`)"
)


class KafkaLogQuiet(logging.Filter):
    """While a client runs, aiokafka's warnings and errors (hundreds of lines a broker outage:
    every reconnect attempt, every failed request) are cut to the first one, as aiokafka wrote
    it; the rest are counted (`quieted`) until the broker answers again. The outage itself is
    the client's one health line (`SteeringClient.healthy`), which gives this count when the
    broker is back. A lone warning (a leader moving) is just that warning.

    One per process, installed on every aiokafka logger by the first client that starts and
    removed when the last one stops (a logger's filter sees only its own records, hence each
    logger). Messages below WARNING pass untouched (someone debugging asked for them)."""

    def __init__(self) -> None:
        super().__init__("aiokafka")
        self.quieted = 0  # aiokafka messages not logged, since the process started
        self.outages = 0
        self._since: float | None = None  # when the current outage's first message came
        self._in_outage = 0  # messages quieted in the current outage
        self._users = 0
        self._loggers: list[logging.Logger] = []
        self._mutex = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        with self._mutex:
            if self._since is None:  # the first of a possible outage: shown as it is
                self._since, self._in_outage = time.monotonic(), 0
                return True
            self._in_outage += 1
            self.quieted += 1
            if self._in_outage == 1:
                self.outages += 1
        return False

    def answered(self) -> int:
        """The broker took an event or delivered a record: an outage, if one is open, is over.
        Returns how many of its messages were not logged."""
        if self._since is None:
            return 0
        with self._mutex:
            n = self._in_outage if self._since is not None else 0
            self._since, self._in_outage = None, 0
        return n

    @property
    def in_outage(self) -> bool:
        return self._since is not None

    def acquire(self) -> None:
        with self._mutex:
            self._users += 1
            if self._users > 1:
                return
            names = [
                n
                for n in list(logging.root.manager.loggerDict)
                if n == "aiokafka" or n.startswith("aiokafka.")
            ]
            self._loggers = [logging.getLogger(n) for n in sorted(names)]
        for lg in self._loggers:
            lg.addFilter(self)

    def release(self) -> None:
        with self._mutex:
            self._users -= 1
            if self._users > 0:
                return
            loggers, self._loggers = self._loggers, []
            self._since = None  # no client left to see the broker answer: the next outage is new
        for lg in loggers:
            lg.removeFilter(self)


KAFKA_LOG_QUIET = KafkaLogQuiet()


def action_of(data: dict[str, Any] | None) -> Action:
    """A decision's `action`; `continue` when there is no decision or it has no known action."""
    action = (data or {}).get("action")
    for known in ACTIONS:
        if action == known:
            return known
    return "continue"


@dataclass
class StepLogEntry:
    """What happened at one model call, from the agent's side."""

    step: int
    fsm_state: str | None
    difficulty: float | None
    model_id: str | None
    injections: int
    injection_sources: list[str]
    intervention_texts: list[str]
    monitors_fired: list[str]
    failure_type: str | None
    skipped_reason: str | None
    tokens: int | None
    latency_ms: float
    steered: bool = True
    late: bool = False
    action: Action = "continue"  # the decision's rung (continue when late or from an older worker)


@dataclass
class Decision:
    """A steering decision as received (the wire dict plus convenience accessors)."""

    data: dict[str, Any]
    latency_ms: float

    @property
    def step(self) -> int:
        return int(self.data["step"])

    @property
    def fsm_state(self) -> str:
        return str(self.data["fsm_state"])

    @property
    def model(self) -> str | None:
        return self.data.get("model")

    @property
    def injection_text(self) -> str | None:
        return self.data.get("injection_text")

    @property
    def action(self) -> Action:
        """The rung this decision asks for: `continue`, `nudge` (an injection), `escalate` (a
        stronger model, `model`) or `stop`. A decision from a worker older than the ladder has
        no `action` (nor an unknown one from a newer worker): it reads as `continue`."""
        return action_of(self.data)

    @property
    def action_reason(self) -> dict[str, Any] | None:
        """Why the decision escalated or stopped: {monitor, failure_type, ignored, steps,
        text}; None for `continue` and `nudge` (and from an older worker)."""
        reason = self.data.get("action_reason")
        return reason if isinstance(reason, dict) else None

    def __getitem__(self, key: str) -> Any:
        return self.data[key]


@dataclass
class _Run:
    run_id: str
    partition: int
    step_log: list[StepLogEntry] = field(default_factory=list)
    last_delivered: int = -1
    last_published: int = -1  # the highest step this client published (decisions past it: not ours)
    # The run's last event handed to the producer (a task until the producer took it): the
    # next one waits for it, so a run's events keep their order even when a call gives up.
    enqueued: asyncio.Task[Any] | None = None
    # an event of this run was dropped (the queue was full): its later ones would be out of
    # order for the worker, so they are dropped too (counted)
    broken: bool = False
    # the taint of the newest decision received, on time or late (the pre-call gate's): a
    # late or missing decision keeps it, a newer one replaces it, the finish forgets it
    gate: GateMemory = field(default_factory=GateMemory)
    model: str | None = None  # the run's model (run_start), what its steps ask for unless they say


def step_event(
    run_id: str,
    step: int,
    *,
    thought: str | None = None,
    action: str | None = None,
    action_input: Any = None,
    observation: str | None = None,
    observation_is_error: bool = False,
    tokens: int | None = None,
    model_id: str | None = None,
    difficulty: float | None = None,
    agent: str | None = None,
    lead: bool | None = None,
    usage: Any = None,
    served_model: str | None = None,
) -> dict[str, Any]:
    """The step event the client publishes: this step only, never the trace so far. `agent`
    names who spoke or acted in a multi-agent system; a step without `action` is a message;
    `lead=True`: that agent took the run over (a hand-off) and leads it from now on. `usage`:
    the call's token usage as the framework reports it (any shape `streams.agent.usage.of`
    reads; one it cannot read is left out), which also gives `tokens` when that is not given;
    `served_model`: the model the provider says served the call."""
    wire_usage = usage_of(usage)
    if tokens is None and wire_usage is not None:
        tokens = usage_total(wire_usage) or None
    event: dict[str, Any] = {
        "type": "step",
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "step": step,
        "thought": thought,
        "action": action,
        "action_input": action_input,
        "observation": observation,
        "observation_is_error": observation_is_error,
        "tokens": tokens,
        "model_id": model_id,
        "ts": time.time(),
    }
    if difficulty is not None:
        event["difficulty"] = difficulty
    if agent is not None:
        event["agent"] = agent
    if lead is not None:
        event["lead"] = lead
    if wire_usage is not None:
        event["usage"] = wire_usage
    if isinstance(served_model, str) and served_model:
        event["served_model"] = served_model[:256]
    return fit(event)


# Failing open (issue 40): the broker away never costs the agent its run, only its steering.
CONNECT_TIMEOUT_S = 3.0  # a start (or reconnect) waits this long for the broker, then goes on
CLOSE_TIMEOUT_S = 2.0  # stop() waits this long for the producer to flush, then closes anyway
MAX_QUEUED_EVENTS = 10_000  # events held while the broker is away (the newest are dropped past it)
MAX_QUEUED_BYTES = 32 * 1024 * 1024
RETRY_MIN_S, RETRY_MAX_S = 0.5, 5.0  # reconnect attempts back off between these
PROBE_EVERY_S = 1.0  # with nothing heard from the broker for this long, it is asked (metadata)
PROBE_TIMEOUT_S = 2.0  # a broker that does not answer the probe in this long is away
HealthCallback = Callable[[bool, str], None]

# The largest steering record the client reads (a decision is a few KB; its texts are cut by
# the worker): a bigger one is dropped unparsed, whoever wrote it.
DECISION_MAX_BYTES = 128 * 1024
DROP_LOG_EVERY_S = 60.0  # one log line per minute at most about dropped steering records

# A step the worker refuses as too large (RB_MAX_EVENT_BYTES, 256 KiB by default) is
# dead-lettered, and the run's next step is then out of order: one long model response would
# end the run's steering. So the client cuts a step to fit, keeping the head of each text: the
# worker reads the first 20,000 chars of a thought or an output (RB_MAX_THOUGHT_CHARS).
TEXT_SENT = 64_000  # chars of a thought or an observation sent
INPUT_SENT = 64_000  # chars of a tool input's JSON sent (longer: sent as that text, cut)
EVENT_BYTES_SENT = 240 * 1024  # below the worker's default limit, with room for the envelope


def check_run_start(event: dict[str, Any]) -> None:
    """A run_start the worker would dead-letter as invalid (a field of the wrong type, too long,
    unknown where the schema is closed) is refused here, with the schema's reason: the agent
    would otherwise see every decision of the run come back late, with no error."""
    from fastjsonschema import JsonSchemaValueException

    try:
        fast_validator("run_start")({k: v for k, v in event.items() if v is not None})
    except JsonSchemaValueException as exc:
        raise ValueError(f"invalid run_start: {exc.message}") from None


def _text_len(v: Any) -> int:
    return len(v) if isinstance(v, str) else -1


def fit(event: dict[str, Any], limit: int = EVENT_BYTES_SENT) -> dict[str, Any]:
    """The step event cut to fit `limit` bytes: its thought, observation and tool input keep
    their heads (a structured input longer than INPUT_SENT becomes its JSON text, cut)."""
    for name in ("thought", "observation"):
        v = event.get(name)
        if isinstance(v, str) and len(v) > TEXT_SENT:
            event[name] = v[:TEXT_SENT]
    raw = event.get("action_input")
    if raw is not None and not isinstance(raw, str | int | float | bool):
        text = wire.dumps(raw)
        if len(text) > INPUT_SENT:
            event["action_input"] = text[:INPUT_SENT].decode("utf-8", "ignore")
    elif isinstance(raw, str) and len(raw) > INPUT_SENT:
        event["action_input"] = raw[:INPUT_SENT]
    while len(wire.dumps(event)) > limit:  # multi-byte text: halve the longest until it fits
        name = max(("thought", "observation", "action_input"), key=lambda n: _text_len(event.get(n)))
        v = event.get(name)
        if not isinstance(v, str) or not v:
            break
        event[name] = v[: len(v) // 2]
    return event


def _entry(
    step: int, d: Decision | None, tokens: int | None, latency_ms: float, model: str | None, late: bool = True
) -> StepLogEntry:
    if d is None:
        return StepLogEntry(
            step,
            None,
            None,
            model,
            0,
            [],
            [],
            [],
            None,
            "decision late: proceeding unsteered" if late else "steering unavailable: proceeding unsteered",
            tokens,
            latency_ms,
            steered=False,
            late=late,
        )
    inj = d.data.get("injections") or []
    mon = d.data.get("monitors") or {}
    return StepLogEntry(
        step=step,
        fsm_state=d.data.get("fsm_state"),
        difficulty=d.data.get("difficulty"),
        model_id=d.data.get("model") or model,
        injections=len(inj),
        injection_sources=[i.get("source") for i in inj],
        intervention_texts=[i.get("text") for i in inj],
        monitors_fired=list(mon.get("fired") or []),
        failure_type=mon.get("failure_type"),
        skipped_reason=d.data.get("skipped_reason"),
        tokens=tokens,
        latency_ms=latency_ms,
        action=d.action,
    )


def settings_from_env(**explicit: Any) -> tuple[ClientSettings, str | None]:
    """The client's settings from RB_* and `explicit` values (None: not given), failing open:
    with an invalid RB_* value, the defaults with `explicit` on top and the reason (`RB_<NAME>: 'v'
    is not valid: ...`). An invalid explicit value raises SettingsError: a mistake in code."""
    try:
        return ClientSettings.from_env(**explicit), None
    except SettingsError as exc:
        why = f"invalid setting {exc}"
    return ClientSettings.from_env({}, **explicit), why


async def _close(part: AIOKafkaProducer | AIOKafkaConsumer, timeout: float) -> None:
    """Stop an aiokafka producer or consumer within `timeout` (a producer flushes first: during
    an outage that would wait for its request timeout), then close its connections whatever
    its stop managed. Nothing raises: aiokafka's stop raises CancelledError when its sender was
    mid-request, which a `with` block's exit would pass to the agent."""
    stopping = asyncio.ensure_future(part.stop())
    done, _ = await asyncio.wait([stopping], timeout=timeout)
    if not done:
        stopping.cancel()
        await asyncio.wait([stopping], timeout=1.0)
    if stopping.done() and not stopping.cancelled():
        stopping.exception()  # retrieved: not "never retrieved"
    kafka = getattr(part, "client", None) or getattr(part, "_client", None)
    if kafka is not None:
        closing = asyncio.ensure_future(kafka.close())
        await asyncio.wait([closing], timeout=1.0)
        if closing.done() and not closing.cancelled():
            closing.exception()


class SteeringClient:
    """Async client. Use `async with SteeringClient(...) as c:` or start()/stop()."""

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        bootstrap_servers: str | None = None,
        topic_prefix: str | None = None,
        deadline_ms: int | None = None,
        client_id: str | None = None,
        on_health: HealthCallback | None = None,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        close_timeout_s: float = CLOSE_TIMEOUT_S,
        max_queued_events: int = MAX_QUEUED_EVENTS,
        max_queued_bytes: int = MAX_QUEUED_BYTES,
        call_gate: bool | None = None,
        gate: GateMode | None = None,
        gate_policy: GatePolicy | str | Path | None = None,
    ) -> None:
        """`on_health(healthy, reason)`: called (on the client's loop; keep it quick, it must not
        raise) when steering becomes unavailable or available again. While the broker is away
        at most `max_queued_events` / `max_queued_bytes` of events wait for it; newer ones are
        dropped (`dropped_events`). `call_gate`: the pre-call gate on or off for this client's
        sessions and adapters (default `RB_CLIENT_CALL_GATE`, on); `gate`: its mode, "lenient"
        or "strict" (default `RB_CLIENT_GATE_MODE`, lenient; a session's or an adapter's wins);
        `gate_policy`: its policy (`streams.shared.gate_policy`: a `GatePolicy`, or a TOML/JSON file's
        path; default `RB_CLIENT_GATE_POLICY`, none: the defaults). A policy file that cannot be
        read or is invalid raises ValueError here, naming the file and what is wrong.

        Without `settings`, RB_* are read here: an invalid value there does not raise (the
        agent never stops for steering) but turns steering off for this client, with one log
        line, `healthy` False and `health_reason` naming the variable. An invalid explicit
        value (`settings`, `topic_prefix`, `deadline_ms`) raises at construction."""
        self.config_error: str | None = None  # why steering is off for good (an invalid RB_* value)
        if deadline_ms is not None and (
            isinstance(deadline_ms, bool) or not isinstance(deadline_ms, int) or deadline_ms < 1
        ):
            raise ValueError(f"deadline_ms: {deadline_ms!r} is not a whole number of milliseconds >= 1")
        if settings is None:
            settings, self.config_error = settings_from_env(
                topic_prefix=topic_prefix or None, client_deadline_ms=deadline_ms
            )
        s = settings
        self.settings = s
        self.bootstrap_servers = bootstrap_servers or s.bootstrap_servers
        if topic_prefix and s.topic_prefix != topic_prefix:
            s = s.with_(topic_prefix=topic_prefix)
        # multi-tenant mode (RB_TENANT): the tenant's own topics, the only ones its principal may use
        self.topic_prefix, self.tenant = s.topic_prefix, s.tenant
        self.steps_topic = s.client_steps_topic
        self.steering_topic = s.client_steering_topic
        self.deadline_ms = deadline_ms if deadline_ms is not None else s.client_deadline_ms
        self.extra_names = s.extra_names  # names the workers add (RB_CLIENT_EXTRA_NAMES)
        self.call_gate = s.client_call_gate if call_gate is None else bool(call_gate)
        self.gate: GateMode = check_gate_mode(gate) or s.client_gate_mode
        self.gate_policy: GatePolicy | None = None
        if isinstance(gate_policy, GatePolicy):
            self.gate_policy = gate_policy
        elif gate_policy is not None:  # an explicit file: an invalid one raises here
            self.gate_policy = load_gate_policy(gate_policy)
        elif s.client_gate_policy and self.config_error is None:
            try:  # RB_CLIENT_GATE_POLICY: invalid turns steering off, like any invalid RB_* value
                self.gate_policy = load_gate_policy(s.client_gate_policy)
            except ValueError as exc:
                self.config_error = f"RB_CLIENT_GATE_POLICY: {exc}"
        self.denied_calls = 0  # tool calls check_call denied
        # the proposed guardrail span next to the decision on the caller's span (RB_CLIENT_TRACE_GUARDRAIL)
        self.trace_guardrail = s.client_trace_guardrail
        self.client_id = client_id or f"rb-client-{uuid.uuid4().hex[:8]}"
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._partitions = 0
        self._assigned: set[TopicPartition] = set()
        self._lock = asyncio.Lock()
        self._waiters: dict[tuple[str, int], asyncio.Future[Decision]] = {}
        self._sent_at: dict[tuple[str, int], float] = {}
        self._runs: dict[str, _Run] = {}
        self._task: asyncio.Task[None] | None = None
        self.late_decisions = 0
        # write each decision on the caller's OpenTelemetry span (off in a SyncSteeringClient's
        # own client: its loop thread has none of the caller's spans, the wrapper writes it)
        self._traces = True
        self.duplicate_decisions = 0
        self.unasked_decisions = 0  # steering records for our runs that answer no step we sent
        self.failed_sends = 0  # events the producer gave up on (broker away past its timeout)
        # steering records for our runs dropped unused: signature missing or wrong (with a
        # decision key), and too large, not JSON or not a valid decision
        self.unsigned_decisions = 0
        self.invalid_decisions = 0
        self._decision_key = s.decision_key.get_secret_value()
        self._unchecked_logged = False  # "signed but no key here" said once
        self._drop_logged_at = -DROP_LOG_EVERY_S
        self._drops_unlogged = 0
        self._quiet = False  # holds KAFKA_LOG_QUIET (between start and stop)
        self.on_health = on_health
        self.connect_timeout_s, self.close_timeout_s = connect_timeout_s, close_timeout_s
        self.max_queued_events, self.max_queued_bytes = max_queued_events, max_queued_bytes
        self._started = False  # start() was called (and stop() not yet)
        self._connected = False  # producer and consumer up, steering partitions known
        self._healthy = False
        self.health_reason = "not started"
        if self.config_error is not None:
            self.health_reason = self.config_error
            log.error(
                "steering is off: %s; the agent goes on unsteered (fix the variable, then restart it)",
                self.config_error,
            )
        self._down_since: float | None = None
        self._last_answer = 0.0  # when the broker last took an event or delivered a record
        self._backlog: deque[tuple[_Run, bytes]] = deque()  # events held until the first connect
        self._queued = self._queued_bytes = 0  # events accepted and not yet acknowledged
        self.dropped_events = 0  # events dropped: the queue was full (or the client stopped)
        self._dropped_in_outage = 0
        self._sending: set[asyncio.Task[Any]] = set()
        self._unwatched: set[int] = set()  # steering partitions to add once the broker answers
        self._supervisor: asyncio.Task[None] | None = None

    # -- lifecycle ----------------------------------------------------------
    async def start(self) -> None:
        """Connect, waiting at most `connect_timeout_s`. A broker that is down, unreachable or
        silent, or a steering topic not created yet, does not raise: the client goes on
        unsteered (`healthy` False, one log line) and connects in the background. Raises
        KafkaAuthError when the broker rejects the credentials (a configuration mistake). With an
        invalid RB_* value (`config_error`) it connects to nothing and every call is unsteered."""
        if self.config_error is not None:
            self._started = True
            self._set_health(False, self.config_error, quiet=True)  # said once, at construction
            return
        if not self._quiet:
            KAFKA_LOG_QUIET.acquire()
            self._quiet = True
        self._started = True
        try:
            await asyncio.wait_for(self._start(), self.connect_timeout_s)
        except Exception as exc:
            await self._teardown()
            if self.settings.kafka_security != "PLAINTEXT":
                try:  # the one case worth raising: credentials or a certificate turned down
                    await asyncio.wait_for(
                        diagnose(self.settings.with_(broker=self.bootstrap_servers)), self.connect_timeout_s
                    )
                except KafkaAuthError:
                    await self.stop()
                    raise
                except Exception:
                    pass
            self._set_health(False, self._why(exc))
        else:
            self._set_health(True, "connected")
        self._supervisor = asyncio.create_task(self._supervise(), name="rb-client-supervise")

    def _why(self, exc: BaseException) -> str:
        if isinstance(exc, MissingTopic):  # the broker answered: the worker is missing, or elsewhere
            where = f"RB_TOPIC_PREFIX={self.topic_prefix}"
            if self.tenant:
                where += f" and tenant {self.tenant} added (rb-streams tenants add {self.tenant})"
            return f"{exc}: is a worker running with {where}?"
        if isinstance(exc, TimeoutError):
            return (
                f"the broker at {self.bootstrap_servers} did not answer within {self.connect_timeout_s:g} s"
            )
        if isinstance(exc, KafkaConnectionError):
            return f"cannot reach the broker at {self.bootstrap_servers}"
        return safe_for_log(str(exc) or type(exc).__name__, 300)

    @property
    def healthy(self) -> bool:
        """True while the broker answers and decisions can come; False before start, while the
        broker is away (the agent goes on unsteered) and after stop. `health_reason` says why."""
        return self._healthy

    def _set_health(self, healthy: bool, reason: str, quiet: bool = False) -> None:
        """Record a health change: one log line per outage (when it starts, and when it ends),
        and `on_health` called on each change."""
        was = self._healthy
        self._healthy, self.health_reason = healthy, reason
        if healthy == was and not (not healthy and self._down_since is None):
            return
        now = time.monotonic()
        if not healthy:
            self._down_since = now
            self._dropped_in_outage = 0
        if not healthy and not quiet:
            log.warning(
                "steering unavailable: %s; the agent goes on unsteered (events queued up to %d, "
                "retrying in the background)",
                reason,
                self.max_queued_events,
            )
        elif healthy:
            since, self._down_since = self._down_since, None
            quieted = KAFKA_LOG_QUIET.answered()
            if since is not None:
                log.warning(
                    "steering available again after %.1f s (%d events dropped, %d Kafka client "
                    "messages not logged)",
                    now - since,
                    self._dropped_in_outage,
                    quieted,
                )
        if self.on_health is not None:
            try:
                self.on_health(healthy, reason)
            except Exception as exc:  # the agent's callback must not stop the client
                log.warning("on_health callback failed: %s", safe_for_log(repr(exc), 200))

    def _answered(self) -> None:
        """The broker took an event or delivered a record."""
        self._last_answer = time.monotonic()
        if not self._healthy and self._connected and self._started:
            self._set_health(True, "connected")  # (its line gives the quieted count)
        else:  # a blip's quieted messages stay counted; aiokafka's next warning is shown again
            KAFKA_LOG_QUIET.answered()

    async def _supervise(self) -> None:
        """In the background until stop: connect (backing off) while not connected; once
        connected, ask the broker for metadata when nothing was heard from it for a while, so
        an outage (a stopped or silent broker) is seen, and its end."""
        delay = RETRY_MIN_S
        while True:
            if not self._connected:
                await asyncio.sleep(delay)
                try:
                    await asyncio.wait_for(self._start(), self.connect_timeout_s)
                except Exception as exc:
                    await self._teardown()
                    self.health_reason = self._why(exc)
                    delay = min(delay * 2, RETRY_MAX_S)
                    continue
                delay = RETRY_MIN_S
                await self._flush_backlog()
                self._set_health(True, "connected")
                continue
            await asyncio.sleep(PROBE_EVERY_S)
            if self._unwatched and self._healthy:
                for partition in sorted(self._unwatched):
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(self._watch(partition), PROBE_TIMEOUT_S)
                        self._unwatched.discard(partition)
            if time.monotonic() - self._last_answer < PROBE_EVERY_S:
                continue
            producer = self._producer
            if producer is None:
                continue
            try:
                await asyncio.wait_for(broker_answers(producer.client), PROBE_TIMEOUT_S)
            except Exception as exc:
                if self._healthy:
                    why = "no answer" if isinstance(exc, TimeoutError) else type(exc).__name__
                    self._set_health(
                        False, f"the broker at {self.bootstrap_servers} stopped answering ({why})"
                    )
                continue
            self._answered()

    async def _flush_backlog(self) -> None:
        """Connected at last: the runs started meanwhile get their steering partitions (watched
        first, so no decision is missed), then the events held since start go out, each run's
        in order."""
        for run in list(self._runs.values()):
            if run.partition < 0:
                run.partition = wire.partition_for(run.run_id, self._partitions)
                self._unwatched.add(run.partition)
        for partition in sorted(self._unwatched):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._watch(partition), PROBE_TIMEOUT_S)
                self._unwatched.discard(partition)
        while self._backlog:
            run, value = self._backlog.popleft()
            self._send(run, value, admitted=True)

    async def _teardown(self) -> None:
        """Close what a (failed or finished) connection left: each part within close_timeout_s,
        and never an exception (an outage makes aiokafka's stop raise, even CancelledError)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task], timeout=self.close_timeout_s)
        consumer, producer = self._consumer, self._producer
        self._consumer = self._producer = None
        self._connected = False
        self._assigned.clear()
        for part in (consumer, producer):
            if part is not None:
                await _close(part, self.close_timeout_s)

    async def _start(self) -> None:
        fast_validator("decision", True)  # compiled now (tens of ms), not within decision 0's deadline
        auth = client_kwargs(self.settings)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap_servers,
            client_id=self.client_id,
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            **auth,
        )
        await self._producer.start()
        # one metadata request for the steering topic, before the consumer: a missing topic is
        # said at once, as such (the broker did answer), and never created by asking
        self._partitions = await topic_partitions(self._producer.client, self.steering_topic)
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap_servers,
            client_id=self.client_id,
            **auth,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="latest",
            isolation_level="read_committed",
            fetch_max_wait_ms=50,
        )
        await self._consumer.start()
        self._connected = True
        self._last_answer = time.monotonic()
        self._task = asyncio.create_task(self._consume(), name="rb-client-consume")

    async def stop(self) -> None:
        """Close within about 2 x close_timeout_s whatever the broker does; never raises. Events
        the broker has not taken by then are lost (counted in `dropped_events`, one line)."""
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.wait([supervisor], timeout=self.close_timeout_s)
        unsent = len(self._backlog)
        while self._backlog:
            _run, value = self._backlog.popleft()
            self._release(len(value))
        await self._teardown()
        sending = list(self._sending)
        for task in sending:
            task.cancel()
        if sending:
            await asyncio.wait(sending, timeout=self.close_timeout_s)
        lost = unsent + self._queued
        if lost and self._started:
            self.dropped_events += lost
            if unsent:  # never connected: they never left this process
                why = f"never sent: {self.health_reason}"
            elif not self._healthy:
                why = f"the broker never took ({self.health_reason})"
            else:
                why = f"the broker had not acknowledged within {self.close_timeout_s:g} s"
            log.warning("steering client stopped with %d events %s", lost, why)
        self._queued = self._queued_bytes = 0
        self._started = False
        self._healthy, self.health_reason, self._down_since = False, "stopped", None
        if self._quiet:
            self._quiet = False
            KAFKA_LOG_QUIET.release()

    @property
    def quieted_kafka_logs(self) -> int:
        """aiokafka warnings and errors not logged (during broker outages) in this process."""
        return KAFKA_LOG_QUIET.quieted

    async def __aenter__(self) -> SteeringClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- subscription -------------------------------------------------------
    async def _watch(self, partition: int) -> None:
        """Add a steering partition to the assignment, positioned at its end, before the
        first event of a run on it is published (so its decision cannot be missed)."""
        tp = TopicPartition(self.steering_topic, partition)
        if tp in self._assigned:
            return
        assert self._consumer is not None
        async with self._lock:
            if tp in self._assigned:
                return
            positions = {p: await self._consumer.position(p) for p in self._assigned}
            self._consumer.assign(list(self._assigned | {tp}))
            for p, pos in positions.items():
                self._consumer.seek(p, pos)
            await self._consumer.seek_to_end(tp)
            await self._consumer.position(tp)
            self._assigned.add(tp)

    async def _consume(self) -> None:
        assert self._consumer is not None
        while True:
            if not self._assigned:
                await asyncio.sleep(0.01)
                continue
            try:
                async with self._lock:
                    batches = await self._consumer.getmany(timeout_ms=20, max_records=1000)
            except asyncio.CancelledError:
                raise
            except Exception:  # the broker away: aiokafka reconnects; the probe reports it
                await asyncio.sleep(0.2)
                continue
            now = time.perf_counter()
            if batches:
                self._answered()
            for records in batches.values():
                for rec in records:
                    try:
                        self._receive(rec.value, rec.key, rec.headers, now)
                    except Exception:
                        log.exception("bad decision record at offset %s", rec.offset)

    def _receive(
        self,
        value: bytes | None,
        record_key: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        now: float,
    ) -> None:
        """A steering record is checked before it can steer: at most DECISION_MAX_BYTES, JSON,
        signed with RB_DECISION_KEY (when set), valid against the decision schema; otherwise it
        is dropped, counted and logged (rate-limited). Records for runs this client did not
        start are skipped unchecked (another process's, on a shared partition)."""
        if value is None or len(value) > DECISION_MAX_BYTES:
            self._drop("invalid", f"larger than {DECISION_MAX_BYTES} bytes" if value else "empty")
            return
        try:
            data = wire.loads(value)
        except ValueError:
            self._drop("invalid", "not JSON")
            return
        if not isinstance(data, dict) or data.get("run_id") not in self._runs:
            return
        if self._decision_key and not signing.verify(
            self._decision_key, record_key, value, signing.signature_of(headers)
        ):
            self._drop("unsigned", "signature missing or wrong (RB_DECISION_KEY)")
            return
        if not self._decision_key and not self._unchecked_logged and signing.signature_of(headers):
            # the workers sign, this agent cannot check: a forged record would steer it
            self._unchecked_logged = True
            log.warning(
                "decisions on %s are signed but RB_DECISION_KEY is not set here: they are used "
                "unchecked, and a record forged into the topic would steer this agent (give the "
                "agent the workers' key: docs/production.md)",
                self.steering_topic,
            )
        try:  # a newer worker's extra optional field passes; every known field is checked
            fast_validator("decision", True)(data)
        except Exception as exc:  # fastjsonschema's JsonSchemaValueException
            self._drop("invalid", f"not a valid decision ({safe_for_log(getattr(exc, 'message', exc), 120)})")
            return
        self._deliver(data, now, record_key)

    def _drop(self, kind: Literal["unsigned", "invalid"], why: str) -> None:
        """Count a dropped steering record; log one line per DROP_LOG_EVERY_S at most."""
        if kind == "unsigned":
            self.unsigned_decisions += 1
        else:
            self.invalid_decisions += 1
        now = time.monotonic()
        if now - self._drop_logged_at < DROP_LOG_EVERY_S:
            self._drops_unlogged += 1
            return
        more = (
            f" ({self._drops_unlogged} more dropped since the last such line)" if self._drops_unlogged else ""
        )
        self._drop_logged_at, self._drops_unlogged = now, 0
        log.warning(
            "dropped a steering record on %s: %s; the agent goes on unsteered for that step%s",
            self.steering_topic,
            why,
            more,
        )

    def _deliver(self, data: dict[str, Any], now: float, record_key: bytes | None = None) -> None:
        run = self._runs.get(data.get("run_id", ""))
        if run is None:
            return  # another process's run on a shared partition
        step = data["step"]
        if type(step) is not int or step > run.last_published or record_key != run.run_id.encode("utf-8"):
            # Not an answer to a step this client sent (or not keyed as the worker keys its
            # decisions): someone else's record naming our run. Never steer with it.
            self.unasked_decisions += 1
            return
        if step <= run.last_delivered:
            self.duplicate_decisions += 1
            return
        run.last_delivered = step
        # on time or late, the newest decision's taint is what the gate checks from now on
        # (a late one steers nothing else: its call went on unsteered)
        run.gate.remember(data)
        key = (run.run_id, step)
        fut = self._waiters.pop(key, None)
        sent = self._sent_at.pop(key, now)
        if fut is not None and not fut.done():
            fut.set_result(Decision(data, (now - sent) * 1000.0))
        else:
            self.late_decisions += 1

    # -- publishing ---------------------------------------------------------
    async def _publish_and_wait(
        self, run: _Run, step: int, event: dict[str, Any], wait: bool
    ) -> Decision | None:
        key = (run.run_id, step)
        run.last_published = max(run.last_published, step)
        if self.config_error is not None:  # steering off: nothing is sent, nothing held
            return None
        value = wire.dumps(event)
        if not self._admit(run, len(value)):
            return None
        if not self._connected:  # never connected yet: held until the broker answers
            self._backlog.append((run, value))
            return None
        if not self._healthy:  # the broker is away: no decision can come, so none is awaited
            self._send(run, value, admitted=True)
            return None
        fut: asyncio.Future[Decision] | None = None
        if wait:
            fut = asyncio.get_running_loop().create_future()
            self._waiters[key] = fut
            self._sent_at[key] = time.perf_counter()
        t0 = time.perf_counter()
        # The agent never waits past its deadline, not even for Kafka itself: while the broker
        # is away the producer keeps the event (in order with the run's later ones) and retries,
        # and this call reports an unsteered step.
        enqueue = self._send(run, value, admitted=True)
        deadline = self.deadline_ms / 1000.0

        def left() -> float:
            return max(0.0, deadline - (time.perf_counter() - t0))

        try:
            sent = await asyncio.wait_for(asyncio.shield(enqueue), left())
            await asyncio.wait_for(asyncio.shield(sent), left())
            if fut is None:
                return None
            return await asyncio.wait_for(asyncio.shield(fut), left())
        except Exception:  # past the deadline, or the producer refused the event (counted, logged)
            self._waiters.pop(key, None)
            self._sent_at.pop(key, None)
            return None

    def _admit(self, run: _Run, size: int) -> bool:
        """Room for one more event while the broker is slow or away? The newest is dropped when
        the queue is full: the held events are each run's oldest (its run_start first), which
        the worker needs in order to steer it when the broker is back; a run that lost an event
        loses its later ones too (the worker would refuse them as out of order)."""
        if (
            run.broken
            or self._queued >= self.max_queued_events
            or self._queued_bytes + size > self.max_queued_bytes
        ):
            if not run.broken and self._dropped_in_outage == 0:
                log.warning(
                    "steering queue full (%d events, %d bytes): newer events are dropped and counted "
                    "until the broker answers",
                    self._queued,
                    self._queued_bytes,
                )
            run.broken = True
            self.dropped_events += 1
            self._dropped_in_outage += 1
            return False
        self._queued += 1
        self._queued_bytes += size
        return True

    def _release(self, size: int) -> None:
        self._queued = max(0, self._queued - 1)
        self._queued_bytes = max(0, self._queued_bytes - size)

    def _send(self, run: _Run, value: bytes, *, admitted: bool) -> asyncio.Task[Any]:
        """Hand an (admitted) event to the producer after the run's previous one."""
        enqueue = asyncio.ensure_future(self._enqueue(run.enqueued, value, run.run_id))
        enqueue.add_done_callback(self._on_sent)
        self._sending.add(enqueue)
        enqueue.add_done_callback(self._sending.discard)
        run.enqueued = enqueue
        return enqueue

    async def _enqueue(
        self, prev: asyncio.Task[Any] | None, value: bytes, run_id: str
    ) -> asyncio.Future[Any]:
        """Hand the event to the producer after the run's previous one (metadata waits can
        hold a send while the broker is away). Its queue slot is freed when the broker has
        taken it or the producer gave up."""
        try:
            if prev is not None and not prev.done():
                await asyncio.wait([prev])
            producer = self._producer
            if producer is None:
                raise KafkaConnectionError("the steering client is not connected")
            sent: asyncio.Future[Any] = await producer.send(
                self.steps_topic, value, key=run_id.encode("utf-8")
            )
        except BaseException:
            self._release(len(value))
            raise
        sent.add_done_callback(self._on_delivered)
        sent.add_done_callback(lambda _f: self._release(len(value)))
        return sent

    def _on_sent(self, sent: asyncio.Future[Any]) -> None:
        if not sent.cancelled() and sent.exception() is not None:
            self.failed_sends += 1
            if self._healthy and not KAFKA_LOG_QUIET.in_outage:  # in an outage: counted only
                log.error("an event could not be published: %s", safe_for_log(str(sent.exception()), 300))

    def _on_delivered(self, sent: asyncio.Future[Any]) -> None:
        if not sent.cancelled() and sent.exception() is None:
            self._answered()
        else:
            self._on_sent(sent)

    def _run_of(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            if not self._started:
                raise RuntimeError(NOT_STARTED)
            raise KeyError(f"run {run_id!r} was not started by this client (start_run first)")
        return run

    async def start_run(self, run_id: str, **fields: Any) -> Decision | None:
        """Publish run_start and wait for decision 0 (which applies to the first call)."""
        if run_id in self._runs:
            raise ValueError(f"run {run_id!r} already started by this client")
        ts = fields.pop("ts", None)  # the envelope's time, when the caller backfills a run
        if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int | float)):
            raise ValueError(f"start_run: ts must be a number of seconds, got {type(ts).__name__}")
        check_run_field_names("start_run", fields)  # a misspelt field: TypeError with a suggestion
        validate_run_fields(fields, self.extra_names)
        check_run_start({"type": "run_start", "schema_version": SCHEMA_VERSION, "run_id": run_id, **fields})
        if not self._started:
            raise RuntimeError(NOT_STARTED)
        # not connected yet: the partition is known once the broker has answered
        run = _Run(run_id, wire.partition_for(run_id, self._partitions) if self._connected else -1)
        run.gate.intend(fields.get("task"))  # a user who asked only a question needs no destination
        model = fields.get("model")
        run.model = model if isinstance(model, str) else None
        self._runs[run_id] = run
        if self._connected:
            try:  # bounded: seeking the partition's end needs the broker
                await asyncio.wait_for(self._watch(run.partition), self.deadline_ms / 1000.0)
            except Exception:
                self._unwatched.add(run.partition)
        event = {
            "type": "run_start",
            "schema_version": SCHEMA_VERSION,
            "run_id": run_id,
            "ts": time.time() if ts is None else ts,
        }
        event.update({k: v for k, v in fields.items() if v is not None})
        t0 = time.perf_counter()
        d = await self._publish_and_wait(run, 0, event, True)
        ms = (time.perf_counter() - t0) * 1000
        run.step_log.append(_entry(0, d, None, ms, fields.get("model"), late=self._healthy))
        if d is not None:  # (already remembered on delivery; a late one keeps what is held)
            run.gate.remember(d.data)
        if self._traces:
            self._trace_decision(run_id, d)
        return d

    async def step(
        self,
        run_id: str,
        step: int,
        *,
        thought: str | None = None,
        action: str | None = None,
        action_input: Any = None,
        observation: str | None = None,
        observation_is_error: bool = False,
        tokens: int | None = None,
        model_id: str | None = None,
        difficulty: float | None = None,
        agent: str | None = None,
        lead: bool | None = None,
        usage: Any = None,
        served_model: str | None = None,
    ) -> Decision | None:
        """Publish step `step` and wait for its decision (None if it missed the deadline)."""
        run = self._run_of(run_id)
        event = step_event(
            run_id,
            step,
            thought=thought,
            action=action,
            action_input=action_input,
            observation=observation,
            observation_is_error=observation_is_error,
            tokens=tokens,
            model_id=model_id,
            difficulty=difficulty,
            agent=agent,
            lead=lead,
            usage=usage,
            served_model=served_model,
        )
        t0 = time.perf_counter()
        d = await self._publish_and_wait(run, step, event, True)
        tokens = event.get("tokens")  # filled from `usage` when not given
        ms = (time.perf_counter() - t0) * 1000
        run.step_log.append(_entry(step, d, tokens, ms, model_id, late=self._healthy))
        if d is not None:  # (already remembered on delivery; a late one keeps what is held)
            run.gate.remember(d.data)
        if self._traces:
            self._trace_decision(run_id, d, model_id)
        return d

    async def finish_run(self, run_id: str, outcome: str = "success") -> None:
        run = self._run_of(run_id)
        run.gate.forget()  # the run is over: its taint goes, and a late decision brings none back
        event = {
            "type": "run_finish",
            "schema_version": SCHEMA_VERSION,
            "run_id": run_id,
            "outcome": outcome,
            "ts": time.time(),
        }
        await self._publish_and_wait(run, -1, event, False)

    async def send_raw(self, value: bytes, key: bytes | None = None) -> None:
        """Publish arbitrary bytes to the steps topic (tests and tooling)."""
        if self._producer is None:
            raise RuntimeError("the steering client is not connected")
        await self._producer.send_and_wait(self.steps_topic, value, key=key)

    def step_log(self, run_id: str) -> list[StepLogEntry]:
        return list(self._runs[run_id].step_log)

    def check_call(self, run_id: str, tool: str, args: object) -> GateVerdict:
        """May the run call `tool` with `args` now? Computed here (no I/O) from the `taint`
        list of the newest decision the run has had, on time or late: a late or missing
        decision leaves the earlier taint in force (`gate_memory`). Strict mode (`gate`) also
        denies any tainted value in an acting call. Allowed when the gate is off, the run is
        unknown or finished, no decision has come, or its taint list is malformed (fail open).
        A denial is counted (`denied_calls`) and logged (one line); `gate.denial_text` says
        it to the model."""
        run = self._runs.get(run_id)
        if not self.call_gate or run is None:
            return ALLOW
        verdict = run.gate.check(tool, args, strict=self.gate == "strict", policy=self.gate_policy)
        if not verdict.allow:
            self.denied_calls += 1
            log_denial(run_id, run.gate.step, tool, verdict)
            tracing.record_refusal(
                tool, verdict.reason, source_step=verdict.source_step, guardrail=self.trace_guardrail
            )
        return verdict

    def _trace_decision(self, run_id: str, d: Decision | None, model: str | None = None) -> None:
        """Write the decision handed to the agent (None: none came) on the caller's current
        OpenTelemetry span, if one records (`streams.agent.tracing`; never raises). `model`:
        the model the step asked for (default: the run's)."""
        run = self._runs.get(run_id)
        late = d is None and run is not None and bool(run.step_log) and run.step_log[-1].late
        asked = model or (run.model if run is not None else None)
        tracing.record_decision(d, late=late, requested_model=asked, guardrail=self.trace_guardrail)

    def gate_memory(self, run_id: str) -> GateMemory | None:
        """The run's gate memory (the taint of its newest decision; None: a run this client
        does not know). A session checks against it too, so a decision that came after its
        deadline still counts."""
        run = self._runs.get(run_id)
        return run.gate if run is not None else None

    def forget(self, run_id: str) -> None:
        """Drop a finished run's bookkeeping (step log, duplicate filter): a long-lived client
        serving many runs stays bounded. Late decisions for it are ignored from then on."""
        self._runs.pop(run_id, None)


async def _cancel_the_rest() -> None:
    """Cancel every task still on this loop but the caller, and wait for them (bounded)."""
    me = asyncio.current_task()
    rest = [t for t in asyncio.all_tasks() if t is not me]
    for task in rest:
        task.cancel()
    if rest:
        await asyncio.wait(rest, timeout=1.0)


class SyncSteeringClient:
    """Blocking wrapper for synchronous agent loops: runs the async client on its own thread."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._client = SteeringClient(*args, **kwargs)  # first: a bad argument leaves no thread
        self._client._traces = False  # written from the caller's thread, on its span
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="rb-client", daemon=True)
        self._thread.start()
        self._stopped = False

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._stopped:  # its loop is gone: the call would wait for ever
            coro.close()
            raise RuntimeError("this SyncSteeringClient is stopped: start a new one")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._submit(coro).result()

    async def _arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await from another event loop (an async agent) without blocking it."""
        return await asyncio.wrap_future(self._submit(coro))

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the async client runs on: code that must never wait for the client (an
        OpenTelemetry span processor) schedules its calls there with `call_soon_threadsafe`."""
        return self._loop

    @property
    def async_client(self) -> SteeringClient:
        """The async client behind this wrapper; call it only from `loop`."""
        return self._client

    def start(self) -> None:
        self._run(self._client.start())

    def stop(self) -> None:
        """Close within a few seconds whatever the broker does, and never raise (leaving a
        `with` block during an outage used to raise CancelledError and exit the agent 1)."""
        if self._stopped:
            return
        self._stopped = True
        bound = 2 * self._client.close_timeout_s + 3.0
        try:
            asyncio.run_coroutine_threadsafe(self._client.stop(), self._loop).result(timeout=bound)
        except Exception as exc:  # includes concurrent.futures' TimeoutError and CancelledError
            log.warning("steering client stop: %s (closed anyway)", safe_for_log(repr(exc), 200))
        with contextlib.suppress(Exception):  # nothing left pending ("Task was destroyed")
            asyncio.run_coroutine_threadsafe(_cancel_the_rest(), self._loop).result(timeout=2.0)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> SyncSteeringClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start_run(self, run_id: str, **fields: Any) -> Decision | None:
        d = self._run(self._client.start_run(run_id, **fields))
        self._client._trace_decision(run_id, d)
        return d

    def step(self, run_id: str, step: int, **fields: Any) -> Decision | None:
        d = self._run(self._client.step(run_id, step, **fields))
        self._client._trace_decision(run_id, d, fields.get("model_id"))
        return d

    def finish_run(self, run_id: str, outcome: str = "success") -> None:
        self._run(self._client.finish_run(run_id, outcome))

    def step_log(self, run_id: str) -> list[StepLogEntry]:
        return self._client.step_log(run_id)

    def check_call(self, run_id: str, tool: str, args: object) -> GateVerdict:
        """`SteeringClient.check_call`: the pre-call gate from the run's newest decision."""
        return self._client.check_call(run_id, tool, args)

    def gate_memory(self, run_id: str) -> GateMemory | None:
        """`SteeringClient.gate_memory` (read from the agent's thread: it swaps whole)."""
        return self._client.gate_memory(run_id)

    @property
    def call_gate(self) -> bool:
        """The pre-call gate is on for this client's sessions and adapters (`RB_CLIENT_CALL_GATE`)."""
        return self._client.call_gate

    @property
    def trace_guardrail(self) -> bool:
        """Sessions and adapters on this client also write the proposed guardrail span
        (`RB_CLIENT_TRACE_GUARDRAIL`, `streams.agent.tracing`)."""
        return self._client.trace_guardrail

    @property
    def gate(self) -> GateMode:
        """The gate's mode for this client's sessions and adapters (`RB_CLIENT_GATE_MODE`)."""
        return self._client.gate

    @property
    def gate_policy(self) -> GatePolicy | None:
        """The gate's policy (`RB_CLIENT_GATE_POLICY`; None: the defaults)."""
        return self._client.gate_policy

    @property
    def denied_calls(self) -> int:
        """Tool calls `check_call` denied."""
        return self._client.denied_calls

    @property
    def extra_names(self) -> tuple[str, ...]:
        """Scorer, transition and profile names the workers add (RB_CLIENT_EXTRA_NAMES)."""
        return self._client.extra_names

    @property
    def healthy(self) -> bool:
        """True while steering works; False while the broker is away (the agent goes on
        unsteered), before start and after stop. `health_reason` says why."""
        return self._client.healthy

    @property
    def health_reason(self) -> str:
        return self._client.health_reason

    @property
    def config_error(self) -> str | None:
        """Why steering is off for good: an invalid RB_* value (None: the settings are valid)."""
        return self._client.config_error

    @property
    def dropped_events(self) -> int:
        """Events dropped because the queue was full while the broker was away (or unsent at stop)."""
        return self._client.dropped_events

    # The async client's counters, read as they stand (ints written by its loop's thread).
    @property
    def late_decisions(self) -> int:
        """Decisions that came after their step's deadline (the agent went on unsteered)."""
        return self._client.late_decisions

    @property
    def duplicate_decisions(self) -> int:
        return self._client.duplicate_decisions

    @property
    def unasked_decisions(self) -> int:
        """Records naming one of our runs that answer no step this client sent (never used)."""
        return self._client.unasked_decisions

    @property
    def failed_sends(self) -> int:
        """Events the producer gave up on (the broker away past its timeout)."""
        return self._client.failed_sends

    @property
    def unsigned_decisions(self) -> int:
        """Records for our runs dropped: signature missing or wrong (RB_DECISION_KEY set)."""
        return self._client.unsigned_decisions

    @property
    def invalid_decisions(self) -> int:
        """Records for our runs dropped: too large, not JSON or not a valid decision."""
        return self._client.invalid_decisions

    @property
    def quieted_kafka_logs(self) -> int:
        """aiokafka warnings and errors not logged (during broker outages) in this process."""
        return self._client.quieted_kafka_logs

    async def astart_run(self, run_id: str, **fields: Any) -> Decision | None:
        d = await self._arun(self._client.start_run(run_id, **fields))
        self._client._trace_decision(run_id, d)
        return d

    async def astep(self, run_id: str, step: int, **fields: Any) -> Decision | None:
        d = await self._arun(self._client.step(run_id, step, **fields))
        self._client._trace_decision(run_id, d, fields.get("model_id"))
        return d

    async def afinish_run(self, run_id: str, outcome: str = "success") -> None:
        await self._arun(self._client.finish_run(run_id, outcome))
