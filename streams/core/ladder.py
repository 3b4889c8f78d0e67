"""The escalation ladder's policy, and the per-run monitor settings a run_start may carry.

Pure. A run's policy comes from its run_start (`escalation`), else from its org's default
(`Defaults`, built from settings at the composition root and handed to the core in the
`Policy`), else the built-in default (`DEFAULT_ESCALATION`: a ladder for the failures whose
precision is measured, exact repeats, calls that never ran and tainted calls; `{"enabled":
false}` at any level turns it off). It is resolved once, at run_start, and kept in the run's
config, so the worker and `rb-streams replay` (given the same settings) climb the same ladder.
See docs/escalation.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..shared.untrusted import cut, fenced, scrub
from .budget import DEFAULT_BUDGET, WaitBudget, parse_budget

ESCALATION_KEYS = ("enabled", "escalate_model_after", "stop_after", "escalation_model", "failure_types")
ESCALATION_MODEL_CHARS = 256
FAILURE_TYPES_MAX = 32
FAILURE_TYPE_CHARS = 64
MONITORS_OFF_MAX = 64


class InvalidRunSettings(ValueError):
    """A run setting that cannot be applied; the message names the field and what is wrong."""


@dataclass(frozen=True)
class EscalationPolicy:
    """A run's ladder, counted in ignored warnings. None for a rung: that rung never comes."""

    enabled: bool = True
    escalate_model_after: int | None = None
    stop_after: int | None = None
    escalation_model: str | None = None
    # The warnings that count as ignored: a monitor's failure type ("loop", "prompt_injection")
    # or one kind of it ("loop.repeat"); None: every warning (what a policy set before said).
    failure_types: tuple[str, ...] | None = None

    def to_wire(self) -> dict[str, Any]:
        wire = {k: getattr(self, k) for k in ESCALATION_KEYS if k != "failure_types"}
        if self.failure_types is not None:  # absent: a config stored as before
            wire["failure_types"] = list(self.failure_types)
        return wire

    def counts(self, failure_type: str, kind: str = "") -> bool:
        """Whether a warning of this failure type (and kind of it) can climb the ladder."""
        ft = self.failure_types
        return ft is None or failure_type in ft or (bool(kind) and f"{failure_type}.{kind}" in ft)

    @property
    def active(self) -> bool:
        """Whether the ladder can climb past the nudge at all."""
        return self.enabled and (self.escalate_model_after is not None or self.stop_after is not None)


def _count(raw: Mapping[str, Any], key: str, where: str) -> int | None:
    v = raw.get(key)
    if v is None:
        return None
    if type(v) is not int or v < 1:
        raise InvalidRunSettings(f"{where}.{key} must be an integer >= 1 or null")
    return v


def _known_fields(raw: Mapping[str, Any], keys: Sequence[str], where: str) -> None:
    """InvalidRunSettings naming the first field of `raw` that is not one of `keys`."""
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        raise InvalidRunSettings(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(keys)})")


def parse_escalation(raw: Any, where: str = "escalation") -> EscalationPolicy:
    """A policy object (run_start `escalation`, RB_ESCALATION, one org's RB_ORG_ESCALATION
    entry) -> EscalationPolicy, or InvalidRunSettings naming the field."""
    if not isinstance(raw, Mapping):
        raise InvalidRunSettings(f"{where} must be an object")
    _known_fields(raw, ESCALATION_KEYS, where)
    enabled = raw.get("enabled", True)
    if type(enabled) is not bool:
        raise InvalidRunSettings(f"{where}.enabled must be true or false")
    model = raw.get("escalation_model")
    if model is not None and (not isinstance(model, str) or not model or len(model) > ESCALATION_MODEL_CHARS):
        raise InvalidRunSettings(
            f"{where}.escalation_model must be a non-empty string of at most "
            f"{ESCALATION_MODEL_CHARS} characters, or null"
        )
    types = raw.get("failure_types")
    if types is not None and (
        not isinstance(types, list)
        or len(types) > FAILURE_TYPES_MAX
        or not all(isinstance(t, str) and 0 < len(t) <= FAILURE_TYPE_CHARS for t in types)
    ):
        raise InvalidRunSettings(
            f"{where}.failure_types must be a list of at most {FAILURE_TYPES_MAX} failure types "
            f'("loop", "loop.repeat", "prompt_injection", ...), or null'
        )
    return EscalationPolicy(
        enabled=enabled,
        escalate_model_after=_count(raw, "escalate_model_after", where),
        stop_after=_count(raw, "stop_after", where),
        escalation_model=model,
        failure_types=None if types is None else tuple(dict.fromkeys(types)),
    )


