"""Where a run's values came from (issue 42): the user's task and messages, or a tool's result.

Per run, a bounded memory: the hashes of the values the user introduced (the task at the first
step, then any step the user or its proxy speaks), and the values tool results introduced that
the user never gave (`taint`), each with the step and tool whose result brought it and whether
that result held instructions addressed to the agent near the value (`instr`). A later call
whose arguments carry a tainted value is a tainted call; it is suspicious when the value's
source held instructions (the monitor fires, the gate denies) or when the call acts (sends,
pays, deletes: recorded, and denied by the gate's strict mode).

Run-wide, not per agent: a value a sub-agent read and reported to the manager is still data
when the manager uses it. Hashes only (`streams.shared.taint.value_hash`), never the values. Capped:
USER_MAX user hashes, TAINT_MAX entries (values from results that held instructions are
dropped last), FLAGGED_MAX flagged results.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..shared.taint import (
    TAINT_WIRE_MAX,
    TOOL_KEPT,
    assembled,
    decoded_values,
    parts,
    scan,
    split_parts,
    value_hash,
)
from . import sanction
from .decision import SanctionEntry, TaintEntry
from .instructions import RECORD_END, Instructions

USER_MAX = 96
TAINT_MAX = 64
FLAGGED_MAX = 8
WIRED_PLAIN = frozenset({"email", "url", "domain", "iban", "phone"})
DESTINATIONS = frozenset({"email", "url", "domain", "iban", "phone", "number", "part"})  # where things go
WIRED_PLAIN_MAX = 16  # plain values a decision carries (the newest)
BEFORE, AFTER = 200, 600  # characters around an instruction whose values are its own
PENDING_STEPS = 8  # steps after an instruction without a destination whose results may bring it


@dataclass(frozen=True)
class Provenance:
    """One run's provenance memory (see the module doc); stored as the `data_instruction`
    monitor's state. `taint` entries: [hash, kind, step, tool, instr]; `flagged`: [step, tool]
    of results that held instructions; `hit`: [step, source step, source tool, instr] of the
    tainted call found on the latest step that had one."""

    seeded: bool = False
    user: list[str] = field(default_factory=list)
    taint: list[list[Any]] = field(default_factory=list)
    flagged: list[list[Any]] = field(default_factory=list)
    hit: list[Any] = field(default_factory=list)
    # issue 49: the user's order to follow a named source ([by step (0: the task), kinds,
    # file names, follow], `core.sanction`), and the results it sanctioned ([step, tool, by])
    order: list[Any] = field(default_factory=list)
    sanctioned: list[list[Any]] = field(default_factory=list)
    # [step, tool] of a flagged result whose instruction named no destination of its own
    # ("... must go to the address in the next record you read"): the destinations of the
    # next PENDING_STEPS results are where it sends things (`dir`)
    pending: list[Any] = field(default_factory=list)

    def sanctioned_at(self, step: int) -> bool:
        """Whether the result of `step` was sanctioned by the user's order."""
        return bool(self.sanctioned) and self.sanctioned[-1][0] == step


def hashes(values: Iterable[tuple[str, str]]) -> list[str]:
    return [value_hash(v) for _k, v in values]


def with_user(p: Provenance, text: str | None) -> Provenance:
    """`p` with the values of a text the user wrote (its task, a message) known as the user's:
    a tainted entry of the same value is no longer tainted."""
    if not text:
        return p
    new = [h for h in hashes((k, v) for k, v, _at in scan(text)) if h not in p.user]
    if not new:
        return p
    user = [*p.user, *new][-USER_MAX:]
    known = set(new)
    taint = [e for e in p.taint if e[0] not in known]
    return Provenance(True, user, taint, p.flagged, p.hit, p.order, p.sanctioned, p.pending)


def seeded(p: Provenance, task: str | None) -> Provenance:
    """`p` with the task's values, once per run."""
    if p.seeded:
        return p
    q = with_user(p, task)
    o = sanction.order(task)
    order = [0, list(o.kinds), list(o.names), o.follow] if o else q.order
    return Provenance(True, q.user, q.taint, q.flagged, q.hit, order, q.sanctioned, q.pending)


