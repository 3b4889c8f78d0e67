"""The agent side of the escalation ladder: reading `action`, obeying `stop`, recording it."""

from __future__ import annotations

import asyncio

import pytest

import streams
from streams.agent.client import Decision, _entry
from streams.agent.session import STOPPED_OUTCOME, RunStopped, Steering, SteeringSession
from tests.unit.agent.fake_client import FakeClient, decision, stop


def test_a_decision_from_an_older_worker_reads_as_continue() -> None:
    old = Decision(decision(3, inject=True, injection_text="[REASONBLOCKS]\nrethink"), 2.0)
    assert old.action == "continue" and old.action_reason is None
    steer = Steering(4, old, "m")
    assert steer.action == "continue" and steer.action_reason is None and steer.stop_reason is None
    assert steer.injection_text is not None  # the older worker's injection still applies


def test_a_late_decision_and_an_unknown_action_read_as_continue() -> None:
    assert Steering(1, None, "m").action == "continue"
    assert Decision(decision(1, action="block"), 1.0).action == "continue"  # a newer rung: ignored


def test_action_and_reason_are_read_from_the_decision() -> None:
    d = Decision(stop(4), 1.0)
    steer = Steering(5, d, "m")
    assert steer.action == "stop"
    assert steer.action_reason is not None and steer.action_reason["steps"] == [3, 4]
    assert steer.stop_reason == "You were warned at step 2 and ran the same call again at steps 3, 4."
    esc = Steering(3, Decision(decision(2, action="escalate", model="claude-opus-4-5"), 1.0), "m")
    assert esc.action == "escalate" and esc.model == "claude-opus-4-5"


def test_the_step_log_records_each_decisions_action() -> None:
    assert _entry(4, Decision(stop(4), 1.0), None, 1.0, None).action == "stop"
    assert _entry(4, None, None, 1.0, None).action == "continue"


def test_run_stopped_is_exported_from_the_package() -> None:
    assert streams.RunStopped is RunStopped
    assert "RunStopped" in streams.__all__


def answers_stop_from(k: int) -> FakeClient:
    return FakeClient(lambda step: stop(step) if step >= k else decision(step))


def test_begin_step_raises_run_stopped_and_finish_records_the_stop() -> None:
    client = answers_stop_from(2)
    s = SteeringSession(client, "r")  # type: ignore[arg-type]
    s.start()
    for k in (1, 2):
        s.begin_step()
        s.end_step(thought=f"step {k}", action="run_tests")
    with pytest.raises(RunStopped) as info:
        s.begin_step()
    assert info.value.run_id == "r" and info.value.step == 2
    assert "ran the same call again" in info.value.reason
    assert info.value.action_reason is not None and info.value.action_reason["monitor"] == "semantic_loop"
    assert s.calls == 2 and s.stopped_by_steering
    with pytest.raises(RunStopped):  # the rung never goes down: asking again stops again
        s.begin_step()
    s.finish("success")
    assert s.outcome == STOPPED_OUTCOME == "failure: stopped_by_steering"
    assert client.outcome() == STOPPED_OUTCOME


def test_a_stop_raised_inside_the_with_block_finishes_as_stopped_by_steering() -> None:
    client = answers_stop_from(1)
    s = SteeringSession(client, "r")  # type: ignore[arg-type]
    with pytest.raises(RunStopped), s:
        for _ in range(5):
            s.begin_step()
            s.end_step(action="read_file")
    assert client.kinds() == ["run_start", "step 1", "run_finish"]
    assert client.outcome() == STOPPED_OUTCOME


def test_on_stop_return_hands_the_stop_to_the_caller() -> None:
    client = answers_stop_from(1)
    s = SteeringSession(client, "r", on_stop="return")  # type: ignore[arg-type]
    s.start()
    assert s.begin_step().action == "continue" and not s.stopped_by_steering
    s.end_step(action="read_file")
    steer = s.begin_step()
    assert steer.action == "stop" and steer.stop_reason and s.stopped_by_steering
    s.finish()
    assert client.outcome() == STOPPED_OUTCOME


