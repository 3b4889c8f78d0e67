"""What `Engine` takes and gives (pure values): `Incoming`, a decoded and checked input; the
`Outcome` of applying it to its run (`Decided | Duplicate | Finished | Refused`) with the
`Effects` the adapter carries out; and `Sealed`, the records to send and to store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import etrace_rules
from .decision import DecisionRecord
from .events import Rejected
from .state import TraceState

NO_KEY = object()  # `Engine.read(key=...)` default: the input came without a message key (replay)
Raw = bytes | str | None


@dataclass(frozen=True, slots=True)
class Effects:
    """What the adapter does for a decision, given as data: the core does no I/O."""

    # Queries to answer before the decision goes out (E3 on the first call; the E1/E2 queries
    # the run's previous step planned): `seal` takes their answers.
    answer_now: etrace_rules.Plan | None = None
    # E1/E2 queries this step planned (kept in the state as pending): may start now, in the
    # background, so the run's next decision finds them answered.
    prefetch: etrace_rules.Plan | None = None
    # Texts the run's next step embeds with the full model (a drift check planned this step).
    to_embed: tuple[str, ...] = ()


NO_EFFECTS = Effects()


@dataclass(frozen=True, slots=True)
class Incoming:
    """A decoded, checked input, before its run is looked up."""

    raw: Raw
    event: dict[str, Any]  # schema-valid; on a tenant's run_start, org_id is the tenant
    run_id: str
    event_type: str  # run_start | step | run_finish
    step: int | None
    tenant: str | None = None

    @property
    def org(self) -> str:
        return str(self.event.get("org_id") or "default")


class _Answering:
    """What Decided, Duplicate and Finished share: the input they answer, and so its run."""

    __slots__ = ()
    incoming: Incoming

    @property
    def run_id(self) -> str:
        return self.incoming.run_id

    @property
    def step(self) -> int | None:
        return self.incoming.step


@dataclass(frozen=True, slots=True)
class Decided(_Answering):
    """A run_start or a step answered with a decision (E-trace answers still to apply)."""

    incoming: Incoming
    prior: TraceState | None
    state: TraceState
    decision: DecisionRecord
    now: float
    effects: Effects = NO_EFFECTS
    transition: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Duplicate(_Answering):
    """A re-sent run_start, step or run_finish: counted in the state. A copy of the step the
    state last decided (or of the run_start, before any step) `resend`s that decision's bytes
    as first sent: the first copy may have been lost with a crash (see `_resend`)."""

    incoming: Incoming
    prior: TraceState
    state: TraceState
    now: float
    resend: bytes | None = None


@dataclass(frozen=True, slots=True)
class Finished(_Answering):
    """A run_finish applied: the run is terminal."""

    incoming: Incoming
    prior: TraceState
    state: TraceState
    now: float


@dataclass(frozen=True, slots=True)
class Refused:
    """An input dead-lettered with its reason. With an internal_error, the stage that failed
    and the exception, and the fallback `state` to store (None: store nothing)."""

    rejection: Rejected
    raw: Raw
    now: float
    event_type: str | None = None
    prior: TraceState | None = None
    state: TraceState | None = None
    failed_stage: str | None = None
    error: BaseException | None = None

    @property
    def run_id(self) -> str | None:
        return self.rejection.run_id

    @property
    def step(self) -> int | None:
        return self.rejection.step


Outcome = Decided | Duplicate | Finished | Refused


@dataclass(frozen=True, slots=True)
class Sealed:
    """What an input comes to, encoded: the decision to send or the dead-letter record to
    send, then the state to store. The adapters only carry it out."""

    run_id: str | None
    event_type: str | None
    step: int | None
    now: float
    prior: TraceState | None = None
    state: TraceState | None = None  # to store, after the send (None: store nothing)
    state_bytes: bytes | None = None
    decision: DecisionRecord | None = None  # as sent (a control run's: unsteered)
    decision_bytes: bytes | None = None
    # A control run's decision as it would have been (core.holdout): never sent; the state
    # evolved from it. None for every other run.
    shadow: DecisionRecord | None = None
    rejection: Rejected | None = None
    deadletter: dict[str, Any] | None = None
    failed_stage: str | None = None  # an internal_error inside the core: the stage, the exception
    error: BaseException | None = None
    duplicate: bool = False
    transition: tuple[str, str] | None = None
    etrace_outcomes: Mapping[str, str] = field(default_factory=dict)  # tier -> hit | miss | error
    prefetch: etrace_rules.Plan | None = None  # start now, for the run's next decision
    to_embed: tuple[str, ...] = ()  # embed now, for the run's next step
    opens_run: bool = False  # an accepted run_start (the run counts against its org's cap)
    finishes_run: bool = False  # an accepted run_finish (what is kept for the run may go)
