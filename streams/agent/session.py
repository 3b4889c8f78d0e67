"""A framework-agnostic steering session for custom agent loops (the hosted product's
SteeringSession): `begin_step()` before each model call, `end_step(...)` after it (and after
its tool ran).

Decision 0 (from run_start) steers call 1; the step event for call k, published by
`end_step`, is answered by decision k, which steers call k+1. A decision that misses the
client's deadline leaves that call unsteered (recorded in `step_log` as late), but not
ungated: `check_call` goes on checking against the newest taint the run has had.

    with SyncSteeringClient(settings) as client:
        s = SteeringSession(client, task="fix the login bug", model="claude-sonnet-4-5",
                            model_routing={"FAST": "claude-haiku-4-5"})
        s.start()
        while not done:
            steer = s.begin_step()
            resp = anthropic.messages.create(**steer.request(base_request))
            ... run the tool ...
            s.end_step(thought=text, action=tool, action_input=args, observation=out, tokens=n)
        s.finish("success")

Before running a tool, `check_call(tool, args)` asks the pre-call gate (`streams.agent.gate`)
whether the call's arguments carry a value that only a tool output introduced (an e-mail's
IBAN, a web page's URL) in a call the latest decision's `taint` list marks as suspicious:

        verdict = s.check_call("send_money", {"recipient": iban, "amount": 100})
        out = run_tool(...) if verdict.allow else gate.denial_text(verdict, "send_money")

The taint it checks against is the newest decision's the run has had (`streams.agent.gate.
GateMemory`): a late decision leaves the earlier taint in force. `gate="strict"` (or the
client's `RB_CLIENT_GATE_MODE=strict`) also denies any value a tool output introduced in an
acting call, even when no instruction stood next to it.

When the run's escalation policy stops it (the agent kept doing what it was warned about),
`begin_step()` raises `RunStopped` instead of returning the next call's steering; with
`on_stop="return"` it returns it and the caller checks `steer.action == "stop"`. Either way
the run is then finished as `failure: stopped_by_steering` (`stopped_by_steering` is True).

With OpenTelemetry in use, the decisions are in the caller's traces (`streams.agent.tracing`):
the monitors that fired as evaluation events on the span current when `end_step` returns (the
step evaluated), how it steers on the span current at `begin_step` (the call steered), and a
call `check_call` refuses as an `rb.gate.refused` event; with the client's `trace_guardrail`
(`RB_CLIENT_TRACE_GUARDRAIL`), a proposed `run_guardrail` span under each of those spans too.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from ..shared.contract import REASONBLOCKS_MARKER, Action
from ..shared.gate_policy import GatePolicy
from ..shared.untrusted import scrub
from . import compose, tracing
from .client import Decision, StepLogEntry, SyncSteeringClient, action_of
from .gate import ALLOW, GateMemory, GateMode, GateVerdict, enabled_for, log_denial, mode_for
from .validation import check_run_field_names, validate_run_fields

STOPPED_OUTCOME = "failure: stopped_by_steering"


class RunStopped(Exception):
    """The steering decision said `stop`: the agent ignored its warnings (see the run's
    escalation policy), so the run should end now, without another model call.

    `run_id`: the run; `step`: the last step the agent took (its decision said stop);
    `reason`: a sentence a person can read (what was warned and what was repeated, where);
    `action_reason`: the decision's whole `action_reason` ({monitor, failure_type, ignored,
    steps, text}) or None."""

    def __init__(
        self, run_id: str, step: int, reason: str, action_reason: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"run {run_id} stopped by steering after step {step}: {reason}")
        self.run_id = run_id
        self.step = step
        self.reason = reason
        self.action_reason = action_reason


STOP_REASON_MAX = 2000  # characters of a stop reason kept (a decision is the worker's text)


def stop_reason(decision: Decision | None) -> str:
    """The readable reason of a stop: `action_reason.text`, else the injection (its marker line
    dropped), else a default. Scrubbed (`streams.shared.untrusted.scrub`) and cut: it becomes Claude's
    `stopReason`, an exception's message, a chat message, so a decision that carries a forged
    marker, a tag or control characters must not pass them on."""
    if decision is not None:
        reason = decision.action_reason
        text = reason.get("text") if reason else None
        if isinstance(text, str) and text.strip():
            return scrub(text.strip(), STOP_REASON_MAX).strip()
        if decision.injection_text:
            said = decision.injection_text.strip().removeprefix(REASONBLOCKS_MARKER)
            return scrub(said.strip(), STOP_REASON_MAX).strip()
    return "the steering decision asked to end the run"


@dataclass(frozen=True)
class Steering:
    """How to make the next model call: the decision (None if late) applied to a request."""

    step: int  # the model call this applies to (1 = first call)
    decision: Decision | None
    default_model: str | None
    # where the steering text goes: "end" keeps the prompt cache (see streams.agent.compose)
    placement: compose.Placement = "end"

    @property
    def model(self) -> str | None:
        """The routed model id, or the run's default model."""
        return compose.model_of(self.decision) or self.default_model

    @property
    def injection_text(self) -> str | None:
        return compose.injection_of(self.decision)

    @property
    def action(self) -> Action:
        """`continue`, `nudge`, `escalate` (`model` is the escalation model) or `stop`; a late
        decision, or one from a worker older than the ladder, reads as `continue`."""
        return action_of(self.decision.data if self.decision is not None else None)

    @property
    def action_reason(self) -> dict[str, Any] | None:
        return self.decision.action_reason if self.decision is not None else None

    @property
    def stop_reason(self) -> str | None:
        """Why the run must end (a sentence), or None unless `action` is `stop`."""
        return stop_reason(self.decision) if self.action == "stop" else None

    def anthropic_system(self, base: compose.Base) -> list[dict[str, Any]]:
        return compose.anthropic_system(base, self.decision)

    def plain_system(self, base: str) -> str:
        return compose.plain_system(base, self.decision)

    def request(self, anthropic_request: dict[str, Any]) -> dict[str, Any]:
        """An Anthropic-style request with the steering text placed (by default at the end of
        the last user turn, so the cached prefix is unchanged) and the model routed."""
        return compose.anthropic_request(anthropic_request, self.decision, placement=self.placement)

    def messages(self, messages: list[dict[str, Any]], base: str | None = None) -> list[dict[str, Any]]:
        """An OpenAI-style message list with the steering text placed (by default a trailing
        user message; history untouched)."""
        return compose.with_system(messages, self.decision, base=base, placement=self.placement)


