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


def test_a_step_too_large_for_the_worker_is_cut_to_fit_keeping_each_texts_head() -> None:
    """A refused step would leave the run's next step out of order: one long model response
    must not end a run's steering. The worker reads the heads (20,000 chars) anyway."""
    big = "é" * 400_000  # 800 KB of text in each field
    ev = step_event(
        "r",
        2,
        thought="Plan: " + big,
        action="write_file",
        action_input={"path": "a.py", "text": big},
        observation="Traceback " + big,
    )
    raw = wire.dumps(ev)
    assert len(raw) <= 240 * 1024
    got = decode(raw, Limits())  # the worker takes it
    assert got["thought"].startswith("Plan: éé") and got["observation"].startswith("Traceback éé")
    assert len(got["thought"]) >= 20_000 and len(got["observation"]) >= 20_000
    assert isinstance(got["action_input"], str) and got["action_input"].startswith('{"path":"a.py"')


def test_a_step_of_ordinary_size_is_sent_as_given() -> None:
    ev = step_event(
        "r", 1, thought="t" * 30_000, action="bash", action_input={"command": "ls"}, observation="x"
    )
    assert ev["thought"] == "t" * 30_000 and ev["action_input"] == {"command": "ls"}
