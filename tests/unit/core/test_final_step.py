"""A monitor finding on the step that ends a run is reported, not injected: no call reads it."""

from __future__ import annotations

from streams.replay import Replayer
from streams.shared.contract import load_schema
from tests.factories import b, run_start, step
from tests.models import semantics


def test_a_finding_on_a_submit_step_is_reported_and_held_back_as_final_step() -> None:
    import jsonschema

    rp = Replayer(sem=semantics())
    rp.feed(b(run_start("r", task="Fix the parser")))
    rp.feed(
        b(
            step(
                "r", 1, thought="Apply the fix.", action="edit", action_input="3:3\nx = 1\n", observation="ok"
            )
        )
    )
    d, _ = rp.feed(
        b(step("r", 2, thought="Done, submitting.", action="submit", action_input=None, observation=""))
    )
    assert d is not None
    assert "verification_skip" in d["monitors"]["fired"]
    assert d["suppressed"] == "final_step" and not d["inject"] and d["injections"] == []
    jsonschema.validate(d, load_schema("decision"))
    # the run goes on after all: the same finding is injected on the next step
    d, _ = rp.feed(
        b(step("r", 3, thought="Rejected; look again.", action="open", action_input="a.py", observation="x"))
    )
    assert d is not None and d["inject"] and "step 2" in d["injection_text"]


def test_a_repeated_run_start_that_leaves_the_scorer_out_keeps_the_run_without_conflict() -> None:
    """A run started before an upgrade changed the default scorer is not in conflict with its own resend."""
    rp = Replayer(sem=semantics())
    rp.feed(b(run_start("u", scorer="heuristic", task="t")))
    _, dead = rp.feed(b(run_start("u", task="t")))
    assert dead is None
    _, dead = rp.feed(b(run_start("u", task="another task")))
    assert dead is not None and dead["reason"] == "config_conflict"
