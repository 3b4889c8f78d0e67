"""Wire events in: size limit, JSON decoding, schema validation. Pure (no I/O).

Integers are exact: a float (even `1.0`, or an integer too large for orjson, which it reads
as a float) in an integer field is a schema violation, and every integer field has a stated
maximum, so nothing downstream (sums, the encoders) can meet an integer it cannot hold.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import fastjsonschema
import orjson
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import best_match

# The wire contract lives in streams.shared.contract (the agent side reads it without the core);
# its names are imported from there, not from here.
from ..shared.contract import EVENT_TYPES, SCHEMA_VERSION, STEP_MAX, TOKENS_MAX, fast_validator, load_schema


@dataclass(frozen=True)
class Limits:
    """Input limits; the worker takes them from settings."""

    max_event_bytes: int = 256 * 1024
    max_thought_chars: int = 20_000
    max_deadletter_original_bytes: int = 64 * 1024
    step_log_kept: int = 20  # step log entries kept per run (the HTTP view's history)
    # Hard caps on what one event may write (checked by `Engine.seal`): far above any state
    # the property tests produce, far below the broker's 1 MB per record.
    max_state_bytes: int = 64 * 1024
    max_decision_bytes: int = 64 * 1024


class Rejected(Exception):
    """An input that goes to the dead-letter topic. `reason` is machine-readable."""

    def __init__(self, reason: str, detail: str, run_id: str | None = None, step: int | None = None):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.run_id = run_id
        self.step = step


# JSON Schema counts 1.0 as an integer; on our wire an integer field takes integers only.
StrictValidator = validators.extend(
    Draft202012Validator,
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", lambda _c, v: type(v) is int),
)


@cache
def validator(name: str) -> Any:
    """Reference validator with exact integers: explains a failure precisely (slow path only)."""
    return StrictValidator(load_schema(name))


# An event too large to parse still names its run: the client writes `type`, `schema_version`,
# `run_id` and `step` first, so they are looked for (bounded patterns) in its head only.
_HEAD_BYTES = 2048
_HEAD_RUN_ID = re.compile(r'"run_id"\s*:\s*"([^"\\\x00-\x1f]{1,256})"')
_HEAD_STEP = re.compile(r'"step"\s*:\s*([0-9]{1,10})(?![0-9.eE])')


def _head_ids(raw: bytes) -> tuple[str | None, int | None]:
    """The run id and step an oversize event names in its first _HEAD_BYTES (None: not there,
    escaped, or not an integer in range): its dead-letter keeps them, and so `deadletters
    --run` and the run's owner find it."""
    head = raw[:_HEAD_BYTES].decode("utf-8", "replace")  # str: the regex cost test measures it
    m = _HEAD_RUN_ID.search(head)
    run_id = m.group(1) if m else None
    n = _HEAD_STEP.search(head)
    step = int(n.group(1)) if n and int(n.group(1)) <= STEP_MAX else None
    return run_id, step


