"""Hypothesis strategies for poison events: every field of every event type, with boundary
values (0, -1, 2**31, 2**53, 2**63, 2**64, ...), floats where integers belong, huge and empty
strings, deep nesting, Unicode edge cases, wrong types, wrong keys, broken bytes, forged
control records and repeated run_starts with another config.

A strategy draws a *recipe*; `materialize` turns it into (key, value bytes) for the runs of
one test, so the same recipes serve the pure core (unit tests) and a real worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import strategies as st

INTS = [0, -1, 1, 2, 2**31 - 1, 2**31, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63)]
FLOATS_FOR_INTS = [1.0, 0.0, -0.0, 1e3, 2.0**53, 1e308, 2.5]
# Numbers orjson cannot hold as an int: written as raw JSON tokens.
RAW_NUMBERS = [b"18446744073709551616", b"1180591620717411303424", b"1" + b"0" * 400, b"1e400", b"-1e400"]
UNICODE = [
    "",
    " ",
    "\u0000",
    "zero\u200bwidth",
    "right\u202eto\u202cleft",
    "\ufeffbom",
    "e\u0301\u0301\u0301",
    "🧪🔥👩‍💻",
    "\U0001d518\U0001d52b",
    "中文 العربية עברית",
    "\uffff\ufffe",
]
STRINGS = [*UNICODE, "x" * 257, "y" * 5000]
WRONG_TYPES: list[Any] = [None, True, False, [], {}, [1, 2], {"a": 1}, "1", 1, 1.5]
# Values a field may validly take, boundaries included: they make the events that are answered
# (or refused for what they mean: config conflicts, the run cap, an oversized event).
VALID: dict[str, list[Any]] = {
    "org_id": ["fuzz", "other-org", "中文", "o" * 256],
    "model": ["m2", None, "x" * 256],
    "token_budget": [1, 100, 2**53, None],
    "task_profile": ["qa", "pr_review", "coding"],
    "model_routing": [{"FAST": "small"}, {}, None],
    "fsm_thresholds": [{"fast_window": 3}, {"fast_window": 1000}, {"skip_threshold": 1.0}, None],
    "e_traces_enabled": [False, True],
    "monitors_enabled": [False, True],
    "task": UNICODE,
    "thought": [*UNICODE, "z" * 300_000],  # the last one is past RB_MAX_EVENT_BYTES
    "observation": UNICODE,
    "action": ["edit_file", None, "a" * 1024],
    "tokens": [0, 1, 2**53, None],
    "difficulty": [0.0, 1.0, 7.5, -3, 0.5, None],
    "ts": [0, 1.7e9, 2**53, None, -1.5],
    "agent": ["planner", None],
    "outcome": ["success", "failure", "failure: \u0000"],
}

FIELDS = {
    "run_start": [
        "run_id",
        "org_id",
        "project_id",
        "agent_name",
        "task",
        "framework",
        "model",
        "task_profile",
        "monitor_weights",
        "fsm_thresholds",
        "fsm_transition",
        "scorer",
        "model_routing",
        "token_budget",
        "e_traces_enabled",
        "monitors_enabled",
        "metadata",
        "ts",
    ],
    "step": [
        "run_id",
        "step",
        "thought",
        "action",
        "action_input",
        "observation",
        "observation_is_error",
        "tokens",
        "model_id",
        "agent",
        "difficulty",
        "ts",
    ],
    "run_finish": ["run_id", "outcome", "ts"],
}


def nested(depth: int) -> RAW:
    """A list nested `depth` deep, as raw JSON. The depths drawn: 300 (past orjson's 254 levels
    for writing, well inside Python's recursion limit), 1000 (past Python's limit whatever the
    call stack, so the worker and replay meet it alike), 1100 (past orjson's 1024 for reading)."""
    return RAW(b"[" * depth + b'"deep"' + b"]" * depth)


def field_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(INTS),
        st.sampled_from(FLOATS_FOR_INTS),
        st.sampled_from(STRINGS),
        st.sampled_from(WRONG_TYPES),
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=40),
        st.dictionaries(st.text(max_size=5), st.sampled_from(INTS + STRINGS[:6]), max_size=3),
    )


@dataclass(frozen=True)
class RAW:
    """A raw JSON token for a field (numbers orjson cannot hold, nesting it cannot write)."""

    token: bytes


@dataclass(frozen=True)
class Recipe:
    """One event to build against a test's runs.

    target: which run it names ("new": a fresh run id, "live": one of the test's valid runs,
    "control": a control run's id, sent with a wrong key only). kind: the event type. fields:
    overrides (name -> value, or RAW(bytes) for a raw JSON token). key: "run" (correct), "none",
    "other". step: "next", "same" (a duplicate), "gap", or an explicit override in fields.
    corrupt: bytes-level damage after encoding.
    """

    target: str
    kind: str
    fields: tuple[tuple[str, Any], ...]
    key: str
    step: str
    corrupt: str | None
    live: int