# The built-in default, for a run whose run_start, org and deployment set none (measured on the
# dev runs: QUALITY.md#the-default-ladder). Only the warnings whose precision is
# proven climb it: the same call with the same result or error, or the same edit, again
# ("loop.repeat"); calls that never ran, refused with the same error ("loop.not_run"); a wait
# whose result has not changed past its budget ("loop.wait"); a call carrying a value from a
# result that held instructions ("prompt_injection"). The others nudge, as before.
DEFAULT_FAILURE_TYPES = ("loop.repeat", "loop.not_run", "loop.wait", "prompt_injection")
DEFAULT_ESCALATION = EscalationPolicy(
    escalate_model_after=1, stop_after=2, failure_types=DEFAULT_FAILURE_TYPES
)


MONITOR_KEYS = ("monitors_off", "monitor_thresholds")


@dataclass(frozen=True)
class MonitorDefaults:
    """A deployment's or an org's default `monitors_off` / `monitor_thresholds` (settings
    RB_MONITOR_DEFAULTS, RB_ORG_MONITOR_DEFAULTS), for runs whose run_start sets none. None:
    not set. The names are checked against the worker's suite at start (`Defaults.check`)."""

    monitors_off: tuple[str, ...] | None = None
    monitor_thresholds: Mapping[str, Any] | None = None

    @classmethod
    def parse(cls, raw: Any, where: str) -> MonitorDefaults:
        if not isinstance(raw, Mapping):
            raise InvalidRunSettings(f"{where} must be an object with {' and/or '.join(MONITOR_KEYS)}")
        _known_fields(raw, MONITOR_KEYS, where)
        off, levels = raw.get("monitors_off"), raw.get("monitor_thresholds")
        if off is not None and (not isinstance(off, list) or not all(isinstance(x, str) for x in off)):
            raise InvalidRunSettings(f"{where}.monitors_off must be a list of monitor names")
        if levels is not None and not isinstance(levels, Mapping):
            raise InvalidRunSettings(f"{where}.monitor_thresholds must be an object {{monitor: level}}")
        return cls(
            None if off is None else tuple(off),
            None if levels is None else MappingProxyType(dict(levels)),
        )

    def check(self, known: Sequence[str], where: str) -> None:
        """InvalidRunSettings naming `where` when a name is no monitor of the suite or a level
        is out of range (the same checks as a run_start's own settings)."""
        try:
            parse_monitors_off(None if self.monitors_off is None else list(self.monitors_off), known)
            parse_thresholds(self.monitor_thresholds, known)
        except InvalidRunSettings as exc:
            raise InvalidRunSettings(f"{where}: {exc}") from None


NO_MONITOR_DEFAULTS = MonitorDefaults()