def ordered(p: Provenance, step: int, text: str | None) -> Provenance:
    """`p` with the order to follow a named source that a user's later message (at `step`)
    holds, if any: it replaces the task's (the user's latest word on what to follow)."""
    o = sanction.order(text)
    if o is None:
        return p
    return Provenance(
        p.seeded,
        p.user,
        p.taint,
        p.flagged,
        p.hit,
        [step, list(o.kinds), list(o.names), o.follow],
        p.sanctioned,
        p.pending,
    )


def current_order(p: Provenance) -> sanction.Order | None:
    """The run's order to follow a named source, while it may still sanction a result."""
    o = p.order
    if len(o) != 4 or len(p.sanctioned) >= sanction.SANCTIONED_MAX:
        return None
    return sanction.Order(tuple(str(k) for k in o[1]), tuple(str(n) for n in o[2]), o[3] is True)


def sanctioned(p: Provenance, step: int, tool: str, text: str) -> Provenance:
    """`p` after a result the user's order sanctioned: its values are the user's (as if the
    user had written them), and the result is recorded ([step, tool, the order's step])."""
    q = with_user(p, text)
    entry = [step, tool[:TOOL_KEPT], int(p.order[0]) if p.order else 0]
    return Provenance(
        True,
        q.user,
        q.taint,
        q.flagged,
        q.hit,
        q.order,
        [*q.sanctioned, entry][-sanction.SANCTIONED_MAX :],
        q.pending,
    )


def matches(p: Provenance, call_hashes: Sequence[str]) -> list[list[Any]]:
    """The taint entries a call's argument values match (instructions first, then the earliest)."""
    if not p.taint or not call_hashes:
        return []
    want = set(call_hashes)
    hits = [e for e in p.taint if e[0] in want]
    hits.sort(key=lambda e: (not e[4], e[2]))
    return hits


def tainted(p: Provenance) -> Collection[str]:
    """The hashes of `p`'s taint entries (read only; remembered while the list is the same)."""
    return _index(p.taint).keys()


