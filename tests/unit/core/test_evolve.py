"""`evolve` and `rebuild`: a frozen state's copy with changes, or decoded from its fields, equal to
what `dataclasses.replace` and the constructor give."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from streams.core.evolve import drop_defaults, non_default, plain_fields, rebuild
from streams.core.monitors.verification import VerificationState
from streams.core.state import RunConfig, TraceState


def test_evolve_gives_what_replace_gives_and_leaves_the_original_alone() -> None:
    st = TraceState("r", RunConfig())
    new = st.evolve(last_step=3, finished=True)
    assert new == dataclasses.replace(st, last_step=3, finished=True)
    assert (st.last_step, st.finished) != (3, True)
    v = VerificationState()
    assert v.evolve(asked_by="coder") == dataclasses.replace(v, asked_by="coder")


def test_evolve_refuses_a_field_the_state_does_not_have() -> None:
    with pytest.raises(TypeError, match="no field"):
        TraceState("r", RunConfig()).evolve(last_stepp=3)
    with pytest.raises(TypeError, match="no field"):
        VerificationState().evolve(nope=1)


@dataclasses.dataclass(frozen=True)
class _Plain:
    a: int = 0
    b: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class _Checked:
    a: int = 0

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError("a < 0")


def test_rebuild_of_every_field_equals_the_constructor_without_running_it() -> None:
    stored = {"a": 2, "b": [1]}
    assert rebuild(_Plain, stored) == _Plain(**stored)
    st = TraceState("r", RunConfig(task="t"), last_step=4)
    raw = orjson.loads(st.encode())
    assert TraceState.decode(st.encode()) == st
    assert rebuild(RunConfig, raw["config"]) == RunConfig(**raw["config"])


def test_rebuild_takes_the_constructor_for_missing_or_unknown_fields_and_own_checks() -> None:
    assert rebuild(_Plain, {"a": 1}) == _Plain(a=1, b=[])  # an older state: defaults fill in
    with pytest.raises(TypeError):
        rebuild(_Plain, {"a": 1, "b": [], "c": 3})
    with pytest.raises(ValueError, match="a < 0"):
        rebuild(_Checked, {"a": -1})  # a __post_init__ is never skipped
    assert plain_fields(_Checked) is None and plain_fields(_Plain) == {"a", "b"}


def test_rebuild_fills_missing_fields_with_fresh_defaults_and_needs_what_has_none() -> None:
    a, b = rebuild(_Plain, {"a": 1}), rebuild(_Plain, {"a": 2})
    assert a == _Plain(a=1) and a.b is not b.b  # a factory's default is made anew each time
    assert list(vars(rebuild(_Plain, {"b": [3]}))) == ["a", "b"]  # in field order
    with pytest.raises(TypeError):
        rebuild(TraceState, {"config": RunConfig()})  # run_id has no default: the constructor's error


def test_non_default_keeps_exactly_the_fields_rebuild_cannot_fill_back() -> None:
    assert non_default(_Plain()) == {}
    assert non_default(_Plain(a=1, b=[0])) == {"a": 1, "b": [0]}
    assert non_default(_Plain(a=False)) == {"a": False}  # equal to the default 0, not of its type
    assert non_default(_Plain(), frozenset({"a"})) == {"a": 0}
    assert drop_defaults(_Plain, {"a": 0, "b": [2]}) == {"b": [2]}
    st = TraceState("r", RunConfig(task="t"), last_step=4, history=[0.5])
    assert rebuild(TraceState, {**non_default(st), "config": st.config}) == st
