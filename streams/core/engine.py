"""Run-state transitions: (state, event) -> (state, decision). The one code path that both
the Faust worker and `rb-streams replay` run, which is why their decisions are identical.

Total: `handle`, `complete` and `seal` never raise. Whatever fails inside them (a bug, an
encoder meeting a value it cannot hold) becomes an `internal_error` rejection naming the stage
and the exception, and the run keeps a consistent state: the one it had, except that a step's
number is used up (`consumed`), so the run's next step is answered normally. Because the
fallback is computed here, the worker and replay agree on it too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import orjson

from . import etraces
from .decision import Decision, DifficultySource, Injection, MonitorsWire
from .difficulty import DEFAULT_SCORER, clamp01, get_step_scorer
from .events import SCHEMA_VERSION, TOKENS_MAX, Limits, Rejected, decode
from .fsm import FSMState, get_transition, validate_params
from .monitors import Semantics, clean_weights, extract, hold_back, resolve_weights
from .monitors import evaluate as evaluate_monitors
from .monitors import to_embed as monitors_to_embed
from .render import render_block
from .state import TASK_CHARS_KEPT, RunConfig, TraceState

STATES_WITH_ROUTING = ("FAST", "NORMAL", "SLOW", "SKIP")
MONITORED_STATES = STATES_WITH_ROUTING  # monitors run in these, never in INIT/END


@dataclass
class Result:
    """What one input did. Exactly one of decision / rejection / (duplicate or finish) is set."""

    run_id: str | None
    state: TraceState | None = None  # new state to store (None: store unchanged)
    decision: Decision | None = None
    rejection: Rejected | None = None
    duplicate: bool = False
    event_type: str | None = None
    transition: tuple[str, str] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    # E-trace queries the adapter must answer (`complete`) before the decision goes out: E3
    # on the first call, and the E1/E2 queries the run's previous step planned.
    plan: etraces.Plan | None = None
    # E1/E2 queries this step planned (kept in the state as pending): the adapter may start
    # them now, in the background, so the next decision finds them answered.
    prefetch: etraces.Plan | None = None
    # Texts the run's next step embeds with the full model (a drift check this step planned):
    # the adapter may embed them now, in the background, into the embedder's cache.
    to_embed: tuple[str, ...] = ()
    prior: TraceState | None = None  # the run's state before this event (None: new or unknown)
    step: int | None = None  # the step number a step event carries
    now: float | None = None  # the processing time `handle` was given
    # With an internal_error rejection: the stage that failed and the exception.
    failed_stage: str | None = None
    error: BaseException | None = None
    # Set by `seal`: the decision as sent and the state as stored.
    wire_decision: bytes | None = None
    wire_state: bytes | None = None

    @property
    def opens_run(self) -> bool:
        """A run_start that creates its run (not a duplicate, not refused)."""
        return (
            self.event_type == "run_start"
            and self.rejection is None
            and not self.duplicate
            and self.state is not None
        )


NO_KEY = object()  # `handle(key=...)` default: the input came without a message key (replay)
RunsCap = Callable[[str, str], str | None]  # (org_id, run_id) -> why a new run is refused, or None


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
    st = replace(prior, last_step=step)
    st.updated_ts = now
    return st


def failed(
    stage: str,
    exc: BaseException,
    run_id: str | None,
    prior: TraceState | None,
    step: int | None,
    event_type: str | None,
    now: float | None,
) -> Result:
    """An internal_error result: the stage, the exception type and message, the fallback state."""
    detail = f"{stage}: {describe(exc)}"
    try:
        state = consumed(prior, event_type, step, now)
    except Exception:  # the fallback itself must not raise
        state = None
    return Result(
        run_id,
        state=state,
        rejection=Rejected("internal_error", detail, run_id, step),
        event_type=event_type,
        prior=prior,
        step=step,
        now=now,
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


def _failed_from(result: Result, stage: str, exc: BaseException) -> Result:
    return failed(stage, exc, result.run_id, result.prior, result.step, result.event_type, result.now)


def empty_monitors() -> MonitorsWire:
    return {"scores": {}, "fired": [], "composite": 0.0, "failure_type": None}


def _decision(
    st: TraceState,
    step: int,
    previous: str | None,
    difficulty: float | None,
    source: DifficultySource | None,
    event_ts: float | None,
    now: float,
    skipped_reason: str | None,
) -> Decision:
    """The one place a decision is built: every field, with what this step leaves unset."""
    state = st.state
    model = st.config.model_routing.get(state) if state in STATES_WITH_ROUTING else None
    return {
        "type": "decision",
        "schema_version": SCHEMA_VERSION,
        "run_id": st.run_id,
        "step": step,
        "fsm_state": state,
        "previous_state": previous,
        "difficulty": difficulty,
        "difficulty_source": source,
        "model": model,
        "inject": False,
        "injection_text": None,
        "injections": [],
        "monitors": empty_monitors(),
        "suppressed": None,
        "skipped_reason": skipped_reason,
        "tokens_used": st.tokens_used,
        "token_budget": st.config.token_budget,
        "budget_used": st.budget_used,
        "event_ts": event_ts,
        "processed_ts": now,
    }


def log_entry(d: Decision) -> list[Any]:
    return [
        d["step"],
        d["fsm_state"],
        d["difficulty"],
        d["model"],
        [i["source"] for i in d["injections"]],
        list(d["monitors"]["fired"]),
        d["suppressed"],
        d["processed_ts"],
    ]


def _with_log(st: TraceState, decision: Decision, kept: int) -> TraceState:
    tail = st.step_log[-(kept - 1) :] if kept > 1 else []
    st.step_log = [*tail, log_entry(decision)] if kept > 0 else []
    return st


def run_config(ev: dict[str, Any]) -> RunConfig:
    """What a run_start fixes for the run's lifetime, or Rejected."""
    run_id = ev["run_id"]
    try:
        params = validate_params(ev.get("fsm_thresholds"))
    except ValueError as exc:
        raise Rejected("invalid_fsm_thresholds", str(exc), run_id) from None
    transition = ev.get("fsm_transition") or "default"
    scorer = ev.get("scorer") or DEFAULT_SCORER
    try:
        get_transition(transition)
        get_step_scorer(scorer)
        weights = resolve_weights(ev.get("task_profile") or "coding", ev.get("monitor_weights"))
    except ValueError as exc:
        raise Rejected("invalid_config", str(exc), run_id) from None
    task = ev.get("task")
    cfg = RunConfig(
        org_id=ev.get("org_id") or "default",
        project_id=ev.get("project_id"),
        agent_name=ev.get("agent_name"),
        task=task[:TASK_CHARS_KEPT] if isinstance(task, str) else None,
        framework=ev.get("framework"),
        model=ev.get("model"),
        task_profile=ev.get("task_profile") or "coding",
        # stored cleaned (known monitors only): a producer's 14,000 junk keys stay out of the state
        monitor_weights=_given_weights(ev.get("monitor_weights")),
        weights=weights,
        model_routing=dict(ev.get("model_routing") or {}),
        token_budget=ev.get("token_budget"),
        e_traces_enabled=ev.get("e_traces_enabled", True),
        monitors_enabled=ev.get("monitors_enabled", True),
        fsm={k: getattr(params, k) for k in (ev.get("fsm_thresholds") or {})},
        fsm_transition=transition,
        scorer=scorer,
    )
    return cfg


