"""Driving the engine alone in tests (no pipeline: no run cap, no evictions)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from streams.core.engine import Engine
from streams.core.etrace_rules import Answer
from streams.core.events import Limits
from streams.core.monitors import Semantics
from streams.core.policy import Policy
from streams.core.results import NO_KEY, Decided, Outcome, Raw, Refused, Sealed
from streams.core.state import TraceState

Lookup = Callable[[str], TraceState | None]


def outcome(
    raw: Raw,
    lookup: Lookup,
    limits: Limits | None = None,
    now: float = 1.0,
    sem: Semantics | None = None,
    *,
    key: object = NO_KEY,
    tenant: str | None = None,
    policy: Policy | None = None,
) -> Outcome:
    """read, look up, step: what the input does before E-traces are answered."""
    engine = Engine(policy, sem, limits)
    read = engine.read(raw, now, key=key, tenant=tenant)
    return read if isinstance(read, Refused) else engine.step(lookup(read.run_id), read, now)


def sealed(
    raw: Raw,
    lookup: Lookup,
    limits: Limits | None = None,
    now: float = 1.0,
    sem: Semantics | None = None,
    *,
    key: object = NO_KEY,
    tenant: str | None = None,
    policy: Policy | None = None,
    answers: Sequence[Answer] | None = None,
) -> Sealed:
    """read, look up, step, seal. `answers`: the store's answers to the queries to answer now
    (default: each answered, nothing found, as an empty pattern store answers)."""
    out = outcome(raw, lookup, limits, now, sem, key=key, tenant=tenant, policy=policy)
    if answers is None:
        plan = out.effects.answer_now if isinstance(out, Decided) else None
        answers = [Answer(q.tier) for q in plan.queries] if plan else []
    return Engine(policy, sem, limits).seal(out, answers)