def recipes(live_runs: int) -> st.SearchStrategy[Recipe]:
    kinds = st.sampled_from(["run_start", "step", "step", "step", "run_finish", "evict"])

    @st.composite
    def build(draw: st.DrawFn) -> Recipe:
        kind = draw(kinds)
        target = draw(st.sampled_from(["new", "live", "live", "control"]))
        names = FIELDS.get(kind, ["run_id", "version"])
        n = draw(st.integers(0, min(3, len(names))))
        chosen = draw(st.lists(st.sampled_from(names), min_size=n, max_size=n, unique=True))
        if draw(st.integers(0, 11)) == 0:  # the envelope itself
            chosen.append(draw(st.sampled_from(["schema_version", "type"])))
        overrides = []
        for name in chosen:
            how = draw(st.integers(0, 11))
            if how == 0:
                overrides.append((name, RAW(draw(st.sampled_from(RAW_NUMBERS)))))
            elif how == 1:
                overrides.append((name, nested(draw(st.sampled_from([300, 1000, 1100])))))
            elif how == 2:
                overrides.append((name, "__missing__"))
            elif how <= 7 and name in VALID:
                overrides.append((name, draw(st.sampled_from(VALID[name]))))
            else:
                overrides.append((name, draw(field_values())))
        return Recipe(
            target=target,
            kind=kind,
            fields=tuple(overrides),
            key="other"
            if target == "control"
            else draw(st.sampled_from(["run", "run", "run", "none", "other"])),
            step=draw(st.sampled_from(["next", "next", "same", "gap"])),
            corrupt=draw(
                st.sampled_from([None] * 25 + ["truncate", "bad_utf8", "surrogate", "nan", "tombstone"])
            ),
            live=draw(st.integers(0, max(0, live_runs - 1))),
        )

    return build()


class Runs:
    """The runs one test's recipes write to: live runs and their next step numbers (the test
    keeps these current from the replayed states)."""

    def __init__(self, prefix: str, live: list[str], controls: list[str]) -> None:
        self.prefix = prefix
        self.live = live
        self.controls = controls
        self.next_step = dict.fromkeys(live, 1)
        self.fresh = 0


def _base(kind: str, run_id: str, step: int) -> dict[str, Any]:
    if kind == "run_start":
        return {"type": "run_start", "schema_version": 1, "run_id": run_id, "org_id": "fuzz", "ts": 1.7e9}
    if kind == "step":
        return {
            "type": "step",
            "schema_version": 1,
            "run_id": run_id,
            "step": step,
            "thought": "Check the failing test again.",
            "action": "run_tests",
            "action_input": {"path": "tests/"},
            "observation": "1 failed",
            "tokens": 10,
            "ts": 1.7e9 + step,
        }
    if kind == "run_finish":
        return {"type": "run_finish", "schema_version": 1, "run_id": run_id, "outcome": "failure: x"}
    return {"type": "rb.evict", "run_id": run_id, "version": [step, False, 0]}  # forged: unsigned


def materialize(r: Recipe, runs: Runs) -> tuple[str, bytes | None, bytes | None]:
    """(run_id, key, value) of the event a recipe describes."""
    if r.target == "live" and runs.live:
        run_id = runs.live[r.live % len(runs.live)]
    elif r.target == "control" and runs.controls:
        run_id = runs.controls[r.live % len(runs.controls)]
    else:
        runs.fresh += 1
        run_id = f"{runs.prefix}-new{runs.fresh}"
    nxt = runs.next_step.get(run_id, 1)
    step = {"next": nxt, "same": max(1, nxt - 1), "gap": nxt + 2}[r.step]
    ev = _base(r.kind, run_id, step)
    raws: dict[str, bytes] = {}
    for name, value in r.fields:
        if value == "__missing__":
            ev.pop(name, None)
        elif isinstance(value, RAW):
            ev[name] = f"__raw_{name}__"
            raws[name] = value.token
        else:
            ev[name] = value
    try:
        data = orjson.dumps(ev)
    except TypeError:  # an integer past 64 bits: give it as a raw token
        data = orjson.dumps({k: v for k, v in ev.items() if not (isinstance(v, int) and abs(v) >= 2**63)})
    for name, token in raws.items():
        data = data.replace(orjson.dumps(f"__raw_{name}__"), token, 1)
    if r.corrupt == "truncate":
        data = data[: len(data) // 2]
    elif r.corrupt == "bad_utf8":
        data = data[:-1] + b',"thought":"\xff\xfe"}'
    elif r.corrupt == "surrogate":
        data = data[:-1] + b',"observation":"\xed\xa0\x80"}'
    elif r.corrupt == "nan":
        data = data[:-1] + b',"difficulty":NaN}'
    key = {"run": run_id.encode(), "none": None, "other": f"{runs.prefix}-other".encode()}[r.key]
    if r.corrupt == "tombstone":  # a null value (Kafka takes it only with a key)
        return run_id, key or run_id.encode(), None
    return run_id, key, data