def _given_weights(raw: Any) -> dict[str, float] | None:
    return None if raw is None else clean_weights(raw)


# Compared when a run_start repeats: `weights` is resolved from task_profile and
# monitor_weights (compared themselves), so a profile reloaded since does not count.
_CONFIG_FIELDS = tuple(f.name for f in fields(RunConfig) if f.name != "weights")


_EVENT_KEY = {"fsm": "fsm_thresholds"}  # RunConfig field -> the run_start key it comes from


def config_conflict(st: TraceState, ev: dict[str, Any]) -> Rejected | None:
    """A repeated run_start whose config differs from the run's: reported, never applied."""
    try:
        cfg = run_config(ev)
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


def start_run(ev: dict[str, Any], now: float, limits: Limits) -> Result:
    run_id = ev["run_id"]
    cfg = run_config(ev)
    ts = ev.get("ts")
    st = TraceState(run_id=run_id, config=cfg, started_ts=ts, last_event_ts=ts)
    decision = _decision(st, 0, None, None, None, ts, now, None)
    plan = etraces.plan_first_call(st.e3_calls, cfg.e_traces_enabled, etraces.model_family(cfg.model))
    return Result(
        run_id,
        state=_with_log(st, decision, limits.step_log_kept),
        decision=decision,
        event_type="run_start",
        plan=plan or None,
    )