@dataclass(frozen=True)
class Defaults:
    """Org-wide run defaults: the ladder's policy (settings RB_ESCALATION, RB_ORG_ESCALATION)
    and the monitor settings (RB_MONITOR_DEFAULTS, RB_ORG_MONITOR_DEFAULTS) of a run whose
    run_start names none. An org's own entry wins over the deployment's."""

    default: EscalationPolicy | None = DEFAULT_ESCALATION
    by_org: Mapping[str, EscalationPolicy] = field(default_factory=lambda: MappingProxyType({}))
    monitors: MonitorDefaults = NO_MONITOR_DEFAULTS
    monitors_by_org: Mapping[str, MonitorDefaults] = field(default_factory=lambda: MappingProxyType({}))
    # A wait's budget with no change in its result (RB_WAIT_BUDGET_S/_CALLS/_USD, and per org
    # RB_ORG_WAIT_BUDGET: an org's own fields win, the others are the deployment's).
    wait: WaitBudget = DEFAULT_BUDGET
    wait_by_org: Mapping[str, WaitBudget] = field(default_factory=lambda: MappingProxyType({}))

    def for_org(self, org_id: str) -> EscalationPolicy | None:
        return self.by_org.get(org_id, self.default)

    def wait_for_org(self, org_id: str) -> WaitBudget:
        return self.wait_by_org.get(org_id, self.wait)

    def monitors_for_org(self, org_id: str) -> MonitorDefaults:
        return self.monitors_by_org.get(org_id, self.monitors)

    def check(self, known: Sequence[str]) -> None:
        """Every monitor name the defaults use is one of the suite's (InvalidRunSettings)."""
        self.monitors.check(known, "RB_MONITOR_DEFAULTS")
        for org, md in self.monitors_by_org.items():
            md.check(known, f"RB_ORG_MONITOR_DEFAULTS[{org!r}]")

    @classmethod
    def parse(
        cls,
        default: Any = None,
        by_org: Any = None,
        monitors: Any = None,
        monitors_by_org: Any = None,
        wait: WaitBudget = DEFAULT_BUDGET,
        wait_by_org: Any = None,
    ) -> Defaults:
        """From the settings' decoded JSON (None: not set: the built-in default ladder);
        InvalidRunSettings when bad."""
        base = DEFAULT_ESCALATION if default is None else parse_escalation(default, "RB_ESCALATION")
        orgs: dict[str, EscalationPolicy] = {}
        if by_org is not None:
            if not isinstance(by_org, Mapping):
                raise InvalidRunSettings("RB_ORG_ESCALATION must be an object {org_id: policy}")
            for org, pol in by_org.items():
                orgs[str(org)] = parse_escalation(pol, f"RB_ORG_ESCALATION[{org!r}]")
        mons = (
            NO_MONITOR_DEFAULTS
            if monitors is None
            else MonitorDefaults.parse(monitors, "RB_MONITOR_DEFAULTS")
        )
        mon_orgs: dict[str, MonitorDefaults] = {}
        if monitors_by_org is not None:
            if not isinstance(monitors_by_org, Mapping):
                raise InvalidRunSettings("RB_ORG_MONITOR_DEFAULTS must be an object {org_id: settings}")
            for org, raw in monitors_by_org.items():
                mon_orgs[str(org)] = MonitorDefaults.parse(raw, f"RB_ORG_MONITOR_DEFAULTS[{org!r}]")
        waits: dict[str, WaitBudget] = {}
        if wait_by_org is not None:
            if not isinstance(wait_by_org, Mapping):
                raise InvalidRunSettings("RB_ORG_WAIT_BUDGET must be an object {org_id: budget}")
            for org, raw in wait_by_org.items():
                try:
                    waits[str(org)] = parse_budget(raw, f"RB_ORG_WAIT_BUDGET[{str(org)[:64]!r}]", wait)
                except ValueError as exc:
                    raise InvalidRunSettings(str(exc)) from None
        return cls(
            base, MappingProxyType(orgs), mons, MappingProxyType(mon_orgs), wait, MappingProxyType(waits)
        )


NO_DEFAULTS = Defaults()  # the built-in defaults: the default ladder, no monitor settings


def resolve(raw: Any, org_id: str, defaults: Defaults) -> EscalationPolicy | None:
    """The run's policy: its run_start's `escalation` (null or absent: the org's default)."""
    if raw is not None:
        return parse_escalation(raw)
    return defaults.for_org(org_id)


def check_names(raw: Any, known: Sequence[str], where: str) -> list[str]:
    """The monitor names a run setting uses, each known, or InvalidRunSettings naming the
    first unknown one."""
    names = list(raw)
    for name in names:
        if name not in known:
            raise InvalidRunSettings(
                f"{where}: unknown monitor {str(name)[:100]!r} (known: {', '.join(known)})"
            )
    return names


def parse_monitors_off(raw: Any, known: Sequence[str]) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > MONITORS_OFF_MAX:
        raise InvalidRunSettings(f"monitors_off must be a list of at most {MONITORS_OFF_MAX} monitor names")
    return sorted(set(check_names(raw, known, "monitors_off")))


def parse_thresholds(raw: Any, known: Sequence[str]) -> dict[str, float]:
    """{monitor: fire level in (0, 1]}."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InvalidRunSettings("monitor_thresholds must be an object {monitor: level}")
    out: dict[str, float] = {}
    for name in check_names(raw, known, "monitor_thresholds"):
        v = raw[name]
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 < float(v) <= 1.0:
            raise InvalidRunSettings(f"monitor_thresholds.{name} must be a number in (0, 1]")
        out[name] = float(v)
    return out


def check_weight_names(raw: Any, known: Sequence[str]) -> None:
    """A `monitor_weights` key that names no monitor is refused (it used to be dropped)."""
    if isinstance(raw, Mapping):
        check_names(raw, known, "monitor_weights")


# -- the ladder itself -------------------------------------------------------------------------

# A warning is judged on the first call the agent makes after reading it (the next step with
# an action; steps without one, a plan or a message, are passed over, at most this many).
WATCH_STEPS = 3
CALLS_KEPT = 4  # the calls a warning is about: the warned step's and the few before it
STEPS_KEPT = 8  # evidence steps kept (action_reason.steps)
HEAD_CHARS = 160  # how much of a warning's text the state keeps, to quote it back
RUNGS = ("continue", "nudge", "escalate", "stop")  # in order: down only on progress (`progress`)
PROGRESS_STEPS = 3  # calls in a row on which no monitor fires: the run makes progress


def policy_of(wire: Mapping[str, Any] | None) -> EscalationPolicy | None:
    """The run config's stored policy, when it can climb past the nudge (else None)."""
    if wire is None:
        return None
    pol = parse_escalation(wire)
    return pol if pol.active else None


