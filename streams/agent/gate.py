"""The pre-call gate on the agent side: may the agent make this tool call, given the values the
run's tool outputs introduced? Computed locally, before the call, from the newest decision's
`taint` list (the worker sends hashes of the tainted values, never the values), by
`streams.shared.taint.gate`.

It keeps its memory (`GateMemory`): a run's calls are checked against the taint of the newest
decision the run has had, kept until a newer decision replaces it. A decision that misses the
deadline (or never comes) leaves the previous taint in force: one late step must not open the
gate the earlier taint closed. A late decision that arrives after all replaces it if it is
newer (its model and text still steer nothing: the call went on unsteered).

It fails open, like everything on the agent side: no decision yet (a run not started, the
broker away from the start), a decision without `taint` (an older worker) or with a malformed
one, and any error in the check allow the call. A denial is a `GateVerdict` with `allow` False;
`denial_text` turns it into what the model is told instead of the tool's result, so it can go on
with the user's task. The gate is on by default; `RB_CLIENT_CALL_GATE=false` (or
`call_gate=False` on a client, a session or an adapter) turns it off.

Provenance decides (`streams.shared.gate_policy`): an acting call is denied when a value it carries
came from a source its argument may not take values from. In "lenient" mode (the default) a
destination (an address, an account, a URL) may come from the user, a trusted tool, or a tool
output the agent looked up for an action the user asked for (not one that output asked things
to go to, named by reference or hid: `dir` in the taint entry); a value that stood near
instructions addressed to the agent is denied in any acting call, and a destination from data
is denied in a run whose user asked for no action, however it was worded. "strict" also denies
any value a tool result introduced in an acting call, at the cost of refusing some calls the
user wanted (invite Dora at the address on her web page). `RB_CLIENT_GATE_MODE`, or `gate=` on
a client, a session or an adapter (the narrower one wins); the policy file:
`RB_CLIENT_GATE_POLICY` or `gate_policy=` on a client.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any, Literal, get_args

from ..shared.gate_policy import GatePolicy, asked_kinds
from ..shared.logsafe import safe_for_log
from ..shared.taint import GateVerdict, gate
from ..shared.untrusted import scrub

log = logging.getLogger(__name__)

__all__ = [
    "ALLOW",
    "DENY_PREFIX",
    "GATE_MODES",
    "GateMemory",
    "GateMode",
    "GateVerdict",
    "check",
    "check_gate_mode",
    "check_taint",
    "denial_text",
    "enabled_for",
    "log_denial",
    "mode_for",
    "taint_of",
]

GateMode = Literal["lenient", "strict"]
GATE_MODES: tuple[GateMode, ...] = get_args(GateMode)

ALLOW = GateVerdict(allow=True, reason=None, source_step=None, hashes=())
TAINT_MAX = 32  # entries a decision carries (decision.schema.json); a longer list is malformed
DENY_PREFIX = "rb-streams steering:"  # then the reason: "The call to `x` was refused: ..."
REASON_MAX = 600  # characters of a reason passed on to the model and the log


def taint_of(data: object) -> list[dict[str, Any]] | None:
    """A decision's `taint` list, or None (the gate then allows) when there is none or it is
    no list of at most TAINT_MAX entries. `streams.shared.taint.gate` skips a malformed entry. A
    decision is the worker's (schema-checked and, with a key, signed), but a stand-in client
    or an older worker may send anything."""
    if not isinstance(data, dict):
        return None
    taint = data.get("taint")
    if not isinstance(taint, list) or not taint or len(taint) > TAINT_MAX:
        return None
    return taint


def check(
    data: object,
    tool: object,
    args: object,
    *,
    strict: bool = False,
    policy: GatePolicy | None = None,
    asked: bool | Collection[str] | None = None,
) -> GateVerdict:
    """The verdict on calling `tool` with `args` after the decision `data` (a decision's wire
    dict, or None when there was none): fails open on anything unexpected. `strict`: the gate's
    strict mode (any tainted value in an acting call is denied); `policy`: the deployment's
    (`streams.shared.gate_policy`, None: the defaults); `asked`: whether the user asked for an action."""
    return check_taint(taint_of(data), tool, args, strict=strict, policy=policy, asked=asked)


def check_taint(
    taint: list[dict[str, Any]] | None,
    tool: object,
    args: object,
    *,
    strict: bool = False,
    policy: GatePolicy | None = None,
    asked: bool | Collection[str] | None = None,
) -> GateVerdict:
    """`check` on a taint list already read (`taint_of`, a `GateMemory`'s)."""
    if taint is None or not isinstance(tool, str):
        return ALLOW
    try:
        verdict = gate(taint, tool, args, acting_strict=strict, policy=policy, asked=asked)
    except Exception as exc:  # the gate must never cost the agent a call it could make
        log.warning("call gate error (the call is allowed): %s", safe_for_log(repr(exc), 200))
        return ALLOW
    return verdict if isinstance(verdict, GateVerdict) else ALLOW


ENTRY_FIELD_MAX = 64  # characters of a taint entry's text field kept (`tool`, `kind`)


def _kept(entry: object) -> dict[str, Any] | None:
    """A taint entry as the memory keeps it: its five fields (and `dir` when set), each text cut (a decision is at
    most 128 KB, but what a run holds for its whole life is kept small); None: no entry."""
    if not isinstance(entry, Mapping):
        return None
    out: dict[str, Any] = {}
    for name in ("h", "kind", "step", "tool", "instr"):
        v = entry.get(name)
        out[name] = v[:ENTRY_FIELD_MAX] if isinstance(v, str) else v if isinstance(v, int) else None
    if entry.get("dir") is True:
        out["dir"] = True
    return out


FORGOTTEN = 1 << 62  # the step a finished run's memory holds: no decision is newer


class GateMemory:
    """The taint a run's calls are checked against: the newest decision's, kept until a newer
    decision of the run replaces it. A late or missing decision changes nothing (the earlier
    taint still holds: the worker's taint is the run's, not the step's), and a decision for an
    older step than the one held never overwrites it. At most TAINT_MAX entries of a few short
    fields: bounded, whatever the run's length. `forget()` when the run finishes.

    What it holds is one tuple, swapped whole: read from one thread (the agent's) while another
    (the client's loop) remembers a late decision, a check sees the old taint or the new one."""

    __slots__ = ("_asked", "_held")

    def __init__(self) -> None:
        self._held: tuple[int, list[dict[str, Any]] | None] = (-1, None)
        self._asked: frozenset[str] | None = None

    @property
    def asked(self) -> frozenset[str] | None:
        """What the run's user asked for (`gate_policy.asked_kinds` of the task: the kinds of
        destination its action needs, empty: no action; None: no task known)."""
        return self._asked

    def intend(self, task: object) -> None:
        """Read the run's task: which destinations found in data the action the user asked for
        may need (a user who asked only a question needs none)."""
        self._asked = asked_kinds(task) if isinstance(task, str) else None

    @property
    def step(self) -> int:
        """The step of the decision held (-1: none yet)."""
        return self._held[0]

    @property
    def taint(self) -> list[dict[str, Any]] | None:
        """The taint list held (None: none, or the decision held had none or a malformed one)."""
        return self._held[1]

    def remember(self, data: object) -> bool:
        """Hold the decision `data`'s taint if it is newer than the one held (its `step` is
        higher); anything else (None, a late decision's absence, an older step, no step) keeps
        what is held. True when it was taken."""
        if not isinstance(data, Mapping):
            return False
        step = data.get("step")
        if type(step) is not int or step <= self._held[0]:
            return False
        taint = taint_of(data)
        kept = [e for e in map(_kept, taint) if e is not None] if taint is not None else None
        self._held = (step, kept or None)
        return True

    def newest(self, other: GateMemory | None) -> GateMemory:
        """This memory or `other`, whichever holds the newer decision (this one on a tie)."""
        if other is not None and other.step > self.step:
            return other
        return self

    def forget(self) -> None:
        """The run finished: nothing held, and nothing taken from now on (a decision that
        comes after the finish is older than FORGOTTEN)."""
        self._held = (FORGOTTEN, None)

    def check(
        self, tool: object, args: object, *, strict: bool = False, policy: GatePolicy | None = None
    ) -> GateVerdict:
        """The verdict on calling `tool` with `args` against the taint held."""
        return check_taint(self._held[1], tool, args, strict=strict, policy=policy, asked=self._asked)


def denial_text(verdict: GateVerdict, tool: str) -> str:
    """What the model reads instead of the tool's result: that steering refused the call and
    the gate's reason (the tool and the value's source step, never the value or the planted
    words; it tells the model to go on with the user's task). Scrubbed and cut: the reason
    names tools, which events named."""
    reason = verdict.reason if isinstance(verdict.reason, str) and verdict.reason.strip() else None
    if reason is None:
        name = scrub(str(tool), 100).strip().replace("`", "'") or "the tool"
        reason = (
            f"The call to `{name}` was refused: an argument carries a value that came from a "
            "tool's output, not from the user. Go on with the user's task."
        )
    return f"{DENY_PREFIX} {scrub(reason, REASON_MAX).strip()}"


def log_denial(run_id: str, step: object, tool: str, verdict: GateVerdict) -> None:
    """One log line per denied call."""
    log.warning(
        "call gate: denied %s in run %s after step %s (source step %s): %s",
        safe_for_log(tool, 100),
        safe_for_log(run_id, 100),
        safe_for_log(step, 20),
        safe_for_log(verdict.source_step, 20),
        safe_for_log(verdict.reason or "", REASON_MAX),
    )


def check_gate_mode(value: object, name: str = "gate") -> GateMode | None:
    """`value` as a gate mode (None: not given, the wider setting's), or ValueError: a mode
    misspelt in code must not leave the gate lenient in silence."""
    if value is None:
        return None
    for mode in GATE_MODES:
        if value == mode:
            return mode
    said = repr(value)[:100]
    raise ValueError(f"{name} must be one of {', '.join(map(repr, GATE_MODES))} (or None), got {said}")


def mode_for(client: object, mode: GateMode | None) -> GateMode:
    """The gate's mode for a session or an adapter: its own when given, else its client's
    (`RB_CLIENT_GATE_MODE`, lenient by default; a stand-in client without one: lenient)."""
    own = check_gate_mode(mode)
    if own is not None:
        return own
    value = getattr(client, "gate", None)
    return value if value in GATE_MODES else "lenient"


def enabled_for(client: object, call_gate: bool | None) -> bool:
    """The gate's setting for a session or an adapter: its own when given, else its client's
    (`RB_CLIENT_CALL_GATE`, on by default; a stand-in client without one: on)."""
    if call_gate is not None:
        return bool(call_gate)
    value = getattr(client, "call_gate", True)
    return value if isinstance(value, bool) else True