def decode(raw: bytes | str | None, limits: Limits) -> dict[str, Any]:
    """Bytes -> validated event dict, or Rejected."""
    if raw is None:
        raise Rejected("invalid_json", "empty message (null value)")
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > limits.max_event_bytes:
        run_id, step = _head_ids(raw)
        raise Rejected("too_large", f"{len(raw)} bytes > limit {limits.max_event_bytes}", run_id, step)
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Rejected("invalid_json", str(exc)[:300]) from None
    if not isinstance(obj, dict):
        raise Rejected("not_an_object", f"top-level JSON is {type(obj).__name__}, expected object")
    run_id = obj.get("run_id") if isinstance(obj.get("run_id"), str) else None
    step = _int_or_none(obj.get("step"))
    version = obj.get("schema_version")
    if type(version) is float and version == SCHEMA_VERSION:
        raise Rejected(
            "schema_violation", f"schema_version must be the integer {SCHEMA_VERSION}", run_id, step
        )
    if type(version) is not int or version != SCHEMA_VERSION:
        raise Rejected(
            "unsupported_schema_version",
            f"schema_version {version!r} is not supported (expected {SCHEMA_VERSION})",
            run_id,
            step,
        )
    etype = obj.get("type")
    if etype not in EVENT_TYPES:
        raise Rejected(
            "schema_violation", f"type {etype!r} is not one of {', '.join(EVENT_TYPES)}", run_id, step
        )
    if etype == "run_start":
        unknown_run_start_field(obj, run_id)
    try:
        fast_validator(etype)(obj)
    except fastjsonschema.JsonSchemaValueException as exc:
        if _deeper_than(obj, EXPLAIN_MAX_DEPTH):
            # The reference validator's messages repr the values; on deeply nested input that
            # recursion would fail or not depending on the caller's stack (worker vs replay).
            raise Rejected("schema_violation", f"{etype}: {exc.message[:300]}", run_id, step) from None
        err = best_match(validator(etype).iter_errors(obj))
        msg = exc.message if err is None else err.message
        where = "(root)" if err is None else "/".join(str(p) for p in err.absolute_path) or "(root)"
        raise Rejected("schema_violation", f"{etype} at {where}: {msg[:300]}", run_id, step) from None
    d = obj.get("difficulty")
    if d is not None and not math.isfinite(d):
        raise Rejected("schema_violation", "difficulty must be a finite number", run_id, step)
    return obj


@cache
def _run_start_fields() -> tuple[str, ...]:
    return tuple(load_schema("run_start")["properties"])


def unknown_run_start_field(obj: dict[str, Any], run_id: str | None) -> None:
    """A run_start is closed: a top-level field the schema does not name (a misspelt
    `escalaton`, `modle_routing`) is dead-lettered `invalid_run_start` naming it, with the
    closest known name, rather than the run going on without the option its author set. A
    deployment's own fields go in `extensions`."""
    known = _run_start_fields()
    for name in obj:
        if name in known:
            continue
        shown = str(name)[:100]
        close = difflib.get_close_matches(str(name)[:100], known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (a deployment's own fields go in `extensions`)"
        raise Rejected("invalid_run_start", f"unknown field {shown!r}{hint}", run_id)


EXPLAIN_MAX_DEPTH = 32  # deeper events are explained by the fast validator's own message


def _deeper_than(obj: Any, limit: int) -> bool:
    """Whether JSON nests past `limit` levels (iterative: no recursion on hostile input)."""
    stack = [(obj, 0)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return True
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return False


def _int_or_none(v: Any) -> int | None:
    """An integer a dead-letter record can carry (any JSON reader holds it exactly)."""
    return v if type(v) is int and -TOKENS_MAX <= v <= TOKENS_MAX else None


def _clean(text: str | None) -> str | None:
    """Text any encoder takes (a lone surrogate from an exception message would not)."""
    return None if text is None else text.encode("utf-8", "replace").decode("utf-8")


def deadletter_record(
    raw: bytes | str | None,
    rej: Rejected,
    limits: Limits,
    processed_ts: float,
    source: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if raw is None:
        raw = b""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    cut = raw[: limits.max_deadletter_original_bytes]
    return {
        "type": "deadletter",
        "schema_version": SCHEMA_VERSION,
        "reason": rej.reason,
        "detail": _clean(rej.detail),
        "run_id": _clean(rej.run_id),
        "step": _int_or_none(rej.step),
        "original": cut.decode("utf-8", "replace"),
        "original_bytes": len(raw),
        "truncated": len(cut) < len(raw),
        "source": source,
        "processed_ts": processed_ts,
    }


def deadletter_bytes(rec: dict[str, Any]) -> bytes:
    """The record on the wire; never raises (a record that will not encode is reduced to
    what always does, so a dead-letter can never fail for its content)."""
    try:
        return orjson.dumps(rec)
    except (TypeError, ValueError) as exc:
        return orjson.dumps(
            {
                **{
                    k: rec.get(k) for k in ("type", "schema_version", "reason", "original_bytes", "truncated")
                },
                "detail": f"{_clean(str(rec.get('detail')))} (record reduced: {type(exc).__name__})",
                "run_id": None,
                "step": None,
                "original": "",
                "source": None,
                "processed_ts": rec.get("processed_ts"),
            },
            default=str,
        )