def escalation_model(pol: EscalationPolicy, routing: Mapping[str, str]) -> str | None:
    return pol.escalation_model or routing.get("SLOW")


def head(text: str) -> str:
    """The warning's first sentence or so, on one line, never cut inside a quotation's fence."""
    return cut(text, HEAD_CHARS)


@dataclass(frozen=True, slots=True)
class Ignored:
    """A warning the step did not heed: its monitor, failure type, step, and text's head."""

    monitor: str
    failure_type: str
    warned_at: int
    head: str


def call_key(sig: str) -> str:
    """A short stable key of a call (tool + full input): what `judge` compares."""
    return hashlib.blake2b(sig.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def judge(
    warnings: Sequence[Sequence[Any]], said: Sequence[tuple[str, str]], step: int, call: str | None
) -> tuple[Ignored | None, list[list[Any]]]:
    """The pending warnings ([monitor, failure_type, step, head, calls]) against this step:
    a warning is ignored when this step, the first call after it, is one of the calls it was
    about (`calls`: the warned step's call and the few before it, the same tool with the same
    input) and its monitor finds the same failure again (fires with something to say). A call
    that does anything else heeds it. Returns the ignored warning (the strongest monitor's;
    one per step) and the warnings still pending (none once a call was judged)."""
    unread = [list(w) for w in warnings if int(w[2]) >= step]  # carried by this step's decision
    pending = [list(w) for w in warnings if 0 < step - int(w[2]) <= WATCH_STEPS]
    if call is None:  # no call: a plan or a message; the next call is judged
        return None, [*pending, *unread]
    for name, _text in said:
        for w in pending:
            if w[0] == name and call in w[4]:
                return Ignored(str(w[0]), str(w[1]), int(w[2]), scrub(head(str(w[3])))), unread
    return None, unread


def warn(
    warnings: Sequence[Sequence[Any]],
    said: Sequence[tuple[str, str]],
    failure_types: Mapping[str, str],
    step: int,
    calls: Sequence[str],
) -> list[list[Any]]:
    """The pending warnings after this step's decision carried `said`'s texts to the agent: one
    per monitor (its latest), so the list is bounded by the suite. `calls`: the run's last few
    calls (keys), this step's last: what the warning is about."""
    fresh = {name for name, _ in said}
    kept = [list(w) for w in warnings if w[0] not in fresh]
    about = list(calls[-CALLS_KEPT:])
    return [*kept, *([n, failure_types.get(n, n), step, head(t), about] for n, t in said)]


def next_rung(pol: EscalationPolicy, ignored: int, rung: str, may_stop: bool = True) -> str:
    """The rung after `ignored` ignored warnings (never below `rung`). `may_stop` is False when
    the ignored warning cannot justify ending the run, which then escalates but never stops:
    a sub-agent's (its loop ends when it reports back, and the agent above it has ignored
    nothing), or a repeated call whose program or script could not run at all (`command not
    found`: a limit of the environment, not a failing approach; the task can still be done
    without that program, and a stronger model is told so)."""
    want = "nudge"
    if pol.stop_after is not None and ignored >= pol.stop_after and may_stop:
        want = "stop"
    elif pol.escalate_model_after is not None and ignored >= pol.escalate_model_after:
        want = "escalate"
    return higher(rung, want)


def _steps(steps: Sequence[int]) -> str:
    s = [str(x) for x in steps]
    return s[0] if len(s) == 1 else f"{', '.join(s[:-1])} and {s[-1]}"


def _at(steps: Sequence[int]) -> str:
    return f"step {_steps(steps)}" if len(steps) == 1 else f"steps {_steps(steps)}"


def escalation_sentence(model: str | None) -> str:
    """What an escalated action_reason says of the next calls: the model they go to, or that
    none is configured (the ladder's texts and data_instruction's share it)."""
    if model:
        return f" The next calls go to {fenced(model, 80)}."
    return " No escalation model is configured (escalation_model or model_routing.SLOW): the calls are not rerouted."


def reason(
    ig: Ignored, ignored: int, pairs: Sequence[Sequence[int]], rung: str, model: str | None
) -> dict[str, Any]:
    """The decision's `action_reason` (escalate or stop): what was warned, what was done again.
    `pairs`: [step warned, step that did it again] of the last few ignored warnings."""
    steps = [p[1] for p in pairs]
    text = (
        f"{ig.monitor} warned at {_at([p[0] for p in pairs])} ({ig.head}); the agent did the same "
        f"again at {_at(steps)}: {ignored} warning{'s' if ignored != 1 else ''} ignored."
    )
    if rung == "escalate":
        text += escalation_sentence(model)
    return {
        "monitor": ig.monitor,
        "failure_type": ig.failure_type,
        "ignored": ignored,
        "steps": steps,
        "text": scrub(text),
    }


def higher(rung: str, other: str) -> str:
    return max(rung, other, key=RUNGS.index)


def injection(rung: str, why: Mapping[str, Any], ig: Ignored | None) -> str:
    """The text the agent reads on a ladder step, before the monitors' own texts (`why` may be
    a stored reason of before the texts were scrubbed: scrubbed again)."""
    said = scrub(str(why["text"]))
    if rung == "stop":
        return (
            f"STOP. {said} End the run now: make no more tool calls; reply with what you "
            "found, what you changed, and what is still unresolved."
        )
    if rung == "escalate":
        return f"ESCALATED. {said} Do not repeat it: change your approach."
    assert ig is not None
    return (
        f"You were warned at step {ig.warned_at} ({ig.head}) and did the same again. Do not repeat "
        "it: change your approach."
    )


# -- progress: the rung comes down ----------------------------------------------------------


def result_key(obs_hash: str, failed: bool) -> str:
    """What a call's result is compared on when the call comes back (`progress`)."""
    return f"{obs_hash[:8]}{'!' if failed else ''}"


@dataclass(frozen=True, slots=True)
class Progress:
    """A call on the escalate or stop rung, judged: the rung, ignored count and quiet streak
    after it, and `how` the run progressed when the rung came down (else None)."""

    rung: str
    ignored: int
    quiet: int
    how: str | None = None


def progress(
    pol: EscalationPolicy,
    rung: str,
    ignored: int,
    quiet: int,
    rung_call: Sequence[str],
    call: str,
    result: str,
    fired: bool,
) -> Progress:
    """A run on escalate or stop makes progress with a call on which no monitor fires that is
    either the call it did again against a warning (`rung_call`), now with a new result (the
    CI job completed, the test passes), or the PROGRESS_STEPS-th such call in a row. Then the
    rung comes down one: stop to escalate (to nudge when the policy has no escalate rung),
    escalate to nudge; the ignored count goes back to where that rung starts, so a run that
    falls back into the loop climbs again, warning by warning."""
    if fired:
        return Progress(rung, ignored, 0)
    quiet += 1
    if len(rung_call) == 2 and call == rung_call[0] and result != rung_call[1]:
        how = "a new result for the call it was warned about"
    elif quiet >= PROGRESS_STEPS:
        how = f"{quiet} calls in a row with no warning"
    else:
        return Progress(rung, ignored, quiet)
    if rung == "stop" and pol.escalate_model_after is not None:
        return Progress("escalate", min(ignored, pol.escalate_model_after), 0, how)
    return Progress("nudge", 0, 0, how)


def lowered(
    why: Mapping[str, Any] | None, p: Progress, steps: Sequence[Sequence[int]], step: int
) -> dict[str, Any] | None:
    """The `action_reason` of a run brought down from stop to escalate (None on nudge: no
    reason is carried there)."""
    if p.rung != "escalate" or why is None:
        return None
    kept = [list(x) for x in steps][-p.ignored :] if p.ignored else []
    return {
        "monitor": why["monitor"],
        "failure_type": why["failure_type"],
        "ignored": p.ignored,
        "steps": [x[1] for x in kept],
        "text": (
            f"{why['monitor']} warnings were ignored until the run was told to stop; it then made "
            f"progress at step {step} ({p.how}), so it is back on escalate: the next calls still go "
            "to the escalation model."
        ),
    }


def lifted(step: int, how: str) -> str:
    """The text the agent reads when a stop no longer holds."""
    return (
        f"The earlier STOP no longer holds: the run made progress at step {step} ({how}). Go on "
        "with the task, and do not go back to the calls you were warned about."
    )
