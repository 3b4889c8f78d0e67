"""`evolve`: a frozen state's copy with changes, equal to what `dataclasses.replace` gives."""

from __future__ import annotations

import dataclasses

import pytest

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
