"""Per-run state kept in the worker's table. Bounded whatever the run length."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import orjson

from . import routing
from .evolve import evolve, non_default, rebuild
from .fsm import FSMParams, FSMState
from .monitors import MonitorState
from .monitors.suite import stored_monitors

# How much of the task text the run state keeps (monitors compare against it).
TASK_CHARS_KEPT = 2000
# The fields of a step log entry (engine.log_entry), in order; the last two came later.
STEP_LOG_KEYS = (
    "step",
    "fsm_state",
    "difficulty",
    "model",
    "injection_sources",
    "monitors_fired",
    "suppressed",
    "processed_ts",
    "scores",
    "skipped_reason",
)


@dataclass(frozen=True)
class RunConfig:
    """What run_start fixed for the run's lifetime."""

    org_id: str = "default"
    project_id: str | None = None
    agent_name: str | None = None
    task: str | None = None
    framework: str | None = None
    model: str | None = None
    task_profile: str = "coding"
    monitor_weights: dict[str, float] | None = None
    weights: dict[str, float] = field(default_factory=dict)  # resolved at run_start
    model_routing: dict[str, str] = field(default_factory=dict)
    token_budget: int | None = None
    e_traces_enabled: bool = True
    monitors_enabled: bool = True
    fsm: dict[str, Any] = field(default_factory=dict)
    fsm_transition: str = "default"
    # Not DEFAULT_SCORER: this default never picks a run's scorer (run_start always sets one,
    # DEFAULT_SCORER when the event names none, and every state written since the first commit
    # carries it); "heuristic" is what runs had before `trajectory` became the default (5014b4b).
    scorer: str = "heuristic"
    # Monitors switched off for the run, their fire levels, and the escalation
    # ladder's policy (resolved at run_start: the run's own, else its org's default; None:
    # nudges only, as before). States written before these fields decode with the defaults.
    monitors_off: list[str] = field(default_factory=list)
    monitor_thresholds: dict[str, float] = field(default_factory=dict)
    escalation: dict[str, Any] | None = None
    # A run may let routing switch providers in the middle of a tool exchange.
    cross_provider_tool_switch: bool = False
    # The run's wait budget (its org's, resolved at run_start: `budget.WaitBudget` as
    # {seconds, calls, usd}); None: the built-in one (and every state written before).
    wait_budget: dict[str, Any] | None = None
    # The run's experiment (its name) and arm ("treatment" | "control"), resolved at
    # run_start (core.holdout); None: in no experiment (and every state written before).
    experiment: str | None = None
    arm: str | None = None

    def fsm_params(self) -> FSMParams:
        return FSMParams(**self.fsm) if self.fsm else FSMParams()


