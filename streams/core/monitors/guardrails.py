"""Monitor injection guardrails (SPEC section 7): cap, cooldown by state, no back-to-back repeat."""

from __future__ import annotations

from ..decision import Suppressed
from ..fsm import FSMState

MAX_MONITOR_INJECTIONS = 5
COOLDOWN = {FSMState.FAST: 5, FSMState.NORMAL: 3, FSMState.SLOW: 2, FSMState.SKIP: 2}


def hold_back(
    state: FSMState,
    step: int,
    text: str,
    injections: int,
    last_step: int | None,
    last_text: str | None,
    final: bool = False,
) -> Suppressed | None:
    """Which guardrail holds a proposed monitor injection back, or None to let it through.
    A finding on a step that finishes the run (finish/submit, final answer) is reported but not
    injected: no model call follows to read it (verification_skip repeats it if the run goes on)."""
    if final:
        return "final_step"
    if injections >= MAX_MONITOR_INJECTIONS:
        return "cap"
    if last_step is not None and step - last_step < COOLDOWN.get(state, 3):
        return "cooldown"
    if last_text is not None and text == last_text:
        return "duplicate"
    return None