def windows(text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where an instruction's own values stand: from BEFORE characters before it to AFTER
    characters past it, neither beyond its record (`instructions.RECORD_END`: the previous
    record's values, an e-mail's sender listed above a planted body, are not its own)."""
    out = []
    for a, b in spans:
        start = max(0, a - BEFORE)
        for m in RECORD_END.finditer(text, start, a):  # the record the instruction stands in
            start = m.end()
        end = RECORD_END.search(text, b, b + AFTER)
        out.append((start, end.start() if end else b + AFTER))
    return out


def _near(at: int, kind: str, spans: Sequence[tuple[int, int]], wins: Sequence[tuple[int, int]]) -> bool:
    """Whether a value at `at` is the instruction's own: in its window, and, before the
    instruction starts, only a destination (an address, an account): a name or a path just
    before it is the record's own (a review's restaurant, a file's title)."""
    return any(
        a <= at <= b and (at >= s[0] or kind in DESTINATIONS) for s, (a, b) in zip(spans, wins, strict=True)
    )


# The last user list asked and its set (one memo, swapped whole: threads read it safely).
_USER_SET: list[tuple[list[str] | None, frozenset[str]]] = [(None, frozenset())]


def _user_set(user: list[str]) -> frozenset[str]:
    """`frozenset(user)`, built again only when the list is another: a run's user values
    change at the few steps the user speaks (a state's lists are replaced, never changed)."""
    memo = _USER_SET[0]
    if memo[0] is not user:
        memo = (user, frozenset(user))
        _USER_SET[0] = memo
    return memo[1]


# The last taint list indexed and its index (one memo, swapped whole).
_INDEX: list[tuple[list[list[Any]] | None, dict[str, int]]] = [(None, {})]


def _index(taint: list[list[Any]]) -> dict[str, int]:
    """hash -> place of a taint list's entries (the last one's, as a dict comprehension
    would keep it), built again only when the list is another (not to be changed)."""
    memo = _INDEX[0]
    if memo[0] is not taint:
        memo = (taint, {e[0]: i for i, e in enumerate(taint)})
        _INDEX[0] = memo
    return memo[1]


def observe(
    p: Provenance,
    step: int,
    tool: str,
    text: str,
    values: list[tuple[str, str, int]],
    found: Instructions,
    sent_to: Collection[str] = (),
    points_on: bool = False,
) -> Provenance:
    """`p` after a tool result: its values the user never gave are tainted from this step
    (a value already tainted keeps its first source, unless it now stands near instructions);
    with instructions, the values near them are marked `instr` and the result is flagged.
    `values`: `scan(text)` (offsets needed only when `found` is flagged: scanned again then).
    `sent_to`: the destinations the result sends something to (`streams.shared.taint.directed`),
    marked `dir`; a destination the result hides (decoded from an encoding it names, an
    account printed in two halves) is marked `dir` too, flagged or not. `points_on`: the
    result sends something to a destination it does not print ("to the address in the next
    record"): the destinations of the next PENDING_STEPS results are marked `dir`."""
    flagged = found.flagged
    if flagged and values and values[0][2] < 0:
        values = scan(text, positions=True)
    wins = windows(text, found.spans) if flagged else []
    pending = p.pending
    if pending and step - int(pending[0]) > PENDING_STEPS:
        pending = []
    if flagged:
        # an instruction with no destination in its window sends to the first one after it
        # ("... must go to the destination given at the end", the value far below)
        dest_at = [x[2] for x in values if x[0] in DESTINATIONS and x[2] >= 0]
        claimed = False
        for j, ((_a, b), (ws, we)) in enumerate(zip(found.spans, wins, strict=True)):
            if any(ws <= at <= we for at in dest_at):
                claimed = True
                continue
            after = [at for at in dest_at if at > b]
            if after:
                wins[j] = (ws, min(after))
                claimed = True
        if not claimed:  # its destination comes in a later result
            pending = [step, tool[:TOOL_KEPT]]
    if pending and pending[0] != step and any(x[0] in DESTINATIONS for x in values):
        sent_to = {*sent_to, *(x[1] for x in values if x[0] in DESTINATIONS)}
        pending = []
    if points_on:  # it sends to a destination a later result brings
        pending = [step, tool[:TOOL_KEPT]]
    if flagged:  # what the instruction's own words hide: a value decoded, an account's halves
        hidden = [x for x in decoded_values(text) + parts(text) if _near(x[2], x[0], found.spans, wins)]
    else:  # hidden whatever the wording: nothing a lookup prints that way
        hidden = decoded_values(text) + split_parts(text)
        if any(x[0] == "domain" for x in values):  # a bare domain is a domain the scan found
            hidden += assembled(text)
    if hidden:
        values = [*values, *hidden]
        sent_to = {*sent_to, *(x[1] for x in hidden)}
    user = _user_set(p.user)
    index = _index(p.taint)  # shared: read only
    added: dict[str, int] = {}  # hash -> place of the entries this result adds
    taint = p.taint  # copied at the first change (most results bring no new value)
    name = tool[:TOOL_KEPT]
    changed = False
    for kind, v, at in values:
        h = value_hash(v)
        if h in user:
            continue
        instr = flagged and _near(at, kind, found.spans, wins)
        sent = v in sent_to
        i = index.get(h)
        if i is None:
            i = added.get(h)
        if i is not None:
            if (instr and not taint[i][4]) or (sent and not _sent(taint[i])):
                if not changed:
                    taint, changed = list(taint), True
                old = taint[i]
                taint[i] = (
                    _entry(h, kind, step, name, True, sent or _sent(old)) if instr else [*old[:5], True]
                )
            continue
        if not changed:
            taint, changed = list(taint), True
        added[h] = len(taint)
        taint.append(_entry(h, kind, step, name, instr, sent))
    if len(taint) > TAINT_MAX:  # the oldest plain values go first, then the oldest marked
        extra = len(taint) - TAINT_MAX
        drop: set[int] = set()
        for i, e in enumerate(taint):
            if len(drop) >= extra:
                break
            if not e[4] and not _sent(e):
                drop.add(i)
        taint = [e for i, e in enumerate(taint) if i not in drop][-TAINT_MAX:]
    flags = p.flagged
    if flagged:
        flags = [*p.flagged, [step, name]][-FLAGGED_MAX:]
    if not changed and flags is p.flagged and pending is p.pending:
        return p
    return Provenance(p.seeded, p.user, taint, flags, p.hit, p.order, p.sanctioned, pending)


def _entry(h: str, kind: str, step: int, tool: str, instr: bool, sent: bool) -> list[Any]:
    """A taint entry: [hash, kind, step, tool, instr], and a sixth item True when the result
    sent something to the value (`dir`; absent otherwise: a state written before has five)."""
    return [h, kind, step, tool, instr, True] if sent else [h, kind, step, tool, instr]


def _sent(e: Sequence[Any]) -> bool:
    return len(e) > 5 and e[5] is True


def hides(text: str) -> bool:
    """Whether a result hides a destination whatever its wording: one decoded from an encoding
    it names, an account printed in two parts, an address spelled apart (`observe`)."""
    return bool(decoded_values(text) or split_parts(text) or assembled(text))


def wire(p: Provenance | Mapping[str, Any] | None) -> list[TaintEntry]:
    """The decision's `taint` list: values from results that held instructions first (newest
    first), then at most WIRED_PLAIN_MAX others of WIRED_PLAIN kinds, newest first; at most
    TAINT_WIRE_MAX in all."""
    if p is None:
        return []
    taint = p.taint if isinstance(p, Provenance) else p.get("taint") or []
    if not taint:
        return []
    # a plain result's value is carried only where it says where data goes (an address, a
    # site, an account: the gate's strict mode denies those in an acting call); its paths,
    # numbers and names are not: a coding run's listings and a shop's item ids would fill
    # every decision with hashes no gate reads by default
    ordered = _ordered(taint)
    out: list[TaintEntry] = []
    for e in ordered[:TAINT_WIRE_MAX]:
        entry: TaintEntry = {"h": e[0], "kind": e[1], "step": e[2], "tool": e[3], "instr": bool(e[4])}
        if _sent(e):
            entry["dir"] = True
        out.append(entry)
    return out


# The last taint list wired and its entries in wire order (one memo, swapped whole).
_ORDERED: list[tuple[list[list[Any]] | None, list[list[Any]]]] = [(None, [])]


def _ordered(taint: list[list[Any]]) -> list[list[Any]]:
    """The entries `wire` carries, in its order, worked out again only when the list is
    another (most steps add no value: the state keeps the same list, never changed)."""
    memo = _ORDERED[0]
    if memo[0] is not taint:
        # an account's halves (`part`) take the room the whole values leave
        # (a sixth item is only ever `dir`, True: `_entry`)
        marked = [e for e in reversed(taint) if (e[4] or len(e) > 5) and e[1] != "part"]
        marked += [e for e in reversed(taint) if (e[4] or len(e) > 5) and e[1] == "part"]
        plain = [e for e in reversed(taint) if not (e[4] or len(e) > 5) and e[1] in WIRED_PLAIN][
            :WIRED_PLAIN_MAX
        ]
        memo = (taint, marked + plain)
        _ORDERED[0] = memo
    return memo[1]


def wire_sanctioned(p: Provenance | Mapping[str, Any] | None) -> list[SanctionEntry]:
    """The decision's `sanctioned` list: the results whose values the user's order to follow a
    named source made the user's (`core.sanction`), oldest first."""
    if p is None:
        return []
    got = p.sanctioned if isinstance(p, Provenance) else p.get("sanctioned") or []
    return [{"step": int(e[0]), "tool": str(e[1]), "by": int(e[2])} for e in got[: sanction.SANCTIONED_MAX]]
