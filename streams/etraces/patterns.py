"""Guidance patterns: the record users load (JSONL), validated with per-line errors."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match

from ..core.monitors import FAILURE_TYPES

FAILURE_TYPE_VALUES = tuple(sorted(set(FAILURE_TYPES.values())))
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


def _validator() -> Draft202012Validator:
    schema = orjson.loads(resources.files("streams.schemas").joinpath("pattern.schema.json").read_bytes())
    return Draft202012Validator(schema)


_VALIDATOR = _validator()
_PROPERTIES: dict[str, Any] = _VALIDATOR.schema["properties"]


def _explain(err: ValidationError) -> str:
    """The schema's violation as one line naming the field (its `x-error` says what is wanted)."""
    if err.validator == "additionalProperties":
        unknown = sorted(set(err.instance) - set(_PROPERTIES))
        return f"unknown field(s): {', '.join(unknown)}"
    if err.validator == "required":
        missing = next(n for n in err.validator_value if n not in err.instance)
        return f"{missing}: required"
    path = list(err.absolute_path)
    if err.validator == "type" and not path:
        return f"a pattern must be a JSON object, got {type(err.instance).__name__}"
    field = str(path[0])
    why = err.schema.get("x-error") if isinstance(err.schema, dict) and len(path) == 1 else None
    why = why or _PROPERTIES.get(field, {}).get("x-error") or err.message
    value = err.instance if len(path) == 1 else None
    shown = "" if why.startswith("required") or value is None else f", got {value!r}"
    return f"{field}: {why}{shown}"


def _strip(v: Any) -> str | None:
    return v.strip() or None if isinstance(v, str) else None


def parse_pattern(rec: Any) -> Pattern:
    """Validate one record against schemas/pattern.schema.json, then normalise it (stripped
    text, dead ends as a list, model family in lower case)."""
    err = best_match(_VALIDATOR.iter_errors(rec))
    if err is not None:
        raise PatternError(_explain(err))
    dead = rec.get("dead_ends")
    dead_list = [dead.strip()] if isinstance(dead, str) else [x.strip() for x in dead or []]
    gate = rec.get("gate_threshold")
    fam = _strip(rec.get("model_family"))
    return Pattern(
        id=rec["id"].strip(),
        tier=rec["tier"],
        title=rec["title"].strip(),
        guidance=rec["guidance"].strip(),
        org_id=_strip(rec.get("org_id")),
        failure_type=rec.get("failure_type"),
        situation=_strip(rec.get("situation")),
        dead_ends=[x for x in dead_list if x],
        unlock=_strip(rec.get("unlock")),
        gate_threshold=None if gate is None else float(gate),
        model_family=fam.lower() if fam else None,
        source_run_id=_strip(rec.get("source_run_id")),
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


def starter_library() -> Path:
    """Our starter pattern library: patterns/starter.jsonl in a checkout, else the copy the
    installed package carries (streams/data/patterns/starter.jsonl)."""
    checkout = Path(__file__).resolve().parents[2] / "patterns" / "starter.jsonl"
    if checkout.is_file():
        return checkout
    return Path(str(resources.files("streams").joinpath("data", "patterns", "starter.jsonl")))
