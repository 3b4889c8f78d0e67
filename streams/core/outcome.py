"""The outcome of a run: counted in its state as it goes, reported once as a record.

An experiment compares runs by how they end (issue 50), so every run gets one record when it
ends: on its run_finish, or when it is evicted without one (`abandoned`). The record is a pure
function of the run's final state (`outcome_record`): no processing time is in it, so a worker
restarted after a kill -9 that sends it again sends the same bytes, and `rb-streams replay`
writes the very records the worker sends.

What the record counts is kept in the state, bounded (a few numbers, at most MODELS_KEPT
models and KEYS_KEPT monitors), and counted from the decision as the engine made it, before a
control run's decision is masked: a control run's interventions are the ones it would have
had. Its model calls are the calls the agent made, on the model its decisions named as sent
(a control run's own model).

Cost, per call: a step that reports `usage` is priced as reported; one that gives only its
`tokens` is split into output (estimated from its text) and plain input; one with neither is
estimated from the text: the context so far (a system prompt prior, the task, the earlier
steps) is its input, of which what the call before it read counts as a cache read and the
rest as a cache write. A call on a model the price table (`Policy.prices`) does not price
counts 0 USD. Either way the record says `cost_estimated: true`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from . import compliance
from .decision import DecisionRecord
from .ladder import RUNGS
from .prices import PriceTable
from .routing import COST_MAX, COUNT_MAX, PRIOR_SYSTEM_TOKENS, event_time, step_tokens, text_tokens

SCHEMA_VERSION = 1
MODELS_KEPT = 16  # distinct models a run's model_calls names; later ones count as OTHER
KEYS_KEPT = 32  # distinct monitors in interventions and first_fire; later ones: OTHER / dropped
OTHER = "other"
UNKNOWN_MODEL = "unknown"  # a call of a run that names no model
MODEL_CHARS = 256
OUTCOME_LABELS = ("success", "failure", "stopped_by_steering", "abandoned")
STOPPED = "failure: stopped_by_steering"  # what the agent side reports for a stopped run
# The state's `usage`: [input not read from the cache, output, read from the cache, the
# context estimate for the next call, the part of it the call before read].
USAGE_FIELDS = 5


def _count(d: Mapping[str, int], key: str, cap: int, n: int = 1) -> dict[str, int]:
    out = dict(d)
    if key not in out and len(out) >= cap:
        key = OTHER
    out[key] = min(COUNT_MAX, out.get(key, 0) + n)
    return out


def _add(a: int, b: int) -> int:
    return min(COUNT_MAX, a + max(0, b))


def _num(u: Mapping[str, Any], *keys: str) -> int:
    for k in keys:
        v = u.get(k)
        if type(v) is int and v >= 0:
            return min(v, COUNT_MAX)
    return 0


def call_model(st: Any) -> str:
    """The model the run's latest call went to: its last decision's model as sent (a control
    run is sent its own), else the run's own model."""
    cfg = st.config
    named = None if cfg.arm == "control" else st.next_model
    return str(named or cfg.model or UNKNOWN_MODEL)[:MODEL_CHARS]


def count_call(st: Any, ev: Mapping[str, Any], prices: PriceTable) -> dict[str, Any]:
    """The state fields after step `ev` (one model call): calls by model, tokens, cost."""
    model = call_model(st)
    usage = list(st.usage) if len(st.usage) == USAGE_FIELDS else [0] * USAGE_FIELDS
    plain, out_t, read, ctx, base = usage
    if ctx == 0:  # the run's first call: the system prompt prior and the task
        ctx = min(COUNT_MAX, PRIOR_SYSTEM_TOKENS + text_tokens(st.config.task))
    est_out, obs = step_tokens(ev)
    u = ev.get("usage")
    tokens = ev.get("tokens")
    written = 0
    if isinstance(u, Mapping) and any(
        _num(u, k) for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
    ):
        c_plain, c_read = _num(u, "input_tokens"), _num(u, "cache_read_tokens")
        written, c_out = _num(u, "cache_write_tokens"), _num(u, "output_tokens")
        estimated = u.get("estimated") is True
        n_in = c_plain + c_read + written
    elif type(tokens) is int and tokens > 0:
        c_out = min(tokens, est_out)
        c_plain, c_read, estimated = tokens - c_out, 0, True
        n_in = c_plain
    else:
        c_out, c_read, estimated = est_out, min(base, ctx), True
        written, c_plain = ctx - c_read, 0
        n_in = ctx
    p = prices.get(model)
    cost = st.cost_usd
    if p is None:
        estimated = True
    else:
        call = (c_plain * p.input + written * p.cache_write + c_read * p.cache_read + c_out * p.output) / 1e6
        cost = min(COST_MAX, cost + max(0.0, call))
    ts = event_time(ev.get("ts"))
    changes: dict[str, Any] = {
        "model_calls": _count(st.model_calls, model, MODELS_KEPT),
        "usage": [
            _add(plain, c_plain + written),
            _add(out_t, c_out),
            _add(read, c_read),
            min(COUNT_MAX, n_in + c_out + obs),
            min(COUNT_MAX, n_in),
        ],
        "cost_usd": cost,
        "cost_estimated": st.cost_estimated or estimated,
    }
    if st.started_ts is None and st.first_ts is None and ts is not None:
        changes["first_ts"] = ts
    return changes