def apply_step(
    st: TraceState, ev: dict[str, Any], limits: Limits, now: float, sem: Semantics | None = None
) -> Result:
    run_id = st.run_id
    step = ev["step"]
    if st.finished:
        raise Rejected("run_finished", f"run finished with outcome {st.outcome!r}", run_id, step)
    if step <= st.last_step:
        return Result(
            run_id, state=replace(st, duplicates=st.duplicates + 1), duplicate=True, event_type="step"
        )
    if step != st.last_step + 1:
        raise Rejected("out_of_order", f"expected step {st.last_step + 1}, got {step}", run_id, step)

    cfg = st.config
    params = cfg.fsm_params()
    supplied = ev.get("difficulty")
    # The scorer sees every step, so its memory is current when an agent stops supplying one.
    scored, scorer_state = get_step_scorer(cfg.scorer)(ev, st.scorer_state, limits.max_thought_chars)
    source: DifficultySource
    if supplied is not None:
        difficulty, source = clamp01(float(supplied)), "agent"
    else:
        difficulty, source = scored, "scorer"

    previous = st.state
    history = st.history
    if previous != FSMState.END.value:
        history = ([*history, difficulty])[-params.max_window :]
        new_state = get_transition(cfg.fsm_transition)(FSMState(previous), history, params).value
    else:
        new_state = previous
    tokens = ev.get("tokens") or 0
    ts = ev.get("ts")
    pending = [etraces.Query.from_wire(q) for q in st.etraces_pending]
    new = replace(
        st,
        state=new_state,
        history=history,
        scorer_state=scorer_state,
        last_step=step,
        scored_steps=st.scored_steps + 1,
        tokens_used=min(TOKENS_MAX, st.tokens_used + tokens),  # saturates: never past 2**53
        last_event_ts=ts if ts is not None else st.last_event_ts,
        etraces_pending=[],
    )
    skipped = None
    if new_state == FSMState.END.value:
        skipped = "FSM=END, run terminal"
    elif new_state == FSMState.FAST.value:
        skipped = "FSM=FAST, e-traces skipped"
    decision = _decision(new, step, previous, difficulty, source, ts, now, skipped)
    fired_before = list(st.recent_fired)
    to_embed: tuple[str, ...] = ()
    if cfg.monitors_enabled and new_state in MONITORED_STATES:
        _run_monitors(new, ev, decision, limits, sem)
        to_embed = tuple(monitors_to_embed(new.monitors))
    prefetch = _plan_etraces(new, ev, decision, fired_before, [q.tier for q in pending])
    if prefetch:
        new.etraces_pending = [q.to_wire() for q in prefetch.queries]
        reason = etraces.deferred_reason(prefetch.queries)
        decision["skipped_reason"] = f"{skipped}; {reason}" if skipped else reason
    # The queries planned on the step before are answered now, for this decision (the call
    # they steer is the next one either way), unless the run just became terminal.
    answer_now = None
    if pending and new_state != FSMState.END.value:
        answer_now = etraces.Plan(pending, etraces.model_family(decision["model"] or cfg.model))
    return Result(
        run_id,
        state=_with_log(new, decision, limits.step_log_kept),
        decision=decision,
        event_type="step",
        transition=(previous, new_state) if previous != new_state else None,
        plan=answer_now,
        prefetch=prefetch or None,
        to_embed=to_embed,
    )


def _plan_etraces(
    st: TraceState,
    ev: dict[str, Any],
    decision: Decision,
    fired_before: list[list[str]],
    pending: list[str],
) -> etraces.Plan:
    """Keep the thought window while a tier may still be called, and plan this step's queries
    (none for a tier still `pending`)."""
    cfg = st.config
    wanted = cfg.e_traces_enabled and (
        st.e1_calls < etraces.CALLS_PER_RUN or st.e2_calls < etraces.CALLS_PER_RUN
    )
    st.recent_thoughts = etraces.remember_thought(st.recent_thoughts, ev.get("thought")) if wanted else []
    if not wanted:
        return etraces.Plan()
    mon = decision["monitors"]
    gate = etraces.e1_gate_open(cfg.monitors_enabled, mon["fired"], mon["composite"], fired_before)
    return etraces.plan_step(
        enabled=True,
        fsm_state=st.state,
        org_id=cfg.org_id,
        thoughts=st.recent_thoughts,
        e1_calls=st.e1_calls,
        e2_calls=st.e2_calls,
        gate_open=gate,
        failure_type=mon["failure_type"],
        family=etraces.model_family(decision["model"] or cfg.model),
        pending=pending,
    )