@dataclass(frozen=True)
class TraceState:
    """Everything the worker remembers about a run.

    Frozen: the worker keeps decoded states beside the table and hands the same object to
    the run's next event, so the engine never changes a state, it makes a new one (`evolve`).

    `history` holds only the last `max_window` scores: enough for every FSM rule, and the
    reason per-step work and state size stay flat as runs grow.
    """

    run_id: str
    config: RunConfig
    state: FSMState = FSMState.INIT
    history: list[float] = field(default_factory=list)
    # The run scorer's memory between steps (bounded; None for scorers without memory and in
    # states written before scorers had one, which then start afresh).
    scorer_state: dict[str, Any] | None = None
    last_step: int = 0
    scored_steps: int = 0
    tokens_used: int = 0
    monitor_injections: int = 0
    last_monitor_injection_step: int | None = None
    last_monitor_injection_text: str | None = None
    recent_fired: list[list[str]] = field(default_factory=list)  # fired lists of the last 2 steps
    monitors: MonitorState = field(default_factory=MonitorState.initial)
    e1_calls: int = 0
    e2_calls: int = 0
    e3_calls: int = 0
    recent_thoughts: list[str] = field(default_factory=list)  # E-trace query window (<= 5)
    # E1/E2 queries the last step planned, answered on the next decision (Query.to_wire form;
    # at most one per tier, so bounded). States written before deferral decode with [].
    etraces_pending: list[list[Any]] = field(default_factory=list)
    injections_by_source: dict[str, int] = field(default_factory=dict)
    # The escalation ladder (core.ladder, docs/escalation.md), bounded: the rung (continue,
    # nudge, escalate, stop; down one rung on progress), warnings ignored, the last few of them as
    # [step warned, step that did it again], the warnings still judged ([monitor, failure_type, step, text head], one
    # per monitor), the action_reason of the escalate/stop rung, and (runs with a ladder only)
    # the keys of the last few calls, which a warning is about.
    rung: str = "continue"
    ignored: int = 0
    # The rung comes down on progress (`ladder.progress`): calls in a row on which no monitor
    # fired while on escalate or stop, and [call key, result key] of the call that last did
    # again what a warning was about (the same call with a new result is progress).
    quiet: int = 0
    rung_call: list[str] = field(default_factory=list)
    ignored_steps: list[list[int]] = field(default_factory=list)
    warnings: list[list[Any]] = field(default_factory=list)
    rung_reason: dict[str, Any] | None = None
    recent_calls: list[str] = field(default_factory=list)  # the last few calls' keys (a ladder only)
    # Cache-aware routing's memory (core.routing; runs with model_routing only, else None):
    # a few numbers and at most five models' cache times. States written before decode with None.
    routing: dict[str, Any] | None = None
    duplicates: int = 0
    # Last few decisions, compact: [step, state, difficulty, model, sources, fired, suppressed, ts]
    step_log: list[list[Any]] = field(default_factory=list)
    # The monitor names of the step log's scores, once: an entry keeps its scores as a list of
    # values in this order (a dict when a decision's names differ; every entry written before
    # this field, which decodes as []).
    log_score_names: list[str] = field(default_factory=list)
    finished: bool = False
    outcome: str | None = None
    started_ts: float | None = None
    last_event_ts: float | None = None
    updated_ts: float | None = None  # worker time of the last event applied: retention's clock
    # core.compliance: did the agent do what a monitor's text told it? monitor ->
    # [complied, ignored]; the same per served model (at most MODELS_KEPT a monitor); the checks
    # still open ([monitor, step, steps seen, model, call keys]: at most one per monitor).
    compliance: dict[str, list[int]] = field(default_factory=dict)
    compliance_by_model: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    compliance_pending: list[list[Any]] = field(default_factory=list)
    # The last decision the run produced, as sent (its JSON text: `.encode()` gives the bytes
    # back exactly). A redelivered copy of that step (or of the run_start) re-sends it: the
    # worker may have stored this state locally while the decision was still in the producer's
    # buffer at a crash, and a restart on the same store would otherwise answer nothing.
    # Bounded by the decision cap. States written before this field decode with None.
    last_decision: str | None = None
    # What the run's outcome record reports (`core.outcome`), counted from its
    # decisions before a control run's are masked. Bounded: at most outcome.MODELS_KEPT models
    # and KEYS_KEPT monitors. States written before these fields decode with nothing counted.
    model_calls: dict[str, int] = field(default_factory=dict)  # model calls by model
    # [input not read from the cache, output, read from the cache, context estimate, its part
    # the last call read] (tokens; `outcome.count_call`)
    usage: list[int] = field(default_factory=list)
    cost_usd: float = 0.0
    cost_estimated: bool = False
    interventions: dict[str, int] = field(default_factory=dict)  # delivered, by monitor
    escalations: int = 0  # climbs to the escalate rung
    stops: int = 0  # climbs to the stop rung
    first_fire: dict[str, int] = field(default_factory=dict)  # monitor -> step of its first fire
    next_model: str | None = None  # the model the last decision named (None: the run's own)
    first_ts: float | None = None  # the first event ts, when the run_start had none

    def evolve(self, **changes: Any) -> TraceState:
        """This state with `changes` (`core.evolve`: ~1 us, not `dataclasses.replace`'s ~20 us)."""
        return evolve(self, _STATE_FIELDS, changes)

    def with_etrace_call(self, tier: str) -> TraceState:
        """This state with one more answered call of E-trace `tier` (e1, e2 or e3)."""
        if tier == "e1":
            return self.evolve(e1_calls=self.e1_calls + 1)
        if tier == "e2":
            return self.evolve(e2_calls=self.e2_calls + 1)
        if tier == "e3":
            return self.evolve(e3_calls=self.e3_calls + 1)
        raise ValueError(f"unknown E-trace tier {tier!r}")

    @property
    def budget_used(self) -> float | None:
        b = self.config.token_budget
        return None if not b else self.tokens_used / b

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def encode(self) -> bytes:
        """Table encoding: the compact form (`compact`) as JSON."""
        return orjson.dumps(self.compact())

    def compact(self) -> dict[str, Any]:
        """The state as stored: every field, but the run's config with only its values that
        differ from their defaults, and only the monitors' memories that are not their initial
        ones (a run with monitors off stores none). `decode` fills the rest back, so
        `decode(encode(st)) == st`; it reads the whole form every earlier version wrote (each
        memory and the config whole) just as well. The config's JSON is made once per run, the
        memories' look-up once per step that ran them (`monitors.suite.stored_monitors`)."""
        d = dict(vars(self))
        d["config"] = _config_json(self.config)
        mon = stored_monitors(self.monitors)
        if mon is None:
            del d["monitors"]
        else:
            d["monitors"] = mon
        return d

    @classmethod
    def decode(cls, raw: bytes) -> TraceState:
        """A stored state, in either form (`compact`). The encoding's version is its first
        byte: "{" is JSON (both forms); any later encoding must begin with another byte."""
        if raw[:1] != b"{":
            raise ValueError(f"run state in an unknown encoding (first byte {raw[:1]!r})")
        return cls.from_dict(orjson.loads(raw))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TraceState:
        d = dict(d)
        d["config"] = rebuild(RunConfig, d["config"])
        if "state" in d:
            d["state"] = FSMState(d["state"])
        # a compact state without monitors: every memory a new run's (`_state_of` starts each)
        d["monitors"] = MonitorState.from_dict(d["monitors"]) if "monitors" in d else MonitorState()
        if d.get("routing") is not None:
            # a memory stored before its numbers were bounded (a cost of inf, written as null)
            # is repaired here, not failed on by every later event of the run
            d["routing"] = routing.recover(d["routing"])
        _repair_numbers(d)
        return rebuild(cls, d)

    def step_log_entries(self) -> list[dict[str, Any]]:
        """The step log as the HTTP view shows it. An entry stored before `scores` and
        `skipped_reason` were kept has them as null; scores kept as a list are named again."""
        out = []
        for e in self.step_log:
            entry = dict(zip(STEP_LOG_KEYS, [*e, *[None] * (len(STEP_LOG_KEYS) - len(e))], strict=True))
            scores = entry["scores"]
            if type(scores) is list:
                entry["scores"] = dict(zip(self.log_score_names, scores, strict=False))
            out.append(entry)
        return out

    def summary(self) -> dict[str, Any]:
        """What operators and the HTTP view want to see of a run."""
        return {
            "run_id": self.run_id,
            "org_id": self.config.org_id,
            "state": self.state,
            "step": self.last_step,
            "tokens_used": self.tokens_used,
            "token_budget": self.config.token_budget,
            "budget_used": self.budget_used,
            "scored_steps": self.scored_steps,
            "duplicates": self.duplicates,
            "monitor_injections": self.monitor_injections,
            "e_trace_calls": {"e1": self.e1_calls, "e2": self.e2_calls, "e3": self.e3_calls},
            "injections_by_source": dict(self.injections_by_source),
            "rung": self.rung,
            "ignored_warnings": self.ignored,
            "rung_reason": self.rung_reason,
            "finished": self.finished,
            "outcome": self.outcome,
            "experiment": self.config.experiment,
            "arm": self.config.arm,
        }