def test_a_run_that_was_never_stopped_finishes_with_its_own_outcome() -> None:
    client = FakeClient(
        lambda k: decision(k, action="escalate", model="claude-opus-4-5") if k == 1 else decision(k)
    )
    s = SteeringSession(client, "r")  # type: ignore[arg-type]
    s.start()
    s.begin_step()
    s.end_step(action="x")
    assert s.begin_step().model == "claude-opus-4-5"
    s.finish("success")
    assert not s.stopped_by_steering and client.outcome() == "success"


def test_async_finish_after_a_stop_records_it_too() -> None:
    client = answers_stop_from(1)
    s = SteeringSession(client, "r")  # type: ignore[arg-type]

    async def scenario() -> None:
        await s.astart()
        s.begin_step()
        await s.aend_step(action="x")
        with pytest.raises(RunStopped):
            s.begin_step()
        await s.afinish("success")

    asyncio.run(scenario())
    assert client.outcome() == STOPPED_OUTCOME


def test_on_stop_must_be_raise_or_return() -> None:
    with pytest.raises(ValueError, match="on_stop"):
        SteeringSession(FakeClient(), "r", on_stop="ignore")  # type: ignore[arg-type]


def test_a_session_refuses_bad_escalation_options_at_construction_before_sending_anything() -> None:
    client = FakeClient()
    with pytest.raises(ValueError, match=r"escalation\.stop_after must be an integer >= 1"):
        SteeringSession(client, "r", escalation={"stop_after": 0})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="monitors_off: unknown monitor 'loop'"):
        SteeringSession(client, "r2", monitors_off=["loop"])  # type: ignore[arg-type]
    assert client.events == []


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"modle_routing": {}}, TypeError, "did you mean 'model_routing'"),
        ({"escalaton": {}}, TypeError, "did you mean 'escalation'"),
        ({"token_budget": "x"}, ValueError, r"data\.token_budget must be integer"),
        ({"org_id": 5}, ValueError, r"data\.org_id must be string"),
    ],
)
def test_a_session_refuses_a_misspelt_or_mistyped_run_field_at_construction(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    client = FakeClient()
    with pytest.raises(error, match=message):
        SteeringSession(client, "r", **kwargs)  # type: ignore[arg-type]
    assert client.events == []


def test_good_options_go_out_in_the_run_start() -> None:
    client = FakeClient()
    policy = {"escalate_model_after": 1, "stop_after": 2, "escalation_model": "claude-opus-4-5"}
    s = SteeringSession(client, "r", escalation=policy, monitors_off=["late_sprawl"])  # type: ignore[arg-type]
    s.start()
    assert client.events[0][2]["escalation"] == policy
    assert client.events[0][2]["monitors_off"] == ["late_sprawl"]


def test_start_inside_the_with_block_answers_decision_0_again_and_sends_nothing() -> None:
    """The docs' `with SteeringSession(...) as s:` and the README's `s.start()` agree."""
    client = FakeClient()
    with SteeringSession(client, "r", model="m") as s:  # type: ignore[arg-type]
        first = s.start()
        assert first is not None and first.step == 0
        assert s.start() is first
    assert [e[0] for e in client.events] == ["run_start", "run_finish"]


def test_the_sync_client_reports_the_async_clients_counters() -> None:
    from streams.agent.client import SyncSteeringClient
    from streams.settings import Settings

    c = SyncSteeringClient(Settings.from_env({}))
    try:
        c._client.late_decisions, c._client.failed_sends = 2, 1
        assert (c.late_decisions, c.duplicate_decisions, c.unasked_decisions, c.failed_sends) == (2, 0, 0, 1)
    finally:
        c._loop.call_soon_threadsafe(c._loop.stop)
        c._thread.join(timeout=5)