def complete(result: Result, answers: list[etraces.Answer]) -> Result:
    """Apply the store's answers to the planned queries: injections, call counts, and the
    reason when the store could not answer. Pure; a no-op for results without a plan; never
    raises (a failure is an internal_error result with the fallback state)."""
    try:
        return _complete(result, answers)
    except Exception as exc:
        return _failed_from(result, "complete", exc)


def _complete(result: Result, answers: list[etraces.Answer]) -> Result:
    plan, st, d = result.plan, result.state, result.decision
    if not plan or st is None or d is None:
        return result
    by_tier = {a.tier: a for a in answers}
    errors: dict[str, str] = {}
    outcomes: dict[str, str] = {}
    added: list[Injection] = []
    for q in plan.queries:
        a = by_tier.get(q.tier)
        if a is None or a.error is not None:
            errors[q.tier] = a.error if a is not None and a.error else "not answered"
            outcomes[q.tier] = "error"
            continue
        setattr(st, f"{q.tier}_calls", getattr(st, f"{q.tier}_calls") + 1)
        chosen = etraces.select(q, a.hits, plan.family)
        outcomes[q.tier] = "hit" if chosen else "miss"
        added.extend(etraces.injections_for(q, chosen, plan.family))
    if added:
        counts = dict(st.injections_by_source)
        for inj in added:
            counts[inj["source"]] = counts.get(inj["source"], 0) + 1
        st.injections_by_source = counts
        d["injections"] = [*d["injections"], *added]
        d["inject"] = True
        d["injection_text"] = render_block(d["injections"])
    if errors:
        reason = etraces.failure_reason(errors)
        d["skipped_reason"] = f"{d['skipped_reason']}; {reason}" if d["skipped_reason"] else reason
    if st.e1_calls >= etraces.CALLS_PER_RUN and st.e2_calls >= etraces.CALLS_PER_RUN:
        st.recent_thoughts = []
    if st.step_log and st.step_log[-1][0] == d["step"]:
        st.step_log = [*st.step_log[:-1], log_entry(d)]
    result.extras["etraces"] = outcomes
    result.plan = None
    return result


def _run_monitors(
    st: TraceState, ev: dict[str, Any], decision: Decision, limits: Limits, sem: Semantics | None
) -> None:
    """Monitors, then the injection guardrails; updates `st` (a fresh copy) and `decision`."""
    if sem is None:
        raise ValueError("monitors are enabled but no Semantics (embedders) was given to the engine")
    features = extract(ev, limits.max_thought_chars)
    st.monitors, res = evaluate_monitors(st.monitors, features, st.config.weights, st.config.task, sem)
    decision["monitors"] = res.as_wire()
    st.recent_fired = [*st.recent_fired[-1:], res.fired]  # this step and the one before
    if not res.fired or res.text is None:
        return
    step = decision["step"]
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
        return
    st.monitor_injections += 1
    st.last_monitor_injection_step = step
    st.last_monitor_injection_text = res.text
    st.injections_by_source = {
        **st.injections_by_source,
        "monitor": st.injections_by_source.get("monitor", 0) + 1,
    }
    injection: Injection = {"source": "monitor", "text": res.text, "pattern_id": None, "similarity": None}
    decision["injections"] = [*decision["injections"], injection]
    decision["inject"] = True
    decision["injection_text"] = render_block(decision["injections"])


def finish_run(st: TraceState, ev: dict[str, Any]) -> Result:
    if st.finished:
        return Result(
            st.run_id,
            state=replace(st, duplicates=st.duplicates + 1),
            duplicate=True,
            event_type="run_finish",
        )
    ts = ev.get("ts")
    new = replace(
        st, finished=True, outcome=ev["outcome"], last_event_ts=ts if ts is not None else st.last_event_ts
    )
    return Result(st.run_id, state=new, event_type="run_finish")


