"""The core's one entry: `Engine(policy, semantics, limits)`, pure (no I/O).

`read` decodes and checks one input (what can be checked before its run is looked up: the
message key, the tenant's claim); `step` applies it to the run's prior state and returns an
`Outcome`, a frozen value saying what happened (`Decided | Duplicate | Finished | Refused`)
with the side effects the adapter must carry out as data (`Effects`: the E-trace queries to
answer before the decision goes out, those to start for the next decision, the texts to embed
ahead); `seal` applies the store's answers and encodes: `Sealed` holds the bytes to send and
to store, or the dead-letter record. The worker and `rb-streams replay` both drive it through
`streams.pipeline.Pipeline`, which is why their decisions are identical.

Total: none of the three raises. Whatever fails inside (a bug, an encoder meeting a value it
cannot hold) becomes an `internal_error` refusal naming the stage and the exception, and the
run keeps a consistent state: the one it had, except that a step's number is used up
(`consumed`), so the run's next step is answered normally. Because the fallback is computed
here, the worker and replay agree on it too. Nothing an adapter receives is changed
afterwards: `seal` builds a new state and a new decision.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import orjson

from ..shared.contract import SCHEMA_VERSION, TOKENS_MAX
from . import compliance, etrace_rules, guard, holdout, ladder, provenance, routing
from .budget import DEFAULT_BUDGET, WaitBudget
from .decision import DecisionRecord, DifficultySource, Injection, MonitorsWire
from .difficulty import DEFAULT_SCORER, clamp01
from .events import Limits, Rejected, deadletter_record, decode
from .fsm import FSMState, validate_params
from .ladder import InvalidRunSettings, check_weight_names, parse_monitors_off, parse_thresholds
from .ladder import resolve as resolve_escalation
from .monitors import Semantics, clean_weights, data_instruction, hold_back
from .monitors import evaluate as evaluate_monitors
from .monitors import to_embed as monitors_to_embed
from .monitors.suite import LEAD
from .outcome import count_call, count_decision
from .policy import Policy
from .reading.features import StepFeatures, extract
from .reading.shell import could_not_run
from .render import render_block
from .results import (
    NO_KEY,
    Decided,
    Duplicate,
    Effects,
    Finished,
    Incoming,
    Outcome,
    Raw,
    Refused,
    Sealed,
)
from .state import TASK_CHARS_KEPT, RunConfig, TraceState

STATES_WITH_ROUTING = frozenset({FSMState.FAST, FSMState.NORMAL, FSMState.SLOW, FSMState.SKIP})
MONITORED_STATES = STATES_WITH_ROUTING  # monitors run in these, never in INIT/END


class Engine:
    """Run-state transitions: (prior state, input) -> outcome -> sealed records.

    `policy`: the scorers, transitions and weight profiles a run_start may name (built at the
    composition root); `semantics`: the embedders the monitors compare with (None: a run with
    monitors enabled is an internal error); `limits`: the caps on what an input may be and
    write."""

    def __init__(
        self, policy: Policy | None = None, semantics: Semantics | None = None, limits: Limits | None = None
    ) -> None:
        self.policy = policy or Policy()
        self.semantics = semantics
        self.limits = limits or Limits()

    def read(
        self, raw: Raw, now: float, *, key: object = NO_KEY, tenant: str | None = None
    ) -> Incoming | Refused:
        """Decode and validate one input, and check what needs no run state.

        `key`: the message key (bytes or None) when the input came from Kafka: it must be the
        run_id (a run's state lives with the partition its key maps to). `tenant`: in
        multi-tenant mode, the tenant whose topic the input came from (proven by Kafka's
        ACLs): an event claiming another org is refused (org_mismatch), and a run_start's org
        is the tenant."""
        seen = _Seen()
        try:
            return _read(raw, self.limits, key, tenant, seen)
        except Rejected as rej:
            return Refused(rej, raw, now, seen.event_type)
        except Exception as exc:
            return failed("evaluate", exc, raw, now, seen.run_id, None, seen.step, seen.event_type)

    def step(self, prior: TraceState | None, incoming: Incoming, now: float) -> Outcome:
        """Apply a read input to its run's state (`prior`: None for a run not in the table)."""
        try:
            outcome = self._step(prior, incoming, now)
        except Rejected as rej:
            return Refused(rej, incoming.raw, now, incoming.event_type, prior)
        except Exception as exc:
            return failed(
                "evaluate", exc, incoming.raw, now, incoming.run_id, prior, incoming.step, incoming.event_type
            )
        return outcome

    def seal(
        self,
        outcome: Outcome,
        answers: Sequence[etrace_rules.Answer] = (),
        source: dict[str, Any] | None = None,
        observe_only: frozenset[str] = frozenset(),
    ) -> Sealed:
        """Apply the store's answers to the queries the outcome must answer now (injections,
        call counts, the reason when the store could not answer), then encode the decision
        (as sent) and the state (as stored). `source`: where the input was read (topic,
        partition, offset), for the dead-letter record.

        Both encodings are capped (`limits.max_state_bytes`, `max_decision_bytes`), well under
        the broker's 1 MB per record: a state or a decision over its cap is the event's
        internal_error (stage `state_size`), and the run keeps its last good state (see
        `consumed`), so no input can make a record that the changelog or the steering topic
        would refuse.

        `observe_only`: the steering the guard has switched off for this run's org and
        experiment (`core.guard`; the caller asks the guard per event): a treatment run's
        decision is sent masked for it; the state evolves from the unmasked one."""
        outcomes: dict[str, str] = {}
        if isinstance(outcome, Decided) and outcome.effects.answer_now:
            try:
                outcome = _complete(outcome, answers, outcomes)
            except Exception as exc:
                outcome = _failed_from(outcome, "complete", exc)
        if observe_only and isinstance(outcome, Decided) and outcome.state.config.arm == "treatment":
            try:
                masked = guard.mask(outcome.decision, observe_only, outcome.state.config.model)
                outcome = replace(outcome, decision=masked)
            except Exception as exc:
                outcome = _failed_from(outcome, "guard", exc)
        try:
            return self._encode(outcome, outcomes, source)
        except OversizeError as exc:
            return self._encode(_failed_from(outcome, "state_size", exc), {}, source)
        except Exception as exc:
            return self._encode(_failed_from(outcome, "encode", exc), {}, source)

    def _encode(self, outcome: Outcome, outcomes: dict[str, str], source: dict[str, Any] | None) -> Sealed:
        limits = self.limits
        if isinstance(outcome, Refused):
            return _sealed_refusal(outcome, limits, source)
        inc = outcome.incoming
        if not isinstance(outcome, Decided):
            st, state_bytes = outcome.state, _capped_state(outcome.state, limits)
            head = (inc.run_id, inc.event_type, inc.step, outcome.now, outcome.prior, st, state_bytes)
            if isinstance(outcome, Duplicate):
                if outcome.resend is None:
                    return Sealed(*head, duplicate=True)
                resent: DecisionRecord = orjson.loads(outcome.resend)
                return Sealed(*head, decision=resent, decision_bytes=outcome.resend, duplicate=True)
            return Sealed(*head, finishes_run=True)
        sent, shadow = outcome.decision, None
        if outcome.state.config.arm == "control":  # last, so the worker and replay send the same
            sent, shadow = holdout.mask(sent, outcome.state.config.model), sent
        decision_bytes = orjson.dumps(sent)
        if len(decision_bytes) > limits.max_decision_bytes:
            raise OversizeError(
                f"decision would be {len(decision_bytes)} bytes > cap {limits.max_decision_bytes}"
            )
        # The state keeps the decision as sent, so a redelivered copy of the step re-sends it;
        # unless that alone would put the state over its cap (the copy then gets nothing).
        state = outcome.state.evolve(last_decision=decision_bytes.decode("utf-8"))
        state_bytes = state.encode()
        if len(state_bytes) > limits.max_state_bytes:
            state = outcome.state.evolve(last_decision=None)
            state_bytes = _capped_state(state, limits)
        effects = outcome.effects
        return Sealed(  # in one call: `replace` would run __init__ twice (~15 us a decision)
            inc.run_id,
            inc.event_type,
            inc.step,
            outcome.now,
            outcome.prior,
            state,
            state_bytes,
            decision=sent,
            decision_bytes=decision_bytes,
            shadow=shadow,
            transition=outcome.transition,
            etrace_outcomes=outcomes,
            prefetch=effects.prefetch,
            to_embed=effects.to_embed,
            opens_run=inc.event_type == "run_start",
        )

    def _step(self, prior: TraceState | None, inc: Incoming, now: float) -> Outcome:
        run_id, ev = inc.run_id, inc.event
        if inc.tenant is not None and prior is not None and prior.config.org_id != inc.tenant:
            if inc.event_type == "run_start":  # starting it would take the id: refused, and said
                raise Rejected("org_mismatch", ANOTHER_TENANTS_RUN, run_id, inc.step)
            # A step or finish reads another tenant's run as no run at all: the very answer an
            # unused id gets (unknown_run), so a tenant cannot probe which run ids exist.
            prior = None
        if inc.event_type == "run_start":
            if prior is not None:
                conflict = config_conflict(prior, ev, self.policy)
                if conflict is not None:
                    raise conflict
                return Duplicate(
                    inc,
                    prior,
                    _touched(prior.evolve(duplicates=prior.duplicates + 1), now),
                    now,
                    _resend(prior, 0) if prior.last_step == 0 else None,
                )
            return start_run(inc, now, self.limits, self.policy)
        if prior is None:
            raise Rejected("unknown_run", f"no run_start seen for run {run_id!r}", run_id, inc.step)
        if inc.event_type == "step":
            return apply_step(prior, inc, now, self.limits, self.policy, self.semantics)
        return finish_run(prior, inc, now)


def _touched(st: TraceState, now: float) -> TraceState:
    """`st` stamped with the processing time: retention's clock."""
    return st.evolve(updated_ts=now)


def _capped_state(st: TraceState, limits: Limits) -> bytes:
    state_bytes = st.encode()
    if len(state_bytes) > limits.max_state_bytes:
        raise OversizeError(f"run state would be {len(state_bytes)} bytes > cap {limits.max_state_bytes}")
    return state_bytes


def _resend(st: TraceState, step: int) -> bytes | None:
    """The bytes of the decision `st` holds for `step`, as first sent (None: it holds another
    step's, or none).

    A worker stores a run's new state in its local table right after sending the decision;
    both reach Kafka later, from the producer's buffer. Killed in between, a worker restarted
    on the same data directory finds the state already moved to the step while neither the
    decision nor the event's offset commit reached the broker: the redelivered event is a
    copy of the state's last step, and without this its decision would be lost. Re-sent
    byte for byte, so where the first copy did go out the agent's client drops the second
    as a duplicate."""
    text = st.last_decision
    if text is None:
        return None
    raw = text.encode("utf-8")
    if orjson.loads(raw).get("step") != step:
        return None  # the step's decision failed (internal_error: `consumed`) after this one
    return raw


def _sealed_refusal(out: Refused, limits: Limits, source: dict[str, Any] | None) -> Sealed:
    rej = out.rejection
    state, state_bytes = out.state, None
    try:
        state_bytes = None if state is None else state.encode()
        if state_bytes is not None and len(state_bytes) > limits.max_state_bytes:
            state, state_bytes = None, None  # a state from before the caps: keep what is stored
    except Exception:
        state, state_bytes = None, None
    return Sealed(
        rej.run_id,
        out.event_type,
        rej.step,
        out.now,
        out.prior,
        state,
        state_bytes,
        rejection=rej,
        deadletter=deadletter_record(out.raw, rej, limits, out.now, source),
        failed_stage=out.failed_stage,
        error=out.error,
    )


def consumed(
    prior: TraceState | None, event_type: str | None, step: int | None, now: float | None
) -> TraceState | None:
    """The state a run keeps when its event's result could not be produced: the state it had,
    except that a step's number is used up. Its next step is then answered (not out_of_order)
    and a re-sent copy of the failed step is a duplicate. None: store nothing."""
    if prior is None or event_type != "step" or step is None or prior.finished:
        return None
    if step != prior.last_step + 1:
        return None
    return prior.evolve(last_step=step, updated_ts=now)


def failed(
    stage: str,
    exc: BaseException,
    raw: Raw,
    now: float,
    run_id: str | None,
    prior: TraceState | None,
    step: int | None,
    event_type: str | None,
) -> Refused:
    """An internal_error refusal: the stage, the exception type and message, the fallback state."""
    detail = f"{stage}: {describe(exc)}"
    try:
        state = consumed(prior, event_type, step, now)
    except Exception:  # the fallback itself must not raise
        state = None
    return Refused(
        Rejected("internal_error", detail, run_id, step),
        raw,
        now,
        event_type,
        prior,
        state,
        failed_stage=stage,
        error=exc,
    )


def describe(exc: BaseException) -> str:
    """`Type: message`, cut short; never raises (an exception's __str__ may)."""
    try:
        msg = str(exc)
    except Exception:
        msg = "(message unavailable)"
    return f"{type(exc).__name__}: {msg[:300]}"


def _failed_from(outcome: Outcome, stage: str, exc: BaseException) -> Refused:
    if isinstance(outcome, Refused):
        return failed(
            stage,
            exc,
            outcome.raw,
            outcome.now,
            outcome.rejection.run_id,
            outcome.prior,
            outcome.rejection.step,
            outcome.event_type,
        )
    inc = outcome.incoming
    return failed(stage, exc, inc.raw, outcome.now, inc.run_id, outcome.prior, inc.step, inc.event_type)


def empty_monitors() -> MonitorsWire:
    return {"scores": {}, "fired": [], "composite": 0.0, "failure_type": None}


def _decision(
    st: TraceState,
    step: int,
    previous: FSMState | None,
    difficulty: float | None,
    source: DifficultySource | None,
    event_ts: float | None,
    now: float,
    skipped_reason: str | None,
    routed: routing.Routed | None = None,
) -> DecisionRecord:
    """The one place a decision is built: every field, with what this step leaves unset."""
    state = st.state
    if routed is not None:  # a run with model_routing: the cache-aware rule (core.routing)
        model = routed.model
    else:
        model = st.config.model_routing.get(state.value) if state in STATES_WITH_ROUTING else None
    d: DecisionRecord = {
        "type": "decision",
        "schema_version": SCHEMA_VERSION,
        "run_id": st.run_id,
        "step": step,
        "fsm_state": state.value,
        "previous_state": None if previous is None else previous.value,
        "difficulty": difficulty,
        "difficulty_source": source,
        "model": model,
        "inject": False,
        "injection_text": None,
        "injections": [],
        "monitors": empty_monitors(),
        "suppressed": None,
        "action": "continue",
        "action_reason": None,
        "skipped_reason": skipped_reason,
        "tokens_used": st.tokens_used,
        "token_budget": st.config.token_budget,
        "budget_used": st.budget_used,
        "event_ts": event_ts,
        "processed_ts": now,
    }
    if routed is not None:
        d["routing_reason"] = routed.reason
    if st.config.arm is not None:  # a run in an experiment: every decision names its arm
        d["arm"] = "control" if st.config.arm == "control" else "treatment"
    return d


LOG_SCORE_DIGITS = 4  # the step log's monitor scores: for a person reading /runs/{id}/steps


def log_entry(d: DecisionRecord, names: Sequence[str] = ()) -> list[Any]:
    """A decision as the run's step log keeps it (positional: a run keeps 20 of these). The
    monitor scores are a list of values when they are the run's `log_score_names`, in that
    order (20 entries of seven named scores were a fifth of the state); else a dict."""
    scores = d["monitors"]["scores"]
    kept: list[float] | dict[str, float]
    if len(scores) == len(names) and all(a == b for a, b in zip(scores, names, strict=True)):
        kept = [round(v, LOG_SCORE_DIGITS) for v in scores.values()]
    else:
        kept = {k: round(v, LOG_SCORE_DIGITS) for k, v in scores.items()}
    return [
        d["step"],
        d["fsm_state"],
        d["difficulty"],
        d["model"],
        [i["source"] for i in d["injections"]],
        list(d["monitors"]["fired"]),
        d["suppressed"],
        d["processed_ts"],
        kept,
        d["skipped_reason"],
    ]


def _with_log(st: TraceState, decision: DecisionRecord, kept: int) -> TraceState:
    if kept <= 0:
        return st.evolve(step_log=[])
    tail = st.step_log[-(kept - 1) :] if kept > 1 else []
    names = st.log_score_names
    if not names:  # the run's first entry (or a state written before): its names are the run's
        names = list(decision["monitors"]["scores"])
        return st.evolve(step_log=[*tail, log_entry(decision, names)], log_score_names=names)
    return st.evolve(step_log=[*tail, log_entry(decision, names)])


def run_config(ev: dict[str, Any], policy: Policy) -> RunConfig:
    """What a run_start fixes for the run's lifetime, or Rejected."""
    run_id = ev["run_id"]
    try:
        params = validate_params(ev.get("fsm_thresholds"))
    except ValueError as exc:
        raise Rejected("invalid_fsm_thresholds", str(exc), run_id) from None
    transition = ev.get("fsm_transition") or "default"
    scorer = ev.get("scorer") or DEFAULT_SCORER
    try:
        policy.transition(transition)
        policy.scorer(scorer)
        weights = policy.weights(ev.get("task_profile") or "coding", ev.get("monitor_weights"))
    except ValueError as exc:
        raise Rejected("invalid_config", str(exc), run_id) from None
    org_id = ev.get("org_id") or "default"
    known = policy.monitor_names
    try:
        check_weight_names(ev.get("monitor_weights"), known)
        # the run's own settings, else its org's defaults (RB_ORG_MONITOR_DEFAULTS), else the
        # deployment's (RB_MONITOR_DEFAULTS)
        md = policy.escalation.monitors_for_org(org_id)
        raw_off, raw_levels = ev.get("monitors_off"), ev.get("monitor_thresholds")
        if raw_off is None and md.monitors_off is not None:
            raw_off = list(md.monitors_off)
        if raw_levels is None and md.monitor_thresholds is not None:
            raw_levels = dict(md.monitor_thresholds)
        monitors_off = parse_monitors_off(raw_off, known)
        thresholds = parse_thresholds(raw_levels, known)
        escalation = resolve_escalation(ev.get("escalation"), org_id, policy.escalation)
        exp = policy.experiments.resolve(ev.get("experiment"), org_id)
    except (InvalidRunSettings, holdout.InvalidExperiment) as exc:
        raise Rejected("invalid_run_start", str(exc), run_id) from None
    task = ev.get("task")
    return RunConfig(
        org_id=org_id,
        project_id=ev.get("project_id"),
        agent_name=ev.get("agent_name"),
        task=task[:TASK_CHARS_KEPT] if isinstance(task, str) else None,
        framework=ev.get("framework"),
        model=ev.get("model"),
        task_profile=ev.get("task_profile") or "coding",
        # stored cleaned (known monitors only): a producer's 14,000 junk keys stay out of the state
        monitor_weights=_given_weights(ev.get("monitor_weights"), policy),
        weights=weights,
        model_routing=dict(ev.get("model_routing") or {}),
        token_budget=ev.get("token_budget"),
        e_traces_enabled=ev.get("e_traces_enabled", True),
        monitors_enabled=ev.get("monitors_enabled", True),
        fsm={k: getattr(params, k) for k in (ev.get("fsm_thresholds") or {})},
        fsm_transition=transition,
        scorer=scorer,
        monitors_off=monitors_off,
        monitor_thresholds=thresholds,
        escalation=None if escalation is None else escalation.to_wire(),
        cross_provider_tool_switch=bool(ev.get("cross_provider_tool_switch", False)),
        wait_budget=_wait_budget(policy.escalation.wait_for_org(org_id)),
        experiment=None if exp is None else exp.name,
        arm=None if exp is None else holdout.assign_arm(org_id, exp, run_id),
    )


def _wait_budget(b: WaitBudget) -> dict[str, Any] | None:
    """The run config's wait budget: None for the built-in one (a config stored as before)."""
    return None if b == DEFAULT_BUDGET else b.to_wire()


@functools.lru_cache(maxsize=64)
def _budget_of(seconds: float, calls: int, usd: float) -> WaitBudget:
    return WaitBudget(seconds, calls, usd)


def _given_weights(raw: Any, policy: Policy) -> dict[str, float] | None:
    return None if raw is None else clean_weights(raw, policy.monitor_names)


# Compared when a run_start repeats: `weights` is resolved from task_profile and
# monitor_weights (compared themselves), so a profile reloaded since does not count.
_CONFIG_FIELDS = tuple(f.name for f in fields(RunConfig) if f.name != "weights")


_EVENT_KEY = {"fsm": "fsm_thresholds"}  # RunConfig field -> the run_start key it comes from


def config_conflict(st: TraceState, ev: dict[str, Any], policy: Policy) -> Rejected | None:
    """A repeated run_start whose config differs from the run's: reported, never applied."""
    try:
        cfg = run_config(ev, policy)
    except Rejected as rej:
        return Rejected(
            "config_conflict", f"run_start repeated with an invalid config ({rej.detail})", st.run_id
        )
    # Only what the repeated run_start states is compared: a field it leaves out takes today's
    # default, which may not be the default the run started with (the scorer's, after an upgrade).
    given = {_EVENT_KEY.get(n, n) for n in _CONFIG_FIELDS} & set(ev)
    diff = [
        n
        for n in _CONFIG_FIELDS
        if _EVENT_KEY.get(n, n) in given and getattr(cfg, n) != getattr(st.config, n)
    ]
    if not diff:
        return None
    return Rejected(
        "config_conflict",
        f"run_start repeated with a different config ({', '.join(diff)}); the run keeps its first config",
        st.run_id,
    )


def start_run(inc: Incoming, now: float, limits: Limits, policy: Policy) -> Decided:
    cfg = run_config(inc.event, policy)
    ts = inc.event.get("ts")
    mem = routing.start(cfg.model, cfg.task, ts) if routing.enabled(cfg.model_routing) else None
    st = TraceState(
        run_id=inc.run_id, config=cfg, started_ts=ts, last_event_ts=ts, updated_ts=now, routing=mem
    )
    routed = None if mem is None else routing.Routed(None, "none", routing.INIT_REASON)
    decision = _decision(st, 0, None, None, None, ts, now, None, routed)
    plan = etrace_rules.plan_first_call(
        st.e3_calls, cfg.e_traces_enabled, etrace_rules.model_family(cfg.model)
    )
    st = st.evolve(**count_decision(None, st, decision))
    return Decided(
        inc, None, _with_log(st, decision, limits.step_log_kept), decision, now, Effects(plan or None)
    )


def apply_step(
    st: TraceState, inc: Incoming, now: float, limits: Limits, policy: Policy, sem: Semantics | None = None
) -> Outcome:
    run_id, ev = st.run_id, inc.event
    step = ev["step"]
    if step <= st.last_step:  # a copy (finished runs too: a restart from an old commit reads many)
        resend = _resend(st, step) if step == st.last_step else None
        return Duplicate(inc, st, _touched(st.evolve(duplicates=st.duplicates + 1), now), now, resend)
    if st.finished:
        raise Rejected("run_finished", f"run finished with outcome {st.outcome!r}", run_id, step)
    if step != st.last_step + 1:
        raise Rejected("out_of_order", f"expected step {st.last_step + 1}, got {step}", run_id, step)

    cfg = st.config
    params = cfg.fsm_params()
    supplied = ev.get("difficulty")
    # One reading of the step, for the scorer and the monitors alike.
    features = extract(ev, limits.max_thought_chars)
    # The scorer sees every step, so its memory is current when an agent stops supplying one.
    scored, scorer_state = policy.scorer(cfg.scorer)(features, st.scorer_state)
    source: DifficultySource
    if supplied is not None:
        difficulty, source = clamp01(float(supplied)), "agent"
    else:
        difficulty, source = scored, "scorer"

    previous = st.state
    history = st.history
    if previous is not FSMState.END:
        history = ([*history, difficulty])[-params.max_window :]
        new_state = FSMState(policy.transition(cfg.fsm_transition)(previous, history, params))
    else:
        new_state = previous
    tokens = ev.get("tokens") or 0
    ts = ev.get("ts")
    pending = [etrace_rules.Query.from_wire(q) for q in st.etraces_pending]
    new = st.evolve(
        state=new_state,
        history=history,
        scorer_state=scorer_state,
        last_step=step,
        scored_steps=st.scored_steps + 1,
        tokens_used=min(TOKENS_MAX, st.tokens_used + tokens),  # saturates: never past 2**53
        last_event_ts=ts if ts is not None else st.last_event_ts,
        etraces_pending=[],
        updated_ts=now,
        **count_call(st, ev, policy.prices),
    )
    skipped = None
    if new_state is FSMState.END:
        skipped = "FSM=END, run terminal"
    elif new_state is FSMState.FAST:
        skipped = "FSM=FAST, e-traces skipped"
    routed = None
    if st.routing is not None:  # which model the new state's decision names (core.routing)
        mem = routing.observe(st.routing, ev, cfg.model_routing, cfg.model, policy.prices)
        routed, mem = routing.route(
            mem,
            new_state.value,
            ev,
            cfg.model_routing,
            cfg.model,
            policy.prices,
            cfg.cross_provider_tool_switch,
        )
        new = new.evolve(routing=mem)
    decision = _decision(new, step, previous, difficulty, source, ts, now, skipped, routed)
    fired_before = list(st.recent_fired)
    to_embed: tuple[str, ...] = ()
    if cfg.monitors_enabled and new_state in MONITORED_STATES:
        new = _run_monitors(new, features, decision, sem, policy)
        to_embed = tuple(monitors_to_embed(new.monitors, policy.monitors))
        prov = new.monitors.get(data_instruction.KEY)
        taint = provenance.wire(prov)
        if taint:  # values tool results introduced, for the agent side's pre-call gate
            decision["taint"] = taint
        sanctioned = provenance.wire_sanctioned(prov)
        if sanctioned:  # results the user's order to follow a source made the user's
            decision["sanctioned"] = sanctioned
    _apply_rung(st, new, decision)
    if routed is not None and new.routing is not None:  # the escalation ladder may name another
        home = routing.home_of(cfg.model_routing, cfg.model)
        settled, mem = routing.settle(new.routing, decision["model"], routed, home)
        if settled is not routed:
            decision["routing_reason"] = settled.reason
            new = new.evolve(routing=mem)
    told = new.monitor_injections > st.monitor_injections  # a monitor text placed on this step
    new = compliance.observe(new, features, decision, told)  # the shadow's, on a control run
    new, prefetch = _plan_etraces(new, ev, decision, fired_before, [q.tier for q in pending])
    if prefetch:
        new = new.evolve(etraces_pending=[q.to_wire() for q in prefetch.queries])
        reason = etrace_rules.deferred_reason(prefetch.queries)
        decision["skipped_reason"] = f"{skipped}; {reason}" if skipped else reason
    # The queries planned on the step before are answered now, for this decision (the call
    # they steer is the next one either way), unless the run just became terminal.
    answer_now = None
    if pending and new_state is not FSMState.END:
        answer_now = etrace_rules.Plan(
            tuple(pending), etrace_rules.model_family(decision["model"] or cfg.model)
        )
    new = new.evolve(**count_decision(st, new, decision))
    return Decided(
        inc,
        st,
        _with_log(new, decision, limits.step_log_kept),
        decision,
        now,
        Effects(answer_now, prefetch or None, to_embed),
        (previous.value, new_state.value) if previous is not new_state else None,
    )


def _plan_etraces(
    st: TraceState,
    ev: dict[str, Any],
    decision: DecisionRecord,
    fired_before: list[list[str]],
    pending: list[str],
) -> tuple[TraceState, etrace_rules.Plan]:
    """Keep the thought window while a tier may still be called, and plan this step's queries
    (none for a tier still `pending`)."""
    cfg = st.config
    wanted = cfg.e_traces_enabled and (
        st.e1_calls < etrace_rules.CALLS_PER_RUN or st.e2_calls < etrace_rules.CALLS_PER_RUN
    )
    thoughts = etrace_rules.remember_thought(st.recent_thoughts, ev.get("thought")) if wanted else []
    st = st.evolve(recent_thoughts=thoughts)
    if not wanted:
        return st, etrace_rules.Plan()
    mon = decision["monitors"]
    gate = etrace_rules.e1_gate_open(cfg.monitors_enabled, mon["fired"], mon["composite"], fired_before)
    return st, etrace_rules.plan_step(
        enabled=True,
        fsm_state=st.state,
        org_id=cfg.org_id,
        thoughts=st.recent_thoughts,
        e1_calls=st.e1_calls,
        e2_calls=st.e2_calls,
        gate_open=gate,
        failure_type=mon["failure_type"],
        family=etrace_rules.model_family(decision["model"] or cfg.model),
        pending=pending,
    )


def _complete(out: Decided, answers: Sequence[etrace_rules.Answer], outcomes: dict[str, str]) -> Decided:
    """The decision and state with the store's answers applied (new objects: `out` is not
    changed); `outcomes` gets each tier's hit, miss or error."""
    plan = out.effects.answer_now
    assert plan is not None
    st = out.state
    d: DecisionRecord = {**out.decision}
    by_tier = {a.tier: a for a in answers}
    errors: dict[str, str] = {}
    added: list[Injection] = []
    for q in plan.queries:
        a = by_tier.get(q.tier)
        if a is None or a.error is not None:
            errors[q.tier] = a.error if a is not None and a.error else "not answered"
            outcomes[q.tier] = "error"
            continue
        st = st.with_etrace_call(q.tier)
        chosen = etrace_rules.select(q, a.hits, plan.family)
        outcomes[q.tier] = "hit" if chosen else "miss"
        added.extend(etrace_rules.injections_for(q, chosen, plan.family))
    if added:
        counts = dict(st.injections_by_source)
        for inj in added:
            counts[inj["source"]] = counts.get(inj["source"], 0) + 1
        st = st.evolve(injections_by_source=counts)
        d["injections"] = [*d["injections"], *added]
        d["inject"] = True
        d["injection_text"] = render_block(d["injections"])
    if errors:
        reason = etrace_rules.failure_reason(errors)
        d["skipped_reason"] = f"{d['skipped_reason']}; {reason}" if d["skipped_reason"] else reason
    if st.e1_calls >= etrace_rules.CALLS_PER_RUN and st.e2_calls >= etrace_rules.CALLS_PER_RUN:
        st = st.evolve(recent_thoughts=[])
    if st.step_log and st.step_log[-1][0] == d["step"]:
        st = st.evolve(step_log=[*st.step_log[:-1], log_entry(d, st.log_score_names)])
    return replace(out, state=st, decision=d, effects=replace(out.effects, answer_now=None))


def _run_monitors(
    st: TraceState, features: StepFeatures, decision: DecisionRecord, sem: Semantics | None, policy: Policy
) -> TraceState:
    """Monitors, then the injection guardrails: the new state; fills in `decision` (this
    step's own, not yet given to anyone)."""
    if sem is None:
        raise ValueError("monitors are enabled but no Semantics (embedders) was given to the engine")
    cfg = st.config
    monitors, res = evaluate_monitors(
        st.monitors,
        features,
        cfg.weights,
        cfg.task,
        sem,
        policy.monitors,
        cfg.monitors_off,
        cfg.monitor_thresholds,
        None if cfg.wait_budget is None else _budget_of(**cfg.wait_budget),
        policy.prices.get(cfg.model),
    )
    decision["monitors"] = res.as_wire()
    # fired lists of this step and the one before
    st = st.evolve(monitors=monitors, recent_fired=[*st.recent_fired[-1:], res.fired])
    step = decision["step"]
    pol = ladder.policy_of(cfg.escalation)
    if pol is not None and st.rung in ("escalate", "stop") and features.action:
        st = _progress(st, pol, features, bool(res.fired), decision)
    if st.rung == "stop":
        return st  # a stopped run gets the stop again (`_apply_rung`), nothing else
    # The ladder (core.ladder): did this step ignore a warning an earlier decision carried?
    ignored: ladder.Ignored | None = None
    types = _failure_types(policy)
    # the warnings that can climb this run's ladder (the default's: exact repeats, calls that
    # never ran, unchanged waits past their budget, tainted calls); the others only nudge
    said = (
        tuple((n, t) for n, t in res.said if pol.counts(types.get(n, n), res.kinds.get(n, "")))
        if pol is not None
        else res.said
    )
    if pol is not None:
        call = ladder.call_key(features.sig) if features.action else None
        if st.warnings and not res.final:
            ignored, pending = ladder.judge(st.warnings, said, step, call)
            st = st.evolve(warnings=pending)
        if call is not None:
            st = st.evolve(recent_calls=[*st.recent_calls[1 - ladder.CALLS_KEPT :], call])
    if not res.fired or res.text is None:
        return st
    # A call that carries a value from a result that held instructions (issue 42): the ladder
    # climbs at once, to its first rung past the nudge, naming the value's source step.
    hijack = None
    if pol is not None and data_instruction.NAME in res.fired and pol.counts(data_instruction.FAILURE_TYPE):
        hijack = data_instruction.hijack(monitors.get(data_instruction.KEY), step)
        if hijack is not None:
            ignored = ladder.Ignored(data_instruction.NAME, data_instruction.FAILURE_TYPE, hijack[0], "")
    text, climbed = res.text, False
    if pol is not None and ignored is not None:
        count = st.ignored + 1 if hijack is None else max(st.ignored + 1, data_instruction.climb_to(pol))
        steps = [*st.ignored_steps, [ignored.warned_at, step]][-ladder.STEPS_KEPT :]
        lead = not features.agent or features.agent == monitors.get(LEAD)
        rung = ladder.next_rung(pol, count, st.rung, lead and not could_not_run(features.observation))
        climbed = rung != st.rung and rung in ("escalate", "stop")
        model = ladder.escalation_model(pol, cfg.model_routing)
        if hijack is None:
            why = ladder.reason(ignored, count, steps, rung, model)
        else:
            why = data_instruction.reason(features.action_label, step, hijack, count, rung, model)
        st = st.evolve(
            ignored=count,
            ignored_steps=steps,
            rung=rung,
            rung_reason=why if climbed else st.rung_reason,
            quiet=0,
            rung_call=[
                ladder.call_key(features.sig),
                ladder.result_key(features.obs_hash, features.is_error),
            ],
        )
        text = f"{ladder.injection(rung if climbed else 'nudge', why, ignored)}\n\n{res.text}"
    if ignored is not None:
        # the ladder's own: past cooldown, duplicate and the cap (a loop that goes on after five
        # warnings is still told, warning by warning, as it climbs or stays on its rung)
        held = None
    else:
        held = hold_back(
            st.state,
            step,
            res.text,
            st.monitor_injections,
            st.last_monitor_injection_step,
            st.last_monitor_injection_text,
            final=res.final,
        )
    if held is not None:
        decision["suppressed"] = held
        return st
    st = st.evolve(
        monitor_injections=st.monitor_injections + 1,
        last_monitor_injection_step=step,
        last_monitor_injection_text=res.text,
        injections_by_source={
            **st.injections_by_source,
            "monitor": st.injections_by_source.get("monitor", 0) + 1,
        },
        rung=ladder.higher(st.rung, "nudge"),
    )
    if pol is not None:
        st = st.evolve(warnings=ladder.warn(st.warnings, said, types, step, st.recent_calls))
    injection: Injection = {"source": "monitor", "text": text, "pattern_id": None, "similarity": None}
    decision["injections"] = [*decision["injections"], injection]
    decision["inject"] = True
    decision["injection_text"] = render_block(decision["injections"])
    decision["action"] = "nudge"
    return st


def _progress(
    st: TraceState,
    pol: ladder.EscalationPolicy,
    features: StepFeatures,
    fired: bool,
    decision: DecisionRecord,
) -> TraceState:
    """A call on the escalate or stop rung: the rung comes down one when it shows progress
    (`ladder.progress`), and a stop that no longer holds says so in this decision."""
    p = ladder.progress(
        pol,
        st.rung,
        st.ignored,
        st.quiet,
        st.rung_call,
        ladder.call_key(features.sig),
        ladder.result_key(features.obs_hash, features.is_error),
        fired,
    )
    if p.how is None:
        return st.evolve(quiet=p.quiet)
    step = decision["step"]
    why = ladder.lowered(st.rung_reason, p, st.ignored_steps, step)
    kept = st.ignored_steps[-p.ignored :] if p.ignored else []
    if st.rung == "stop":
        text = ladder.lifted(step, p.how)
        injection: Injection = {"source": "monitor", "text": text, "pattern_id": None, "similarity": None}
        decision["injections"] = [*decision["injections"], injection]
        decision["inject"] = True
        decision["injection_text"] = render_block(decision["injections"])
        decision["action"] = "nudge"
    return st.evolve(
        rung=p.rung,
        ignored=p.ignored,
        ignored_steps=kept,
        quiet=0,
        rung_call=[],
        rung_reason=why,
        warnings=[],
    )


def _failure_types(policy: Policy) -> dict[str, str]:
    return {m.name: m.failure_type for m in policy.monitors}


def _apply_rung(prior: TraceState, st: TraceState, decision: DecisionRecord) -> None:
    """A run on the escalate or stop rung: every decision says so and routes to the escalation
    model (a stop too, when the policy escalates), and a stop repeats its text: the rung
    comes down only when the run makes progress (`_progress`)."""
    if st.rung not in ("escalate", "stop") or st.rung_reason is None or st.config.escalation is None:
        return
    why = st.rung_reason
    decision["action"] = "stop" if st.rung == "stop" else "escalate"
    decision["action_reason"] = {**why, "steps": list(why["steps"])}  # type: ignore[typeddict-item]
    pol = ladder.parse_escalation(st.config.escalation)
    model = ladder.escalation_model(pol, st.config.model_routing)
    if model and (st.rung == "escalate" or pol.escalate_model_after is not None):
        decision["model"] = model  # a stop's last answer comes from the escalation model too
    if st.rung == "stop" and prior.rung == "stop":  # the stop step itself carries its text already
        text = ladder.injection("stop", why, None)
        injection: Injection = {"source": "monitor", "text": text, "pattern_id": None, "similarity": None}
        decision["injections"] = [*decision["injections"], injection]
        decision["inject"] = True
        decision["injection_text"] = render_block(decision["injections"])


def finish_run(st: TraceState, inc: Incoming, now: float) -> Outcome:
    if st.finished:
        return Duplicate(inc, st, _touched(st.evolve(duplicates=st.duplicates + 1), now), now)
    ts = inc.event.get("ts")
    new = compliance.finish(st).evolve(
        finished=True,
        outcome=inc.event["outcome"],
        last_event_ts=ts if ts is not None else st.last_event_ts,
        updated_ts=now,
    )
    return Finished(inc, st, new, now)


class OversizeError(ValueError):
    """An encoded state or decision over its cap (the message says which, and by how much)."""


ANOTHER_TENANTS_RUN = "this run id belongs to a run another tenant started; use a run id of your own"


def evict_refusal(st: TraceState | None, tenant: str | None) -> str | None:
    """Why an eviction record on a tenant's topic is refused: it names another tenant's run."""
    if tenant is not None and st is not None and st.config.org_id != tenant:
        return ANOTHER_TENANTS_RUN
    return None


def check_claim(ev: dict[str, Any], tenant: str, step: int | None) -> None:
    """An event on a tenant's topic speaks for that tenant only: an `org_id` naming another org
    is refused (org_mismatch), never trusted."""
    claimed = ev.get("org_id")
    # decoding fills the schema's default ("default") in: no claim, and the tenant's org anyway
    if claimed not in (None, "default", tenant):
        raise Rejected(
            "org_mismatch",
            f"the event claims org_id {str(claimed)[:100]!r} on tenant {tenant!r}'s topic; a tenant's "
            "events belong to its own org (leave org_id out)",
            ev["run_id"],
            step,
        )


@dataclass
class _Seen:
    """What `_read` learnt before a failure, for the fallback."""

    run_id: str | None = None
    event_type: str | None = None
    step: int | None = None


def _read(raw: Raw, limits: Limits, key: object, tenant: str | None, seen: _Seen) -> Incoming:
    ev = decode(raw, limits)
    run_id = ev["run_id"]
    etype = ev["type"]
    step = ev.get("step")
    seen.run_id, seen.event_type = run_id, etype
    seen.step = step if type(step) is int else None
    if key is not NO_KEY and key != run_id.encode("utf-8"):
        # A run's state lives with the partition its key maps to: events keyed otherwise
        # would split it, so they are refused (before the lookup, which would miss).
        shown = "no key" if key is None else f"key {key[:100]!r}" if isinstance(key, bytes) else "a key"
        raise Rejected(
            "key_mismatch",
            f"message has {shown}, expected the run_id; events must be keyed by run_id",
            run_id,
            seen.step,
        )
    if tenant is not None:
        check_claim(ev, tenant, seen.step)
        if etype == "run_start":
            ev = {**ev, "org_id": tenant}
    return Incoming(raw, ev, run_id, etype, seen.step, tenant)