def count_decision(prior: Any, st: Any, decision: DecisionRecord) -> dict[str, Any]:
    """The state fields after decision `decision` (unmasked): interventions by monitor (the
    monitors that fired on a step whose monitor text was delivered), the ladder's climbs to
    escalate and stop, each monitor's first fire, and the model named for the next call."""
    changes: dict[str, Any] = {"next_model": decision["model"]}
    fired = decision["monitors"]["fired"]
    if prior is None:
        return changes
    if fired:
        first = st.first_fire
        new = [n for n in fired if n not in first]
        if new and len(first) < KEYS_KEPT:
            first = dict(first)
            for n in new[: KEYS_KEPT - len(first)]:
                first[n] = decision["step"]
            changes["first_fire"] = first
        delivered = st.injections_by_source.get("monitor", 0) > prior.injections_by_source.get("monitor", 0)
        if delivered:
            counts = st.interventions
            for n in fired:
                counts = _count(counts, n, KEYS_KEPT)
            changes["interventions"] = counts
    action = decision["action"]
    if action in ("escalate", "stop") and RUNGS.index(st.rung) > RUNGS.index(prior.rung):
        if action == "escalate":
            changes["escalations"] = min(COUNT_MAX, st.escalations + 1)
        else:
            changes["stops"] = min(COUNT_MAX, st.stops + 1)
    return changes


def outcome_label(outcome: str) -> str:
    """The outcome as a metric label: success, failure, stopped_by_steering or abandoned."""
    if outcome in ("success", "abandoned"):
        return outcome
    return "stopped_by_steering" if outcome == STOPPED else "failure"


def _compliance(st: Any) -> dict[str, dict[str, int]]:
    """The run's compliance summary (`core.compliance.summary`)."""
    return {k: dict(v) for k, v in compliance.summary(st).items()}


def wall_seconds(st: Any) -> float | None:
    """From the run's first event time to its last (the agent's clock); None if unknown."""
    start = st.started_ts if st.started_ts is not None else st.first_ts
    end = st.last_event_ts
    if start is None or end is None:
        return None
    wall = float(end) - float(start)
    return round(wall, 3) if 0 <= wall <= COST_MAX else None


def outcome_record(st: Any, ended_by: str) -> dict[str, Any]:
    """The run's outcome record (streams/schemas/outcome.schema.json), a pure function of its
    final state. `ended_by`: "run_finish" or "evicted" (then outcome "abandoned")."""
    if ended_by not in ("run_finish", "evicted"):
        raise ValueError(f"ended_by must be run_finish or evicted, not {ended_by!r}")
    cfg = st.config
    finished = st.finished and st.outcome is not None
    usage = st.usage if len(st.usage) == USAGE_FIELDS else [0] * USAGE_FIELDS
    interventions = dict(st.injections_by_source)
    for name, n in st.interventions.items():
        interventions[name] = interventions.get(name, 0) + n
    return {
        "type": "outcome",
        "schema_version": SCHEMA_VERSION,
        "run_id": st.run_id,
        "org_id": cfg.org_id,
        "experiment": cfg.experiment,
        "arm": cfg.arm,
        "outcome": st.outcome if finished else "abandoned",
        "ended_by": ended_by,
        "steps": st.last_step,
        "wall_s": wall_seconds(st),
        "model_calls": dict(st.model_calls),
        "tokens": {"input": usage[0], "output": usage[1], "cached": usage[2]},
        "cost_usd": round(st.cost_usd, 6),
        "cost_estimated": st.cost_estimated,
        "interventions": interventions,
        "escalations": st.escalations,
        "stops": st.stops,
        "first_fire": dict(st.first_fire),
        "compliance": _compliance(st),
        "compliance_by_model": compliance.by_model(st),
    }


def encode(record: Mapping[str, Any]) -> bytes:
    """The record's bytes on the outcomes topic and in replay's file: keys sorted, so the same
    record is always the same bytes."""
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
