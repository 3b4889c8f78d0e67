"""The pre-call gate on the agent side: may the agent make this tool call, given the values the
run's tool outputs introduced? Computed locally, before the call, from the last decision's
`taint` list (the worker sends hashes of the tainted values, never the values), by
`streams.taint.gate`.

It fails open, like everything on the agent side: no decision (late, the broker away, a run not
started), a decision without `taint` (an older worker) or with a malformed one, and any error
in the check allow the call. A denial is a `GateVerdict` with `allow` False; `denial_text`
turns it into what the model is told instead of the tool's result, so it can go on with the
user's task. The gate is on by default; `RB_CLIENT_CALL_GATE=false` (or `call_gate=False` on a
client, a session or an adapter) turns it off.
"""

from __future__ import annotations

import logging
from typing import Any

from ..logsafe import safe_for_log
from ..taint import GateVerdict, gate
from ..untrusted import scrub

log = logging.getLogger(__name__)

__all__ = [
    "ALLOW",
    "DENY_PREFIX",
    "GateVerdict",
    "check",
    "denial_text",
    "enabled_for",
    "log_denial",
    "taint_of",
]

ALLOW = GateVerdict(allow=True, reason=None, source_step=None, hashes=())
TAINT_MAX = 32  # entries a decision carries (decision.schema.json); a longer list is malformed
DENY_PREFIX = "rb-streams steering:"  # then the reason: "The call to `x` was refused: ..."
REASON_MAX = 600  # characters of a reason passed on to the model and the log


def taint_of(data: object) -> list[dict[str, Any]] | None:
    """A decision's `taint` list, or None (the gate then allows) when there is none or it is
    no list of at most TAINT_MAX entries. `streams.taint.gate` skips a malformed entry. A
    decision is the worker's (schema-checked and, with a key, signed), but a stand-in client
    or an older worker may send anything."""
    if not isinstance(data, dict):
        return None
    taint = data.get("taint")
    if not isinstance(taint, list) or not taint or len(taint) > TAINT_MAX:
        return None
    return taint


def check(data: object, tool: object, args: object) -> GateVerdict:
    """The verdict on calling `tool` with `args` after the decision `data` (a decision's wire
    dict, or None when there was none): fails open on anything unexpected."""
    taint = taint_of(data)
    if taint is None or not isinstance(tool, str):
        return ALLOW
    try:
        verdict = gate(taint, tool, args)
    except Exception as exc:  # the gate must never cost the agent a call it could make
        log.warning("call gate error (the call is allowed): %s", safe_for_log(repr(exc), 200))
        return ALLOW
    return verdict if isinstance(verdict, GateVerdict) else ALLOW


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


def enabled_for(client: object, call_gate: bool | None) -> bool:
    """The gate's setting for a session or an adapter: its own when given, else its client's
    (`RB_CLIENT_CALL_GATE`, on by default; a stand-in client without one: on)."""
    if call_gate is not None:
        return bool(call_gate)
    value = getattr(client, "call_gate", True)
    return value if isinstance(value, bool) else True
