"""The decision record, typed: what the worker publishes for every model call.

`decision.schema.json` is the wire contract; these TypedDicts are the same shape for the type
checker, and core.engine is the one place a decision is built. TypedDicts (not dataclasses)
because the decision is a JSON object end to end: orjson writes it as is.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from ..shared.contract import Action

InjectionSource = Literal["monitor", "e1", "e2", "e3"]
Suppressed = Literal["cooldown", "cap", "duplicate", "final_step"]
DifficultySource = Literal["agent", "scorer"]
Arm = Literal["treatment", "control"]


class Injection(TypedDict):
    source: InjectionSource
    text: str
    pattern_id: str | None
    similarity: float | None


class MonitorsWire(TypedDict):
    scores: dict[str, float]
    fired: list[str]
    composite: float
    failure_type: str | None


class ActionReason(TypedDict):
    """Why a decision escalates or stops: the warning ignored, and the evidence."""

    monitor: str
    failure_type: str
    ignored: int  # warnings the run has ignored so far
    steps: list[int]  # the steps that did again what a warning was about (the last few)
    text: str  # for a person: what was warned at which step, and what the agent did again


class TaintEntry(TypedDict):
    """A value a tool result introduced (streams.shared.taint): its hash, never the value."""

    h: str  # first 16 hex of sha256 of the normalised value
    kind: str
    step: int  # the step whose result introduced it
    tool: str  # that step's action, cut
    instr: bool  # that result held instructions addressed to the agent, near the value
    dir: NotRequired[bool]  # that result sent something to the value (`streams.shared.taint.directed`)


class SanctionEntry(TypedDict):
    """A tool result whose values the user's order to follow a named source made the user's
    (issue 49, `core.sanction`): a reviewer reads why a call that carries them was allowed."""

    step: int  # the step whose result was sanctioned
    tool: str  # that step's action, cut
    by: int  # the step whose user message gave the order; 0: the run's task


class DecisionRecord(TypedDict):
    """The decision as the worker publishes it (the agent side's `streams.Decision` wraps it)."""

    type: Literal["decision"]
    schema_version: int
    run_id: str
    step: int
    fsm_state: str
    previous_state: str | None
    difficulty: float | None
    difficulty_source: DifficultySource | None
    model: str | None
    inject: bool
    injection_text: str | None
    injections: list[Injection]
    monitors: MonitorsWire
    suppressed: Suppressed | None
    action: Action
    action_reason: ActionReason | None
    skipped_reason: str | None
    tokens_used: int
    token_budget: int | None
    budget_used: float | None
    event_ts: float | None
    processed_ts: float
    # Why routing kept or changed the model (runs with model_routing only).
    routing_reason: NotRequired[str | None]
    # Values tool results introduced, for the agent side's pre-call gate (<= 32).
    taint: NotRequired[list[TaintEntry]]
    sanctioned: NotRequired[list[SanctionEntry]]
    # The run's arm, on every decision of a run in an experiment (absent otherwise).
    # A control run's decisions are unsteered (core.holdout.mask).
    arm: NotRequired[Arm]