def handle(
    raw: bytes | str | None,
    lookup: Callable[[str], TraceState | None],
    limits: Limits,
    now: float,
    sem: Semantics | None = None,
    *,
    key: object = NO_KEY,
    runs_cap: RunsCap | None = None,
    tenant: str | None = None,
) -> Result:
    """Decode, validate and apply one input. Never raises: bad input is a rejection with its
    reason, a failure inside is an internal_error result (see `failed`).

    `key`: the message key (bytes or None) when the input came from Kafka: it must be the
    run_id, checked before the run is looked up. `runs_cap` refuses a new run (too_many_runs).
    `tenant`: in multi-tenant mode, the tenant whose topic the input came from (proven by
    Kafka's ACLs): the run's org is the tenant, an event claiming another org and an event for
    a run another tenant started are refused (org_mismatch, see `check_tenant`).
    """
    seen = _Seen()

    def looked_up(run_id: str) -> TraceState | None:
        st = lookup(run_id)
        seen.prior = st
        return st

    try:
        result = _handle(raw, looked_up, limits, now, sem, key, runs_cap, seen, tenant)
    except Exception as exc:
        return failed("evaluate", exc, seen.run_id, seen.prior, seen.step, seen.event_type, now)
    result.prior, result.step, result.now = seen.prior, seen.step, now
    if result.state is not None:  # always a fresh copy (every path replaces the looked-up state)
        result.state.updated_ts = now
    return result


def seal(result: Result, limits: Limits) -> Result:
    """Encode the decision (as sent) and the state (as stored). Pure and total: a value an
    encoder cannot hold makes the event an internal_error with the fallback state, instead of
    an exception between the decision and its ack.

    Both encodings are capped (`limits.max_state_bytes`, `max_decision_bytes`), well under the
    broker's 1 MB per record: a state or a decision over its cap is the event's internal_error
    (stage `state_size`), and the run keeps its last good state (see `consumed`), so no input
    can make a record that the changelog or the steering topic would refuse."""
    try:
        result.wire_decision = None if result.decision is None else orjson.dumps(result.decision)
        result.wire_state = None if result.state is None else result.state.encode()
        oversize = _oversize(result, limits)
        if oversize is None:
            return result
        out = _failed_from(result, "state_size", OversizeError(oversize))
    except Exception as exc:
        out = _failed_from(result, "encode", exc)
    try:
        out.wire_state = None if out.state is None else out.state.encode()
        if out.wire_state is not None and len(out.wire_state) > limits.max_state_bytes:
            out.state, out.wire_state = None, None  # a state from before the caps: keep what is stored
    except Exception:
        out.state, out.wire_state = None, None
    return out


class OversizeError(ValueError):
    """An encoded state or decision over its cap (the message says which, and by how much)."""


def _oversize(result: Result, limits: Limits) -> str | None:
    if result.wire_state is not None and len(result.wire_state) > limits.max_state_bytes:
        return f"run state would be {len(result.wire_state)} bytes > cap {limits.max_state_bytes}"
    if result.wire_decision is not None and len(result.wire_decision) > limits.max_decision_bytes:
        return f"decision would be {len(result.wire_decision)} bytes > cap {limits.max_decision_bytes}"
    return None


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
    """What `_handle` learnt before a failure, for the fallback."""

    run_id: str | None = None
    event_type: str | None = None
    step: int | None = None
    prior: TraceState | None = None


def _handle(
    raw: bytes | str | None,
    lookup: Callable[[str], TraceState | None],
    limits: Limits,
    now: float,
    sem: Semantics | None,
    key: object,
    runs_cap: RunsCap | None,
    seen: _Seen,
    tenant: str | None = None,
) -> Result:
    ev: dict[str, Any] | None = None
    try:
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
        st = lookup(run_id)
        if tenant is not None and st is not None and st.config.org_id != tenant:
            raise Rejected("org_mismatch", ANOTHER_TENANTS_RUN, run_id, seen.step)
        if tenant is not None and etype == "run_start":
            ev = {**ev, "org_id": tenant}
        if etype == "run_start":
            if st is not None:
                conflict = config_conflict(st, ev)
                if conflict is not None:
                    raise conflict
                return Result(
                    run_id, state=replace(st, duplicates=st.duplicates + 1), duplicate=True, event_type=etype
                )
            if runs_cap is not None:
                full = runs_cap(ev.get("org_id") or "default", run_id)
                if full is not None:
                    raise Rejected("too_many_runs", full, run_id)
            return start_run(ev, now, limits)
        if st is None:
            raise Rejected("unknown_run", f"no run_start seen for run {run_id!r}", run_id, seen.step)
        if etype == "step":
            return apply_step(st, ev, limits, now, sem)
        return finish_run(st, ev)
    except Rejected as rej:
        return Result(rej.run_id, rejection=rej, event_type=ev.get("type") if ev else None)
