"""Waiting is not looping: the same call again, after time has passed, on a result that says
"not yet" or "not now".

The first complaint users have about every loop detector is that it stops agents that poll a
CI job or retry a busy service. Such a call repeats by design: what it asks about changes
with time, so the same "in progress" again says nothing about the run's progress. Two kinds
of result make a call one to wait on (`kind`):

- a pending state: in progress, queued, pending, not ready, `"status": "running"`,
  `ContainerCreating`;
- a transient error: HTTP 5xx, 429, a rate limit, a network timeout, "retry", "try again",
  "temporarily unavailable". (A command the framework timed out is not one: the command hung.)
A file opened with a read or editor tool is content, never a pending state.

A repeat of such a call is *waiting* when it is spaced out in real time (`spaced`): the time
since the same call last ran is at least WAIT_GAP_S and at least WAIT_RATIO times the run's
usual step gap (an agent whose every step takes 8 s of model time does not wait by taking
8 s), or it backs off (the gap at least doubled since the call's previous one, and is past
BACKOFF_MIN_S and the usual gap). Times are the events' own `ts`, never the worker's clock,
so replay decides alike. A 503 retried with no time between is not waiting: it is a loop.

A long wait gets its own advice, once per WAIT_BUDGET_S of it (`Waits.advance`). A wait whose
result does not change is different: the same answer again and again is no sign that the work
moves, and each call resends the run's whole context. It has a budget (`WaitBudget`: calls,
estimated dollars and seconds since the result last changed; RB_WAIT_BUDGET_*, per org
RB_ORG_WAIT_BUDGET). Past any of them the wait is warned as a loop (`Wait.over`), and the
escalation ladder judges it like one. A result that changes (a progress count, a new state)
starts the budget afresh. Pure and bounded: a run's state keeps GAPS_KEPT gaps and WAITS_KEPT
waits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import routing
from ..budget import DEFAULT_BUDGET, WAIT_BUDGET_S, WAIT_PRICE, WaitBudget, parse_budget
from ..prices import ModelPrice
from ..reading.features import StepFeatures, mask_volatile, short_hash

WAIT_GAP_S = 10.0  # seconds between the same call, at least, for a repeat to be waiting
WAIT_RATIO = 2.0  # ... and at least this many of the run's usual step gaps
BACKOFF_GROWTH = 2.0  # a gap this many times the call's previous gap is a backoff
BACKOFF_MIN_S = 2.0  # ... when it is at least this long
GAPS_KEPT = 8  # gaps of ordinary steps kept: the run's usual step gap is their median
__all__ = ["DEFAULT_BUDGET", "WAIT_BUDGET_S", "WaitBudget", "parse_budget"]
WAITS_KEPT = 4  # waits tracked at once (one per call waited on)
TRANSIENT_CHARS = 400  # of a result's head read for a transient error
SHORT_RESULT = 400  # a result that did not fail must be this short to be a transient error
PENDING_CHARS = 2000  # of a result's head read for a pending state

PENDING = re.compile(
    r"\b(?:in[ _-]progress|queued|pending|not (?:yet )?ready|containercreating|podinitializing|"
    r"init:\d{1,3}/\d{1,3}|still (?:running|starting|pending|processing|building|waiting|in progress)|"
    r"waiting for (?:the )?(?:job|run|build|pod|container|deployment|workflow|operation)s?|"
    r"not (?:yet )?(?:finished|completed?|done))\b"
    r"|\b(?:status|state|phase)[\"']?\s{0,3}[:=]\s{0,3}[\"']?"
    r"(?:running|starting|waiting|creating|provisioning|initializing|building|processing)\b",
    re.IGNORECASE,
)
TRANSIENT = re.compile(
    r"\brate[ _-]?limit|\btoo many requests|\bthrottl|\btemporarily\b|"
    r"\btemporary (?:failure|error|issue|problem|outage)|\bunavailable\b|\boverloaded\b|"
    r"\bconnection (?:reset|refused|aborted)|\becon(?:nreset|nrefused)\b|\betimedout\b|\btry again|\bretry|"
    r"\b(?:connect(?:ion)?|read|request|gateway|socket|upstream|network) ?timed? ?out|"
    r"\b(?:http\S{0,4}|status(?:[ _]code)?|code|error)\W{0,4}(?:429|5\d\d)\b|"
    r"\b(?:429|5\d\d)\W{1,3}(?:internal|bad gateway|service|gateway|too many|server)",
    re.IGNORECASE,
)
# What every match of a pattern holds, lower case (`_may_match`): one of its words, or one
# word of each tuple of a pair. A result with none of it (most results) is not searched: a
# case-blind pattern with a word boundary first reads 2 KB in ~50 us, these searches ~5 us.
_Cues = tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]]
_PENDING_CUES: _Cues = (
    (
        "containercreating",
        "progress",
        "init:",
        "not ready",
        "not yet ",
        "not finished",
        "not complete",
        "not done",
        "pending",
        "podinitializing",
        "queued",
        "still ",
        "waiting for ",
    ),
    (
        (
            ("stat", "phase"),
            (
                "running",
                "starting",
                "waiting",
                "creating",
                "provisioning",
                "initializing",
                "building",
                "processing",
            ),
        ),
    ),
)
_TRANSIENT_CUES: _Cues = (
    (
        "limit",
        "too many requests",
        "throttl",
        "temporar",
        "unavailable",
        "overloaded",
        "connection ",
        "econn",
        "etimedout",
        "try again",
        "retry",
        "timeout",
        "time out",
        "timedout",
        "timed out",
    ),
    (),
)
# A status code TRANSIENT names (an ASCII text: `\d` is an ASCII digit there), and the words
# one of those alternatives holds next to it.
_STATUS_CODE = re.compile(r"429|5\d\d")
_STATUS_WORDS = ("http", "status", "code", "error", "internal", "gateway", "service", "too many", "server")
# A command that only waits (`sleep 30`): the agent backing off by itself.
SLEEP = re.compile(r"sleep\s{1,8}\d{1,6}(?:\.\d{1,3})?[smh]?")
WAIT_TOOLS = frozenset({"wait", "sleep"})


_KIND_LAST: list[Any] = [None, ""]  # the last step asked and its answer (the loop asks twice)


def kind(f: StepFeatures) -> str:
    """What makes step `f` a call to wait on: "sleep" (it only waits), "transient" (a failure
    of the moment), "pending" (the work asked about is not done yet), or "" (none: a result
    like any other)."""
    if f is _KIND_LAST[0]:
        return str(_KIND_LAST[1])
    got = _kind(f)
    _KIND_LAST[:] = [f, got]
    return got


def _kind(f: StepFeatures) -> str:
    if not f.action or f.modifies:
        return ""
    if f.action in WAIT_TOOLS or (f.command and SLEEP.fullmatch(f.command[:40].strip())):
        return "sleep"
    obs = f.whole_observation
    if not obs:
        return ""
    if (f.is_error or len(obs) <= SHORT_RESULT) and (
        _transient(f.error_line[:TRANSIENT_CHARS]) or _transient(obs[:TRANSIENT_CHARS])
    ):
        return "transient"
    if _pending(obs[:PENDING_CHARS]) and not (f.reads and not f.command):
        return "pending"  # a file opened with a read tool is content: its "not done yet" is a comment
    return ""


def _may_match(t: str, cues: _Cues) -> bool:
    """False when the pattern of `cues` cannot match the text whose lower case is `t`, an ASCII
    text (there a case-blind match is a match of the lowered text): substring searches, mapped
    in C (a generator's step per word cost more than the searches on a short result)."""
    words, pairs = cues
    if any(map(t.__contains__, words)):
        return True
    return any(any(map(t.__contains__, x)) and any(map(t.__contains__, y)) for x, y in pairs)


def _searched(pattern: re.Pattern[str], head: str, cues: _Cues) -> bool:
    """Whether `pattern` matches `head`, searched only when it may."""
    if head.isascii() and not _may_match(head.lower(), cues):
        return False
    return pattern.search(head) is not None


def _pending(head: str) -> bool:
    """Whether `head` states a pending state (PENDING)."""
    return _searched(PENDING, head, _PENDING_CUES)


def _transient(head: str) -> bool:
    """Whether `head` states a failure of the moment (TRANSIENT), searched only when it may: an
    ASCII text with none of the words, and no status code with its words, does not match."""
    if not head:  # every branch of TRANSIENT holds a character (most steps have no error line)
        return False
    if head.isascii():
        t = head.lower()
        if not _may_match(t, _TRANSIENT_CUES) and not (
            any(map(t.__contains__, _STATUS_WORDS)) and _STATUS_CODE.search(t)
        ):
            return False
    return TRANSIENT.search(head) is not None


def usual(gaps: Sequence[float]) -> float | None:
    """The run's usual step gap: the median of the gaps kept (None: none yet)."""
    if not gaps:
        return None
    s = sorted(gaps)
    return s[len(s) // 2]


def gap(a: float | None, b: float | None) -> float | None:
    """Seconds from time `a` to time `b`, when both are known and it is a real span."""
    if a is None or b is None:
        return None
    d = b - a
    return d if math.isfinite(d) and d >= 0 else None


def spaced(dt: float | None, before: float | None, gaps: Sequence[float]) -> bool:
    """A repeat `dt` seconds after the same call (`before`: the gap before that one, if the
    call ran twice already) is spaced out in time: waiting, not a retry."""
    if dt is None:
        return False
    floor = WAIT_RATIO * (usual(gaps) or 0.0)
    if before is not None and before > 0 and dt >= BACKOFF_GROWTH * before:
        return dt >= max(BACKOFF_MIN_S, floor)
    return dt >= max(WAIT_GAP_S, floor)


def remember_gap(gaps: Sequence[float], dt: float | None, waits: bool) -> list[float]:
    """`gaps` with the gap before this step, kept when the step is an ordinary one (a wait's
    gap is not the run's pace)."""
    if dt is None or waits:
        return list(gaps)
    return [*gaps[-(GAPS_KEPT - 1) :], round(dt, 3)]


def call_usd(price: ModelPrice | None, context: int, added: int, output: int) -> float:
    """A call's estimated dollars when its prompt cache holds the run's context (`context`
    tokens read) and writes what the last step added (`added`), plus its `output` tokens: the
    least such a call costs (without a cache, the whole context at the input price)."""
    p = price or WAIT_PRICE
    return (context * p.cache_read + added * p.cache_write + output * p.output) / 1e6


@dataclass(frozen=True, slots=True)
class Wait:
    """One call waited on: since when (its first pending or failing answer), its last call,
    how many calls, the step of the first, and how many budgets of it were advised on. And
    since its result last changed: the result's key, the calls that gave it, since when,
    from which step, and their estimated dollars."""

    key: str
    since: float
    last: float
    calls: int
    first: int
    advised: int
    result: str = ""
    same: int = 0
    same_since: float = 0.0
    same_first: int = 0
    usd: float = 0.0

    def encode(self) -> list[Any]:
        return [
            self.key,
            self.since,
            self.last,
            self.calls,
            self.first,
            self.advised,
            self.result,
            self.same,
            self.same_since,
            self.same_first,
            round(self.usd, 6),
        ]

    def over(self, budget: WaitBudget) -> str:
        """Which budget the unchanged result has used up ("calls", "usd", "seconds"), or ""."""
        if self.same < 2:
            return ""
        if self.same >= budget.calls:
            return "calls"
        if self.usd >= budget.usd:
            return "usd"
        if (gap(self.same_since, self.last) or 0.0) >= budget.seconds:
            return "seconds"
        return ""


def key(agent: str, sig: str) -> str:
    return short_hash(f"{agent}\x00{sig}")[:12]


RESULT_CHARS = 4000  # of a waited call's result compared (`result_key`)


def result_key(f: StepFeatures) -> str:
    """What a waited call's results are compared on: the result (its first RESULT_CHARS) with
    only times masked (durations, clock times, timestamps, addresses: `mask_volatile`). Every
    other character counts: a progress count, a percentage or a state that moves is a new
    result (the loop's result key masks digits in long outputs; a wait must not)."""
    head = f.whole_observation[:RESULT_CHARS]
    return short_hash(f"{int(f.is_error)}{mask_volatile(head)}")[:12]


@dataclass(frozen=True, slots=True)
class Result:
    """This call of a wait: its step, its result's key (`result_key`) and its estimated
    dollars (`call_usd`)."""

    step: int = 0
    key: str = ""
    usd: float = 0.0


def advance(
    waits: Sequence[Sequence[Any]],
    k: str,
    since: float,
    step: int,
    now: float,
    waiting: bool,
    ended: bool,
    budget: float,
    result: Result = Result(),
) -> tuple[list[list[Any]], Wait | None, Wait | None]:
    """The waits after this step's call `k` at time `now`: `waiting` (a spaced repeat on a
    pending or transient result) starts or extends its wait (`since`, `step`: its first call);
    `ended` (a result that is neither) ends it. Waits whose call has not come back for a whole
    budget are over. A result with the key of the wait's last one extends its unchanged run;
    another starts it afresh. Returns the waits, the wait to advise on now (its length past one
    more budget), and this call's wait (None when it is not waiting)."""
    kept = [Wait(*w) for w in waits if (gap(float(w[2]), now) or 0.0) < budget]
    mine = next((w for w in kept if w.key == k), None)
    others = [w for w in kept if w.key != k]
    if ended or (mine is None and not waiting):
        return [w.encode() for w in others], None, None
    if mine is None:  # counted from this call: the call before was not read this way
        mine = Wait(k, since, now, 2, step, 0, result.key, 1, now, result.step, result.usd)
    elif mine.result == result.key:
        mine = replace(mine, last=now, calls=mine.calls + 1, same=mine.same + 1, usd=mine.usd + result.usd)
    else:  # a new result: the work moved, and the unchanged run starts again
        mine = replace(
            mine,
            last=now,
            calls=mine.calls + 1,
            result=result.key,
            same=1,
            same_since=now,
            same_first=result.step,
            usd=result.usd,
        )
    # Budgets passed, clamped to a count the encoders hold (a `ts` of -1e23 makes a span of
    # ~1e23 s); a wait advised on COUNT_MAX budgets is not advised on again.
    span = gap(mine.since, now) or 0.0
    due = waiting and mine.advised < routing.COUNT_MAX and span >= budget * (mine.advised + 1)
    if due:
        mine = replace(mine, advised=int(min(span // budget, routing.COUNT_MAX)))
    others = sorted(others, key=lambda w: w.last)[-(WAITS_KEPT - 1) :]
    return [*(w.encode() for w in others), mine.encode()], mine if due else None, mine if waiting else None
