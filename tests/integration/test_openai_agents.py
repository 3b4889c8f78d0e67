"""Real OpenAI Agents SDK runs (real `Runner`, real `Agent`s with hand-offs and function tools,
a scripted model provider) steered through the real broker and worker by `AgentsSteering`."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, RunConfig, function_tool

from examples.openai_scripted import ScriptedProvider, reply, say
from streams.agent.adapters.openai_agents import AgentsSteering, RunStoppedBySteering
from streams.agent.client import SyncSteeringClient
from streams.agent.compose import REASONBLOCKS_MARKER
from streams.agent.session import STOPPED_OUTCOME
from streams.local.worker_process import WorkerProcess
from tests.integration.helpers import run_summary, steps_of

pytestmark = pytest.mark.integration

ROUTING = {"FAST": "gpt-4.1-mini", "SLOW": "o3"}
TASK = "Fix the failing test in tests/test_session.py (expired tokens raise KeyError)."
FAILING = "FAILED tests/test_session.py::test_expired - KeyError: 'expires_at'\n1 failed, 12 passed"
CODER = "You are a careful coding agent."


@function_tool
def run_tests(path: str) -> str:
    """Run the tests in `path`."""
    return FAILING


@function_tool
def lookup_invoice(invoice_id: str) -> str:
    """Look up an invoice by id."""
    return f"invoice {invoice_id}: 120.00 EUR, charged twice on 2024-05-02"


@function_tool
def refund(invoice_id: str, amount: float) -> str:
    """Refund part of an invoice."""
    return f"refunded {amount:.2f} EUR on invoice {invoice_id}"


@pytest.fixture(scope="module")
def oai_worker(adapters_worker: WorkerProcess) -> WorkerProcess:
    """The adapters' shared worker (conftest): every test reads back only its runs."""
    return adapters_worker


def config(provider: ScriptedProvider) -> RunConfig:
    return RunConfig(model_provider=provider, tracing_disabled=True)


def looping(n: int) -> list[dict[str, Any]]:
    """The same failing test run again and again, then a give-up message."""
    steps = [
        reply("The expiry test fails. Run it again.", ("run_tests", {"path": "tests/test_session.py"}), n=i)
        for i in range(n)
    ]
    return [*steps, say("I could not fix it.", n=n)]


def test_a_two_agent_hand_off_run_names_each_agent_and_gets_every_decision(oai_worker: WorkerProcess) -> None:
    billing = Agent(
        name="Billing",
        instructions="You resolve billing problems.",
        tools=[lookup_invoice, refund],
        model="gpt-4.1",
    )
    triage = Agent(name="Triage", instructions="Route the customer.", handoffs=[billing], model="gpt-4.1")
    provider = ScriptedProvider(
        [
            reply("A billing question: hand it to Billing.", ("transfer_to_billing", {}), n=0),
            reply("Look up the invoice first.", ("lookup_invoice", {"invoice_id": "INV-42"}), n=1),
            reply(
                "It was charged twice: refund one charge.",
                ("refund", {"invoice_id": "INV-42", "amount": 120.0}),
                n=2,
            ),
            say("Refunded the duplicate charge of 120.00 EUR on INV-42.", n=3),
        ]
    )
    with SyncSteeringClient(oai_worker.settings, deadline_ms=15000) as c:
        steering = AgentsSteering(c, model_routing=ROUTING, org_id="acme")
        result = steering.run_sync(
            triage, "I was charged twice for invoice INV-42.", run_config=config(provider)
        )
        log, run_id = steering.step_log, steering.run_id
    assert result.final_output == "Refunded the duplicate charge of 120.00 EUR on INV-42."
    assert result.last_agent is billing
    # four model calls: decision 0 and steps 1-3 answered, none late
    assert [e.step for e in log] == [0, 1, 2, 3] and not any(e.late for e in log), log
    summary = run_summary(oai_worker, run_id or "")
    assert summary["outcome"] == "success" and summary["step"] == 3, summary
    assert summary["org_id"] == "acme" and summary["tokens_used"] == 3 * 340, summary  # from Usage
    assert [c.call.system_instructions for c in provider.calls[:2]] == [
        "Route the customer.",
        "You resolve billing problems.",
    ]
    steps = steps_of(oai_worker, run_id or "")
    assert [(s["agent"], s["action"]) for s in steps] == [
        ("Triage", "transfer_to_billing"),
        ("Billing", "lookup_invoice"),
        ("Billing", "refund"),
    ]
    # the hand-off gave Billing the run: its first step says so, and the worker's lead moves
    assert [s.get("lead") for s in steps] == [None, True, None], steps
    assert steps[1]["observation"].startswith("invoice INV-42: 120.00 EUR")
    assert all(s["tokens"] == 340 and s["model_id"] == "gpt-4.1" for s in steps), steps


