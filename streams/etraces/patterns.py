"""Guidance patterns: the record users load (JSONL), validated with per-line errors."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..core.etraces import TIERS
from ..core.monitors import FAILURE_TYPES

FAILURE_TYPE_VALUES = tuple(sorted(set(FAILURE_TYPES.values())))
MAX_ID_CHARS = 200
MAX_TEXT_CHARS = 4000
_KNOWN = {
    "id",
    "tier",
    "org_id",
    "failure_type",
    "title",
    "guidance",
    "situation",
    "dead_ends",
    "unlock",
    "gate_threshold",
    "model_family",
    "source_run_id",
}


class PatternError(ValueError):
    """A pattern record is invalid; the message says which field and why."""


@dataclass(frozen=True)
class Pattern:
    id: str
    tier: str
    title: str
    guidance: str
    org_id: str | None = None
    failure_type: str | None = None
    situation: str | None = None
    dead_ends: list[str] = field(default_factory=list)
    unlock: str | None = None
    gate_threshold: float | None = None
    model_family: str | None = None
    source_run_id: str | None = None

    @property
    def vector_text(self) -> str:
        """What gets embedded: the situation (E3 rules, which are never searched, use their text)."""
        return self.situation or f"{self.title}\n{self.guidance}"

    def payload(self) -> dict[str, Any]:
        d = asdict(self)
        d["pattern_id"] = d.pop("id")
        return d

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> Pattern:
        d = {k: v for k, v in p.items() if k in _KNOWN or k == "pattern_id"}
        d["id"] = d.pop("pattern_id")
        return cls(**d)


def _text(rec: dict[str, Any], name: str, required: bool) -> str | None:
    v = rec.get(name)
    if v is None or (isinstance(v, str) and not v.strip()):
        if required:
            raise PatternError(f"{name}: required")
        return None
    if not isinstance(v, str):
        raise PatternError(f"{name}: must be a string, got {type(v).__name__}")
    if len(v) > MAX_TEXT_CHARS:
        raise PatternError(f"{name}: longer than {MAX_TEXT_CHARS} characters")
    return v.strip()


def parse_pattern(rec: Any) -> Pattern:
    """Validate one record. E1 needs an org_id; E1/E2 need the situation they are matched on."""
    if not isinstance(rec, dict):
        raise PatternError(f"a pattern must be a JSON object, got {type(rec).__name__}")
    unknown = sorted(set(rec) - _KNOWN)
    if unknown:
        raise PatternError(f"unknown field(s): {', '.join(unknown)}")
    pid = rec.get("id")
    if not isinstance(pid, str) or not pid.strip():
        raise PatternError("id: required, a non-empty string")
    if len(pid) > MAX_ID_CHARS:
        raise PatternError(f"id: longer than {MAX_ID_CHARS} characters")
    tier = rec.get("tier")
    if tier not in TIERS:
        raise PatternError(f"tier: must be one of {', '.join(TIERS)}, got {tier!r}")
    org = _text(rec, "org_id", tier == "e1")
    if tier != "e1" and org is not None:
        raise PatternError("org_id: only E1 patterns are org-scoped")
    ft = rec.get("failure_type")
    if ft is not None and ft not in FAILURE_TYPE_VALUES:
        raise PatternError(
            f"failure_type: must be one of {', '.join(FAILURE_TYPE_VALUES)} or null, got {ft!r}"
        )
    dead = rec.get("dead_ends")
    if dead is None:
        dead_list: list[str] = []
    elif isinstance(dead, str):
        dead_list = [dead.strip()] if dead.strip() else []
    elif isinstance(dead, list) and all(isinstance(x, str) for x in dead):
        dead_list = [x.strip() for x in dead if x.strip()]
    else:
        raise PatternError("dead_ends: must be a string or a list of strings")
    gate = rec.get("gate_threshold")
    if gate is not None:
        if (
            isinstance(gate, bool)
            or not isinstance(gate, (int, float))
            or not math.isfinite(gate)
            or not 0 <= gate <= 1
        ):
            raise PatternError(f"gate_threshold: must be a number in [0, 1], got {gate!r}")
        gate = float(gate)
    fam = _text(rec, "model_family", False)
    return Pattern(
        id=pid.strip(),
        tier=tier,
        title=_text(rec, "title", True) or "",
        guidance=_text(rec, "guidance", True) or "",
        org_id=org,
        failure_type=ft,
        situation=_text(rec, "situation", tier in ("e1", "e2")),
        dead_ends=dead_list,
        unlock=_text(rec, "unlock", False),
        gate_threshold=gate,
        model_family=fam.lower() if fam else None,
        source_run_id=_text(rec, "source_run_id", False),
    )


@dataclass
class LineError:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def read_jsonl(lines: Iterable[bytes | str]) -> Iterator[tuple[int, Pattern | LineError]]:
    """(line number, pattern or error) per non-blank line; a bad line never stops the rest."""
    for n, raw in enumerate(lines, 1):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if not text.strip():
            continue
        try:
            rec = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            yield n, LineError(n, f"not valid JSON ({exc})")
            continue
        try:
            yield n, parse_pattern(rec)
        except PatternError as exc:
            yield n, LineError(n, str(exc))


def read_file(path: str | Path) -> tuple[list[Pattern], list[LineError]]:
    """A JSONL library: its valid patterns, and an error per bad line."""
    good: list[Pattern] = []
    bad: list[LineError] = []
    with open(path, "rb") as fh:
        for _, item in read_jsonl(fh):
            (bad if isinstance(item, LineError) else good).append(item)  # type: ignore[arg-type]
    return good, bad
