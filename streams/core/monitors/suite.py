"""Runs a suite of monitors on one step and combines them: scores, fired, composite, failure
type, steering text. Pure: (monitor state, step) -> (new monitor state, result).

The suite is a tuple of `Monitor`s (`builtin.DEFAULT_MONITORS` unless one is passed in: a
`Policy` may carry its own); every monitor is called the same way, and nothing here names one.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, is_dataclass
from typing import Any

import orjson

from ...shared.untrusted import scrub
from ..budget import WaitBudget
from ..decision import MonitorsWire
from ..evolve import drop_defaults, non_default
from ..prices import ModelPrice
from ..quoting import unquote_flagged
from ..reading.features import StepFeatures
from .base import FIRE_AT, NOTHING, Context, Finding, Monitor, clip01
from .builtin import DEFAULT_MONITORS
from .profiles import composite
from .semantics import Semantics

Suite = tuple[Monitor[Any], ...]

# The order the run state has always stored the built-in monitors' states in (MonitorState was
# a dataclass with these fields): kept, so that a state encodes to the same bytes as before.
STORED_ORDER = ("loop", "verification", "contradiction", "compression", "sprawl", "drift")
# Beside the monitors' states: the run's top-level agent, the first one that spoke, or the
# latest a step marked `lead` (a hand-off: the agent took over). A name of at most NAME_KEPT
# chars. Only its final answer ends the run, and only its ignored warnings stop it.
LEAD = "lead"


class MonitorState(dict[str, Any]):
    """Every monitor's bounded memory of the run: state key (`Monitor.key`) -> its state.

    A dict, so that the run state encodes it (orjson, `asdict`) as the JSON object it always
    was: {"loop": {...}, "verification": {...}, ...}, plus the run's top-level agent under
    LEAD once an agent has spoken. Built anew by every `evaluate`, never
    changed afterwards. A decoded run state holds each monitor's state as stored (a dict,
    a plugin monitor's included), decoded by its monitor when it runs.
    """

    def __eq__(self, other: object) -> bool:
        """Equal when stored alike: a state as stored and the same state decoded are one state
        (whether stored whole or compact: `compact_monitors`)."""
        if not isinstance(other, Mapping):
            return NotImplemented
        return _sorted_json(compact_monitors(self)) == _sorted_json(compact_monitors(other))

    @classmethod
    def initial(cls, suite: Suite = DEFAULT_MONITORS) -> MonitorState:
        return cls((m.key, m.initial()) for m in _stored_order(suite))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MonitorState:
        """The stored object, each monitor's state kept as stored until its monitor runs and
        decodes it (`_state_of`): a run with monitors off, or a state only looked at, never pays
        for decoding six of them (states written by earlier versions included: a monitor's
        state missing from it starts afresh when the monitor next runs)."""
        return cls(d)


def _sorted_json(d: Mapping[str, Any]) -> bytes:
    return orjson.dumps(d, option=orjson.OPT_SORT_KEYS)


# The built-in monitors' state classes by state key: a memory kept as stored is made compact
# by its class's defaults (a plugin monitor's stored memory is kept as it is).
_STATE_CLASSES: dict[str, type] = {m.key: m.state for m in DEFAULT_MONITORS if isinstance(m.state, type)}


def compact_monitors(ms: Mapping[str, Any]) -> dict[str, Any]:
    """The monitors' memories as the run state stores them: each one's fields that differ from
    their defaults (`evolve.non_default`), a memory that is all defaults left out (a monitor
    whose memory is missing starts from its initial state, `_state_of`, which is the same)."""
    out: dict[str, Any] = {}
    for k, v in ms.items():
        if type(v) is dict:  # as stored (a state decoded, its monitor not run since)
            cls = _STATE_CLASSES.get(k)
            c: Any = v if cls is None else drop_defaults(cls, v)
        elif is_dataclass(v) and not isinstance(v, type):
            c = non_default(v)
        else:  # the run's lead agent (a name), or a plugin's memory of its own shape
            out[k] = v
            continue
        if c:
            out[k] = c
    return out


# The memories to store of the suites encoded lately, by identity (the suite kept beside, so
# its id is not reused meanwhile): a run whose monitors did not run this step (monitors off, a
# state not monitored) hands on the same suite, which is then not looked through again.
_SUITES_KEPT = 4096
_suites_stored: dict[int, tuple[MonitorState, dict[str, Any] | None]] = {}


@functools.cache
def _initial(cls: type) -> tuple[dict[str, Any], bytes]:
    st = cls()
    return dict(vars(st)), orjson.dumps(st)


def _is_initial(k: str, v: Any) -> bool:
    """Whether memory `v` (under state key `k`) is its built-in monitor's initial memory, as
    stored: compared field by field (in C, stopping at the first field that differs), then, when
    alike, as encoded (so that a 0 where the initial memory holds 0.0 is not taken for it)."""
    cls = _STATE_CLASSES.get(k)
    if cls is None:
        return False
    fields_, enc = _initial(cls)
    if type(v) is cls:
        return vars(v) == fields_ and orjson.dumps(v) == enc
    return type(v) is dict and v == fields_ and orjson.dumps(v) == enc


def stored_monitors(ms: MonitorState) -> dict[str, Any] | None:
    """The monitors' memories as the run state stores them (None: none to store): a memory
    that is its monitor's initial one is left out (a monitor whose memory is missing starts
    from its initial state, `_state_of`: the same), the others are written whole.
    `MonitorState.__eq__` compares the `compact_monitors` of two, which holds the same."""
    hit = _suites_stored.get(id(ms))
    if hit is not None and hit[0] is ms:
        return hit[1]
    out = {k: v for k, v in ms.items() if not _is_initial(k, v)} or None
    if len(_suites_stored) >= _SUITES_KEPT:
        _suites_stored.clear()
    _suites_stored[id(ms)] = (ms, out)
    return out


@functools.cache
def _stored_order(suite: Suite) -> Suite:
    rank = {k: i for i, k in enumerate(STORED_ORDER)}
    return tuple(sorted(suite, key=lambda m: rank.get(m.key, len(rank))))


@dataclass(frozen=True, slots=True)
class _Plan:
    """What evaluating a suite needs, worked out once per suite."""

    order: Suite  # the suite, a monitor after those it names in `after`
    names: tuple[str, ...]  # in the suite's order: the order of scores
    index: dict[str, int]
    failure_types: dict[str, str]


@functools.cache
def _plan(suite: Suite) -> _Plan:
    names = tuple(m.name for m in suite)
    if len(set(names)) != len(names) or len({m.key for m in suite} - {LEAD}) != len(suite):
        raise ValueError(f"monitor names and state keys must be unique (and not {LEAD!r}): {names}")
    index = {n: i for i, n in enumerate(names)}
    return _Plan(_run_order(suite), names, index, {m.name: m.failure_type for m in suite})


def _run_order(suite: Suite) -> Suite:
    """The suite in its order, except that a monitor comes after those it names in `after`."""
    names = {m.name for m in suite}
    done: set[str] = set()
    out: list[Monitor[Any]] = []
    pending = list(suite)
    while pending:
        ready = next((m for m in pending if all(a in done or a not in names for a in m.after)), None)
        if ready is None:
            raise ValueError(f"monitors wait for each other: {[m.name for m in pending]}")
        pending.remove(ready)
        out.append(ready)
        done.add(ready.name)
    return tuple(out)


def _state_of(ms: Mapping[str, Any], m: Monitor[Any]) -> Any:
    st = ms.get(m.key)
    if st is None:
        return m.initial()
    return m.decode(st) if type(st) is dict else st  # kept as stored (see MonitorState)


@dataclass(frozen=True, slots=True)
class MonitorResult:
    scores: dict[str, float]
    fired: list[str]
    composite: float
    failure_type: str | None
    text: str | None  # steering text of every fired monitor, strongest first
    final: bool = False  # the step finished the run: nothing reads an injection
    # (monitor, its text) of each fired monitor with something to say, strongest first: what
    # the escalation ladder remembers as a warning and judges the next steps against
    said: tuple[tuple[str, str], ...] = ()
    # which failure each fired monitor found, when it tells them apart (`Finding.kind`)
    kinds: Mapping[str, str] = field(default_factory=dict)

    def as_wire(self) -> MonitorsWire:
        return {
            "scores": self.scores,
            "fired": self.fired,
            "composite": self.composite,
            "failure_type": self.failure_type,
        }


def to_embed(ms: Mapping[str, Any], suite: Suite = DEFAULT_MONITORS) -> list[str]:
    """Texts the run's next step will embed with the full model: the adapter may embed them in
    the background meanwhile, so the decision path finds them cached."""
    return [t for m in suite if m.to_embed is not None for t in m.to_embed(_state_of(ms, m))]


def evaluate(
    ms: Mapping[str, Any],
    f: StepFeatures,
    weights: Mapping[str, float],
    task: str | None,
    sem: Semantics,
    suite: Suite = DEFAULT_MONITORS,
    off: Collection[str] = (),
    thresholds: Mapping[str, float] | None = None,
    wait_budget: WaitBudget | None = None,
    price: ModelPrice | None = None,
) -> tuple[MonitorState, MonitorResult]:
    """`off`: monitors switched off for the run (not evaluated: score 0, state kept, never
    fire); `thresholds`: the run's fire level per monitor (FIRE_AT for the others)."""
    plan = _plan(suite)
    names, index = plan.names, plan.index
    found: dict[str, Finding] = {}
    ctx = Context(task, found, wait_budget, price)
    new = MonitorState(ms) if ms else MonitorState.initial(suite)
    lead = ms.get(LEAD) or ""
    if f.agent and not f.by_user and (not lead or (f.takes_lead and f.agent != lead)):
        lead = new[LEAD] = f.agent
    for m in plan.order:
        if off and m.name in off:
            found[m.name] = NOTHING
            continue
        new[m.key], found[m.name] = m.evaluate(_state_of(ms, m), f, ctx, sem)
    scores = {n: round(clip01(found[n].score), 4) for n in names}
    level = thresholds or {}
    fired = sorted(
        (n for n in names if scores[n] >= level.get(n, FIRE_AT) and n not in off),
        key=lambda n: (-scores[n], -weights.get(n, 0.0), index[n]),
    )
    # every text through the backstop: a monitor (a plugin's too) that let event text through
    # unquoted still cannot forge the marker, a tag, a control character or an open fence, and
    # a fence it set around event text holding instructions is named instead (`quoting`)
    spoken = tuple((n, scrub(unquote_flagged(t))) for n in fired if (t := found[n].text))
    texts = [t for _n, t in spoken]
    said = tuple((n, t) for n, t in spoken if not found[n].advice)  # advice is never "ignored"
    result = MonitorResult(
        scores=scores,
        fired=fired,
        composite=composite(scores, weights),
        failure_type=plan.failure_types[fired[0]] if fired else None,
        text="\n\n".join(texts) if texts else None,
        # a sub-agent's final answer is a report to the agent above it: the run goes on
        final=f.finishes and (not f.agent or f.agent == lead),
        said=said,
        kinds={n: found[n].kind for n in fired if found[n].kind},
    )
    return new, result