_STATE_FIELDS = frozenset(f.name for f in fields(TraceState))
# The compact JSON of the configs of the runs stepped lately, by identity: a run's config is
# fixed at run_start and every later state of the run holds the same object (`evolve`), so it is
# made once per run, not once per step (most of a small state's encoding).
_CONFIGS_KEPT = 4096
_config_cache: dict[int, tuple[RunConfig, orjson.Fragment]] = {}


def _config_json(cfg: RunConfig) -> orjson.Fragment:
    kept = _config_cache.get(id(cfg))
    if kept is not None and kept[0] is cfg:
        return kept[1]
    frag = orjson.Fragment(orjson.dumps(non_default(cfg)))
    if len(_config_cache) >= _CONFIGS_KEPT:
        _config_cache.pop(next(iter(_config_cache)))  # the oldest entry
    _config_cache[id(cfg)] = (cfg, frag)
    return frag


# The run's own numbers, as stored: counts (integers in [0, COUNT_MAX]), times (numbers or null).
_COUNTS = (
    "last_step",
    "scored_steps",
    "tokens_used",
    "monitor_injections",
    "e1_calls",
    "e2_calls",
    "e3_calls",
    "ignored",
    "quiet",
    "duplicates",
    "escalations",
    "stops",
)
_TIMES = ("started_ts", "last_event_ts", "updated_ts", "first_ts")
_COUNT_MAX = routing.COUNT_MAX


def _number(v: Any) -> bool:
    return (type(v) is float and v - v == 0) or type(v) is int  # finite (inf - inf is NaN)


def _repair_numbers(d: dict[str, Any]) -> None:
    """A stored state's own numbers, made what the engine can add to (issue 48: a `null` where
    a number belongs failed every later event of its run). A count that is not an integer
    restarts at 0, one out of range is clamped; a time that is not a finite number is unknown
    (null); a score in `history` that is not one is dropped. A state the engine wrote is left
    exactly as it is (replay and the worker then agree)."""
    for k in _COUNTS:
        v = d.get(k, 0)
        if type(v) is not int or not 0 <= v <= _COUNT_MAX:
            d[k] = min(max(v, 0), _COUNT_MAX) if type(v) is int else 0
    for k in _TIMES:
        v = d.get(k)
        if v is not None and type(v) is not int and not (type(v) is float and v - v == 0):
            d[k] = None
    v = d.get("cost_usd", 0.0)
    if not _number(v) or not 0 <= v <= routing.COST_MAX:
        d["cost_usd"] = 0.0
    u = d.get("usage")
    if u is not None and (type(u) is not list or not all(type(x) is int and 0 <= x <= _COUNT_MAX for x in u)):
        d["usage"] = []
    v = d.get("last_monitor_injection_step")
    if v is not None and type(v) is not int:
        d["last_monitor_injection_step"] = None
    h = d.get("history")
    if h is not None and not _all_numbers(h):
        d["history"] = [x for x in h if _number(x)] if type(h) is list else []


def _all_numbers(h: Any) -> bool:
    """Whether `h` is a list of finite numbers (one pass in C: fsum refuses anything else)."""
    if type(h) is not list:
        return False
    try:
        return math.isfinite(math.fsum(h))  # (a boolean passes: it compares as 0 or 1)
    except (TypeError, OverflowError):  # a null or a string; or two scores near 1e308
        return False
