"""The step event the client publishes is a valid wire event, with the speaking agent when given."""

from __future__ import annotations

from streams.agent.client import step_event
from streams.core.events import Limits, decode
from streams.kafka import wire


def test_a_message_step_of_a_named_agent_is_a_valid_event() -> None:
    ev = step_event("r", 3, thought="Please verify the total.", agent="Verification_Expert")
    assert ev["agent"] == "Verification_Expert" and ev["action"] is None
    assert decode(wire.dumps(ev), Limits())["agent"] == "Verification_Expert"


def test_a_single_agent_step_carries_no_agent_field() -> None:
    assert "agent" not in step_event("r", 1, thought="t", action="bash", action_input="ls")