def test_a_looping_agent_gets_the_block_in_its_next_instructions_and_the_routed_model(
    oai_worker: WorkerProcess,
) -> None:
    coder = Agent(name="Coder", instructions=CODER, tools=[run_tests], model="gpt-4.1")
    provider = ScriptedProvider(looping(7))
    with SyncSteeringClient(oai_worker.settings, deadline_ms=15000) as c:
        steering = AgentsSteering(
            c,
            model_routing=ROUTING,
            escalation={"escalate_model_after": 1, "stop_after": None},
            e_traces_enabled=False,
        )
        steering.run_sync(coder, TASK, run_config=config(provider))
        log = steering.step_log
    calls = provider.calls
    assert len(calls) == 8 and not any(e.late for e in log), log
    # decision k steers call k+1: a loop warning is that call's last input item (a user message
    # after the tool result), and the instructions stay the agent's own on every call
    warned = [k for k, e in enumerate(log) if "semantic_loop" in e.monitors_fired]
    assert warned, [e.monitors_fired for e in log]
    k = warned[0]
    last = list(calls[k].call.input)[-1]
    assert isinstance(last, dict) and last["role"] == "user", last
    assert last["content"].startswith(REASONBLOCKS_MARKER[:-1] + " ") and "run_tests" in last["content"]
    assert {c.call.system_instructions for c in calls} == {CODER}
    assert REASONBLOCKS_MARKER[:-1] not in str(calls[0].call.input)  # nothing to inject before the loop
    # the warning was ignored (the same call again): escalated to model_routing["SLOW"], and
    # decision k's model served call k+1 (calls[k]) and every call after it
    routed = [k for k, e in enumerate(log) if e.model_id == "o3"]
    assert routed and log[routed[0]].action == "escalate", [(e.action, e.model_id) for e in log]
    first = routed[0]
    assert [c.model for c in calls] == ["gpt-4.1"] * first + ["o3"] * (len(calls) - first)


def test_an_agent_handed_the_run_that_ignores_two_warnings_is_stopped_the_sdk_way(
    oai_worker: WorkerProcess,
) -> None:
    """Triage hands the run to Coder for good: Coder leads it now, so its ignored warnings stop
    the run (a sub-agent's would only escalate)."""
    coder = Agent(name="Coder", instructions=CODER, tools=[run_tests], model="gpt-4.1")
    triage = Agent(name="Triage", instructions="Route the task.", handoffs=[coder], model="gpt-4.1")
    provider = ScriptedProvider(
        [reply("A failing test: hand it to Coder.", ("transfer_to_coder", {}), n=99), *looping(12)]
    )
    with SyncSteeringClient(oai_worker.settings, deadline_ms=15000) as c:
        steering = AgentsSteering(
            c,
            model_routing=ROUTING,
            escalation={"escalate_model_after": 1, "stop_after": 2},
            e_traces_enabled=False,
        )
        with pytest.raises(RunStoppedBySteering) as info:
            steering.run_sync(triage, TASK, run_config=config(provider))
        run_id = steering.run_id
    stop = info.value
    assert stop.run_id == run_id and stop.reason and stop.action_reason is not None
    assert stop.action_reason["monitor"] == "semantic_loop" and stop.action_reason["ignored"] == 2
    assert str(stop).startswith(f"run {run_id} stopped by steering after step {stop.step}: ")
    assert stop.run_data is not None and stop.run_data.last_agent is coder  # the SDK's run data
    # stopped before the call its step's decision would have steered: one call per step
    assert len(provider.calls) == stop.step < 13
    assert provider.calls[-1].model == "o3"  # escalated first, then stopped
    assert run_summary(oai_worker, run_id or "")["outcome"] == STOPPED_OUTCOME