class SteeringSession:
    """One run of one agent on a shared (thread-backed) client; sync and async calls."""

    def __init__(
        self,
        client: SyncSteeringClient,
        run_id: str | None = None,
        *,
        model: str | None = None,
        on_stop: Literal["raise", "return"] = "raise",
        placement: compose.Placement = "end",
        call_gate: bool | None = None,
        gate: GateMode | None = None,
        **run_fields: Any,
    ) -> None:
        """`call_gate`: the pre-call gate (`check_call`) on or off for this run; default the
        client's (`RB_CLIENT_CALL_GATE`, on). `gate`: its mode, "lenient" or "strict"; default
        the client's (`RB_CLIENT_GATE_MODE`, lenient)."""
        if on_stop not in ("raise", "return"):
            raise ValueError(f"on_stop must be 'raise' or 'return', got {on_stop!r}")
        # A misspelt option (`modle_routing=`) or a value the worker would refuse is a mistake
        # in the code: raised here, with a suggestion, not found out as an unsteered run.
        check_run_field_names(
            "SteeringSession", run_fields, ("run_id", "model", "on_stop", "placement", "call_gate", "gate")
        )
        validate_run_fields({k: v for k, v in run_fields.items() if v is not None}, extra_names(client))
        self.client = client
        self.on_stop = on_stop
        self.placement = compose.check_placement(placement)
        self.run_id = run_id or f"run-{uuid.uuid4().hex[:12]}"
        self.model = model
        self.run_fields = {k: v for k, v in run_fields.items() if v is not None}
        self._pending: Decision | None = None
        self._first: Decision | None = None  # decision 0, what start() answers again
        self._step = 0  # model calls begun
        self._ended = 0  # steps published
        self._started = False
        self._finished = False
        self._stopped = False
        self.outcome: str | None = None
        self.call_gate = enabled_for(client, call_gate)
        self.gate: GateMode = mode_for(client, gate)
        self.denied_calls = 0  # tool calls check_call denied
        # the taint check_call uses: the newest decision's, a late one keeps it (GateMemory)
        self._memory = GateMemory()
        self._memory.intend(self.run_fields.get("task"))

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> Decision | None:
        """Publish run_start and wait for decision 0. ValueError (before anything is sent)
        when the worker would refuse the run's settings (fsm_thresholds, scorer,
        fsm_transition, task_profile, escalation, monitor options).

        Idempotent: `with SteeringSession(...) as s: s.start()` (the context manager has
        started the run already) gives the same decision 0 and sends nothing again."""
        if self._started:
            return self._first
        validate_run_fields(self.run_fields, extra_names(self.client))
        with tracing.quiet():  # the session writes it: evaluations here, steering at begin_step
            self._pending = self._first = self.client.start_run(
                self.run_id, model=self.model, **self.run_fields
            )
        tracing.record_evaluation(self._pending)
        self._started = True
        self._remember(self._pending)
        return self._pending

    async def astart(self) -> Decision | None:
        if self._started:
            return self._first
        validate_run_fields(self.run_fields, extra_names(self.client))
        with tracing.quiet():
            self._pending = self._first = await self.client.astart_run(
                self.run_id, model=self.model, **self.run_fields
            )
        tracing.record_evaluation(self._pending)
        self._started = True
        self._remember(self._pending)
        return self._pending

    def finish(self, outcome: str = "success") -> None:
        """Publish run_finish; after a stop the outcome is `failure: stopped_by_steering`
        whatever is passed (the stop is why the run ended)."""
        if self._started and not self._finished:
            self._finished = True
            self.outcome = STOPPED_OUTCOME if self._stopped else outcome
            self._memory.forget()
            self.client.finish_run(self.run_id, self.outcome)

    async def afinish(self, outcome: str = "success") -> None:
        if self._started and not self._finished:
            self._finished = True
            self.outcome = STOPPED_OUTCOME if self._stopped else outcome
            self._memory.forget()
            await self.client.afinish_run(self.run_id, self.outcome)

    def __enter__(self) -> SteeringSession:
        if not self._started:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.finish(failure_outcome(exc_type) if exc_type else "success")

    async def __aenter__(self) -> SteeringSession:
        if not self._started:
            await self.astart()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        await self.afinish(failure_outcome(exc_type) if exc_type else "success")

    # -- steps --------------------------------------------------------------
    @property
    def started(self) -> bool:
        return self._started

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def calls(self) -> int:
        return self._step

    @property
    def stopped_by_steering(self) -> bool:
        """True once `begin_step()` met a `stop` decision (the run ends as a failure)."""
        return self._stopped

    def begin_step(self) -> Steering:
        """Steering for the next model call (from the latest decision received). Raises
        `RunStopped` when that decision says `stop` (unless `on_stop="return"`); the call is
        then not counted as begun."""
        if not self._started:
            raise RuntimeError("start() the session before its first step")
        if self._step > self._ended:
            raise RuntimeError(f"end_step() for call {self._step} before beginning another")
        steer = Steering(self._step + 1, self._pending, self.model, self.placement)
        # how the decision steers this call, on the caller's span, if OpenTelemetry records one
        tracing.record_steering(
            self._pending, late=self._late(), requested_model=self.model, guardrail=self._guardrail()
        )
        if steer.action == "stop":
            self._stopped = True
            if self.on_stop == "raise":
                d = self._pending
                step = d.step if d is not None else self._step
                raise RunStopped(self.run_id, step, stop_reason(d), steer.action_reason)
        self._step += 1
        return steer

    def _event(self, fields: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self._ended >= self._step:
            raise RuntimeError("begin_step() before end_step()")
        self._ended = self._step
        return self._step, fields

    def end_step(self, **fields: Any) -> Decision | None:
        """Publish the step (thought, action, action_input, observation, observation_is_error,
        tokens, model_id, difficulty, agent, lead, usage, served_model) and wait for its decision
        (None if late). In a multi-agent loop pass the speaking agent as `agent`; leave `action`
        out for a message. `usage` takes the provider's usage object as it comes (Anthropic's
        `response.usage`, OpenAI's, LangChain's `usage_metadata`: `streams.agent.usage`), so
        the step says what the call cost, cache reads and writes apart; `served_model` the
        model the response names (`response.model`)."""
        k, ev = self._event(fields)
        with tracing.quiet():
            self._pending = self.client.step(self.run_id, k, **ev)
        tracing.record_evaluation(self._pending)  # on the span of the step it evaluated
        self._remember(self._pending)
        return self._pending

    async def aend_step(self, **fields: Any) -> Decision | None:
        k, ev = self._event(fields)
        with tracing.quiet():
            self._pending = await self.client.astep(self.run_id, k, **ev)
        tracing.record_evaluation(self._pending)
        self._remember(self._pending)
        return self._pending

    @property
    def step_log(self) -> list[StepLogEntry]:
        return self.client.step_log(self.run_id)

    def _late(self) -> bool:
        """No decision is held because the latest one missed its deadline (not because
        steering is off or the broker away): what the client's step log says."""
        if self._pending is not None:
            return False
        try:
            log = self.client.step_log(self.run_id)
            return bool(log) and log[-1].late is True
        except Exception:  # a stand-in client without a step log
            return False

    # -- the pre-call gate ----------------------------------------------------
    @property
    def last_decision(self) -> Decision | None:
        """The decision to the run's latest event (None: late, or none yet)."""
        return self._pending

    def _remember(self, d: Decision | None) -> None:
        """A decision handed back (None: late) for the gate's memory: a newer one replaces the
        taint held, a late one keeps it."""
        if d is not None:
            self._memory.remember(d.data)

    def check_call(self, tool: str, args: object) -> GateVerdict:
        """May the agent call `tool` with `args` now? Computed locally from the `taint` list
        (hashes of the values tool outputs introduced) of the newest decision the run has had:
        a late decision leaves the earlier taint in force, and one that comes late after all
        (the client saw it) replaces it. Denied when an argument carries such a value from a
        result that held instructions addressed to the agent; in strict mode (`gate`) also any
        such value in an acting call (sends, pays, deletes, shares, ...). Allowed when the gate
        is off, no decision has come yet, or the one held carries no or a malformed taint list
        (fail open). A denial is counted (`denied_calls`) and logged (one line);
        `streams.agent.gate.denial_text(verdict, tool)` is what to tell the model instead of
        the tool's result."""
        if not self.call_gate:
            return ALLOW
        memory = self._memory.newest(client_memory(self.client, self.run_id))
        policy = getattr(self.client, "gate_policy", None)
        verdict = memory.check(
            tool,
            args,
            strict=self.gate == "strict",
            policy=policy if isinstance(policy, GatePolicy) else None,
        )
        if not verdict.allow:
            self.denied_calls += 1
            log_denial(self.run_id, memory.step, tool, verdict)
            tracing.record_refusal(
                tool, verdict.reason, source_step=verdict.source_step, guardrail=self._guardrail()
            )
        return verdict

    def _guardrail(self) -> bool:
        """The client's `trace_guardrail` (a stand-in client without one: off)."""
        return getattr(self.client, "trace_guardrail", False) is True


def client_memory(client: object, run_id: str) -> GateMemory | None:
    """The client's gate memory of the run (it also sees the decisions that came after their
    deadline), or None (a stand-in client, a run it does not know)."""
    of = getattr(client, "gate_memory", None)
    if not callable(of):
        return None
    try:
        memory = of(run_id)
    except Exception:  # the gate fails open: a client that cannot say leaves the session's own
        return None
    return memory if isinstance(memory, GateMemory) else None


def extra_names(client: object) -> tuple[str, ...]:
    """The names a client was told the workers add (none for a stand-in client)."""
    names = getattr(client, "extra_names", ())
    return tuple(names) if isinstance(names, tuple | list) else ()


class LastRun:
    """What the framework adapters show of the run they started last (sequential use, tests):
    its session, run id and step log. An adapter says where that session is."""

    def _last_session(self) -> SteeringSession | None:
        raise NotImplementedError

    @property
    def session(self) -> SteeringSession | None:
        """The session of the run started last."""
        return self._last_session()

    @property
    def run_id(self) -> str | None:
        s = self._last_session()
        return s.run_id if s else None

    @property
    def step_log(self) -> list[StepLogEntry]:
        s = self._last_session()
        return s.step_log if s else []


def failure_outcome(exc_type: type[BaseException]) -> str:
    return f"failure: {exc_type.__name__}"
