"""One pipeline for the worker and `replay`: evict -> cap -> step -> E-traces -> seal -> store.

Everything that decides what an input comes to lives here or in the core, once: eviction
records are judged here (`core.retention.judge`, plus the expiry check when the pipeline has a
clock to check it with), an input read from another partition than its run's is refused here
(`wrong_partition`; replay of a file knows no partitions and skips the check), the run caps
(per org and overall) are applied and counted here, in the partition's event order, and the
engine does the rest. The adapters only do their I/O around it: the
worker's processor answers E-traces asynchronously, sends the decision before it calls
`store` (a crash in between re-sends the same decision rather than losing it), acks and
counts; replay answers synchronously (`run`) over a dict-backed run store.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import orjson

from .core import etrace_rules
from .core.engine import ANOTHER_TENANTS_RUN, Engine, describe, evict_refusal, failed
from .core.events import Rejected, deadletter_record
from .core.outcome import outcome_record
from .core.results import NO_KEY, Decided, Outcome, Raw, Refused, Sealed
from .core.retention import (
    BAD_SIGNATURE,
    NOT_KEYED,
    EvictRequest,
    RunsHeld,
    expiry,
    judge,
    parse_evict,
    retention_clock,
)
from .core.state import TraceState

# Runs whose run_start was refused, remembered (bounded, oldest out) so that the run's later
# events, dead-lettered unknown_run, say why: the refusal is the cause, not a missing run_start.
REFUSED_STARTS_KEPT = 4096
REFUSED_START_DETAIL = 200  # characters of the refusal kept in a later event's detail
REFUSED_START_MARK = "its run_start was refused ("  # streams.cli groups these lines by it

# Synchronous E-trace answers for a plan (replay: the store is asked inline).
AnswerNow = Callable[[etrace_rules.Plan], Sequence[etrace_rules.Answer]]
# The steering switched off for (org, experiment): core.guard.Guard.observe_only.
ObserveOnly = Callable[[str, str | None], frozenset[str]]


class RunStore(Protocol):
    """Run states by run id, and the runs each org holds (the per-org cap)."""

    @property
    def held(self) -> RunsHeld: ...

    def lookup(self, run_id: str) -> TraceState | None: ...

    def store(
        self, run_id: str, wire_state: bytes, prior: TraceState | None, new: TraceState | None
    ) -> None: ...

    def delete(self, key: bytes, st: TraceState) -> None: ...


class MemoryRuns:
    """A run store over a dict of decoded states (replay: nothing to recover, no bytes read)."""

    def __init__(self, held: RunsHeld) -> None:
        self.states: dict[str, TraceState] = {}
        self._held = held

    @property
    def held(self) -> RunsHeld:
        return self._held

    def lookup(self, run_id: str) -> TraceState | None:
        return self.states.get(run_id)

    def store(self, run_id: str, wire_state: bytes, prior: TraceState | None, new: TraceState | None) -> None:
        self.states[run_id] = new if new is not None else TraceState.decode(wire_state)

    def delete(self, key: bytes, st: TraceState) -> None:
        self.states.pop(st.run_id, None)
        self._held.remove(st.run_id)


@dataclass(frozen=True)
class EvictionRule:
    """How eviction records are judged. `control_key`: RB_CONTROL_KEY (records are signed).
    `windows`: (finished retention, idle timeout) in seconds, for the expiry check of an
    unsigned record by the pipeline's clock; None when there is no clock to trust (replay: its
    states carry the replay's own processing times), which then applies a matching unsigned
    record (set the key for replay to agree with the worker on every record)."""

    control_key: str = ""
    windows: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class Evicted:
    """What an eviction record came to: the run removed (`applied`: finished or idle), left
    (stale: it moved on or is gone), or the record refused (`rejection`, `deadletter`)."""

    run_id: str
    applied: str | None = None
    rejection: Rejected | None = None
    deadletter: dict[str, Any] | None = None
    foreign: bool = False  # on another tenant's topic than the run's: ignored, said as for no run
    # an unfinished run removed: its outcome record ("abandoned"), for the outcomes topic
    outcome: dict[str, Any] | None = None
    # the run whose removal waits for `Pipeline.remove` (a pipeline with `defer_removal`)
    pending: TraceState | None = None

    @property
    def forged(self) -> bool:
        """Refused before it was judged against the run (not keyed, not signed, another
        tenant's run, another partition): no request the worker made."""
        rej = self.rejection
        return self.foreign or (rej is not None and (rej.detail in _FORGED or rej.reason == WRONG_PARTITION))


_FORGED = frozenset({NOT_KEYED, BAD_SIGNATURE, ANOTHER_TENANTS_RUN})
WRONG_PARTITION = "wrong_partition"


def wrong_partition(run_id: str, partition: int | None, held: RunsHeld) -> str | None:
    """Why an input read from `partition` is refused: its run lives on another one. A run's
    state, its share of the per-org cap and its evictions all belong to its key's partition
    (Kafka's default partitioner over RB_PARTITIONS); a copy produced to another partition
    would open a second state there, beyond the cap, the tenant check and the eviction sweep.
    None: the right partition, or no partition known (replay of a file)."""
    if partition is None:
        return None
    owner = held.partition_of(run_id)
    if partition == owner:
        return None
    return (
        f"read from partition {partition} of {held.partitions}, but its run_id hashes to partition "
        f"{owner}: produce keyed by run_id with Kafka's default partitioner (never a chosen partition)"
    )


def outcome_of(sealed: Sealed) -> dict[str, Any] | None:
    """The outcome record a sealed input sends: on a run_finish applied, and again on every
    copy of it the finished run reads (a restart may read it again after the state was stored
    but before the record reached the broker: the copy re-sends the same record, never a
    different one: the record is a function of the final state alone)."""
    st = sealed.state
    if sealed.event_type != "run_finish" or st is None or not st.finished or sealed.rejection is not None:
        return None
    return outcome_record(st, "run_finish")


class Pipeline:
    """The rules around the engine, in order, over a run store; the same live and offline."""

    def __init__(
        self,
        engine: Engine,
        runs: RunStore,
        evictions: EvictionRule | None = None,
        observe_only: ObserveOnly | None = None,
        *,
        defer_removal: bool = False,
    ) -> None:
        """`observe_only`: the guard's current verdict, asked per event (`core.guard.Guard.
        observe_only`); None: no guard, nothing is ever switched off. `defer_removal`: an
        unfinished run's eviction leaves the run in the store until the adapter calls `remove`
        (the worker: once its outcome record is on the broker; removed first, a kill -9 before
        the record left the producer would lose it with the state)."""
        self.engine = engine
        self.runs = runs
        self.evictions = evictions or EvictionRule()
        self.observe_only = observe_only
        self.defer_removal = defer_removal
        # (tenant, run id) -> "reason: detail" of its refused run_start (see REFUSED_STARTS_KEPT);
        # by tenant, so one tenant's later event never learns of another's run
        self._refused_starts: OrderedDict[tuple[str | None, str], str] = OrderedDict()

    def remove(self, ev: Evicted) -> None:
        """Remove the run an eviction left pending (see `defer_removal`); else a no-op."""
        if ev.pending is not None:
            self.runs.delete(ev.run_id.encode("utf-8"), ev.pending)

    def take(
        self,
        raw: Raw,
        now: float,
        *,
        key: object = NO_KEY,
        tenant: str | None = None,
        source: dict[str, Any] | None = None,
        partition: int | None = None,
    ) -> Outcome | Evicted:
        """Evict, or cap and step: what the input does before any E-trace is answered.
        `partition`: the Kafka partition it was read from (None: unknown, replay of a file);
        an input on another partition than its run's is refused `wrong_partition`.
        Never raises (a failure is an internal_error refusal, stage evaluate)."""
        req = parse_evict(raw)
        if req is not None:
            return self._evict(req, raw, now, key, tenant, source, partition)
        out = self._take(raw, now, key, tenant, partition)
        if isinstance(out, Refused) and out.run_id is not None:
            return self._said_once(out, raw, tenant, out.run_id)
        if isinstance(out, Decided) and out.prior is None:
            self._refused_starts.pop((tenant, out.incoming.run_id), None)
        return out

    def _said_once(self, out: Refused, raw: Raw, tenant: str | None, run_id: str) -> Refused:
        """A refused run_start remembered; a later unknown_run event of that run told why."""
        rej, at = out.rejection, (tenant, run_id)
        if rej.reason == "unknown_run":
            cause = self._refused_starts.get(at)
            if cause is None:
                return out
            detail = f"{rej.detail}: {REFUSED_START_MARK}{cause})"
            return replace(out, rejection=Rejected(rej.reason, detail, rej.run_id, rej.step))
        if out.prior is None and _is_run_start(out.event_type, raw):
            self._refused_starts[at] = f"{rej.reason}: {rej.detail}"[:REFUSED_START_DETAIL]
            self._refused_starts.move_to_end(at)
            if len(self._refused_starts) > REFUSED_STARTS_KEPT:
                self._refused_starts.popitem(last=False)
        return out

    def _take(self, raw: Raw, now: float, key: object, tenant: str | None, partition: int | None) -> Outcome:
        read = self.engine.read(raw, now, key=key, tenant=tenant)
        if isinstance(read, Refused):
            return read
        try:
            misrouted = wrong_partition(read.run_id, partition, self.runs.held)
            if misrouted is not None:  # before the lookup: that partition's store is not the run's
                rej = Rejected(WRONG_PARTITION, misrouted, read.run_id, read.step)
                return Refused(rej, raw, now, read.event_type)
            prior = self.runs.lookup(read.run_id)
            if read.event_type == "run_start" and prior is None:
                full = self.runs.held.refusal(read.org, read.run_id)
                if full is not None:
                    return Refused(Rejected(*full, read.run_id), raw, now, read.event_type)
        except Exception as exc:  # a state the table cannot give back: this event's failure only
            return failed("evaluate", exc, raw, now, read.run_id, None, read.step, read.event_type)
        out = self.engine.step(prior, read, now)
        if isinstance(out, Decided) and prior is None:
            # Counted now, in the partition's event order (a new run's run_start never waits
            # behind another event), before its E-traces are answered.
            self.runs.held.add(read.run_id, out.state.config.org_id)
        return out

    def seal(
        self,
        outcome: Outcome,
        answers: Sequence[etrace_rules.Answer] = (),
        source: dict[str, Any] | None = None,
    ) -> Sealed:
        """The engine's seal, and the run uncounted if its run_start failed after all."""
        off: frozenset[str] = frozenset()
        if self.observe_only is not None and isinstance(outcome, Decided):
            cfg = outcome.state.config
            off = self.observe_only(cfg.org_id, cfg.experiment)
        sealed = self.engine.seal(outcome, answers, source, off)
        if isinstance(outcome, Decided) and outcome.prior is None and not sealed.opens_run:
            self.runs.held.remove(outcome.incoming.run_id)
        return sealed

    def store(self, sealed: Sealed) -> None:
        """Keep the sealed state (the worker calls it after sending the decision)."""
        if sealed.state_bytes is not None and sealed.run_id is not None:
            self.runs.store(sealed.run_id, sealed.state_bytes, sealed.prior, sealed.state)

    def release(self, outcome: Outcome) -> None:
        """Uncount a new run whose state will not be stored: the adapter failed (or was
        cancelled) between `take` and `store`. A no-op for anything else."""
        if not isinstance(outcome, Decided) or outcome.prior is not None:
            return
        try:
            stored = self.runs.lookup(outcome.run_id) is not None
        except Exception:  # unreadable: it is not a state this run_start stored
            stored = False
        if not stored:
            self.runs.held.remove(outcome.run_id)

    def run(
        self,
        raw: Raw,
        now: float,
        answer: AnswerNow,
        *,
        key: object = NO_KEY,
        tenant: str | None = None,
        source: dict[str, Any] | None = None,
        partition: int | None = None,
    ) -> Sealed | Evicted:
        """The whole pipeline, synchronously (replay)."""
        out = self.take(raw, now, key=key, tenant=tenant, source=source, partition=partition)
        if isinstance(out, Evicted):
            return out
        plan = out.effects.answer_now if isinstance(out, Decided) else None
        sealed = self.seal(out, answer(plan) if plan else (), source)
        self.store(sealed)
        return sealed

    def _evict(
        self,
        req: EvictRequest,
        raw: Raw,
        now: float,
        key: object,
        tenant: str | None,
        source: dict[str, Any] | None,
        partition: int | None,
    ) -> Evicted:
        """Apply an eviction record in order with its run's events, or refuse it."""
        if key is not NO_KEY and key != req.run_id.encode("utf-8"):
            return self._refuse(req, NOT_KEYED, raw, now, source)
        misrouted = wrong_partition(req.run_id, partition, self.runs.held)
        if misrouted is not None:  # the sweep sends to the run's partition: no worker wrote this
            return self._refuse(req, misrouted, raw, now, source, WRONG_PARTITION)
        try:
            st = self.runs.lookup(req.run_id)
        except Exception as exc:  # a state the table cannot give back: this record's failure only
            rej = Rejected("internal_error", f"evict: {describe(exc)}", req.run_id)
            return Evicted(
                req.run_id,
                rejection=rej,
                deadletter=deadletter_record(raw, rej, self.engine.limits, now, source),
            )
        foreign = evict_refusal(st, tenant) is not None
        if foreign:
            # Another tenant's run reads as no run at all (no probing of run ids): an unsigned
            # record is refused for its signature and a signed one left, as for an unused id.
            st = None
        applies, refused = judge(req, st, self.evictions.control_key)
        if refused is not None:
            return self._refuse(req, refused, raw, now, source)
        if foreign:
            return Evicted(req.run_id, foreign=True)
        if not applies or st is None:
            return Evicted(req.run_id)  # stale: evicted already, or moved on since it was asked
        reason = "finished" if st.finished else "idle"
        windows = self.evictions.windows
        if windows is not None:
            expired = expiry(st.finished, retention_clock(st), now, *windows)
            if expired is None and not self.evictions.control_key:
                # unsigned: anyone may have written it, the clock decides
                why = (
                    f"run {req.run_id[:100]!r} is not expired: eviction refused (a record no "
                    "worker wrote, or the retention settings changed since)"
                )
                return self._refuse(req, why, raw, now, source)
            reason = expired or reason  # a signed record was signed for this state once expired
        record = None if st.finished else outcome_record(st, "evicted")  # a finished run's went out
        if record is not None and self.defer_removal:
            return Evicted(req.run_id, applied=reason, outcome=record, pending=st)
        self.runs.delete(req.run_id.encode("utf-8"), st)
        return Evicted(req.run_id, applied=reason, outcome=record)

    def _refuse(
        self,
        req: EvictRequest,
        why: str,
        raw: Raw,
        now: float,
        source: dict[str, Any] | None,
        reason: str = "invalid_control",
    ) -> Evicted:
        rej = Rejected(reason, why, req.run_id)
        return Evicted(
            req.run_id, rejection=rej, deadletter=deadletter_record(raw, rej, self.engine.limits, now, source)
        )


def _is_run_start(event_type: str | None, raw: Raw) -> bool:
    """Whether a refused input is a run_start: its type when it was read that far, else what
    the raw JSON says (a refusal by the schema comes before the type is known to the engine)."""
    if event_type is not None or raw is None:
        return event_type == "run_start"
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and obj.get("type") == "run_start"
