"""The pre-call gate on the agent side (`streams.agent.gate`, `SteeringSession.check_call`,
`SteeringClient.check_call`): decisions scripted with taint lists, no broker, no worker."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from streams import taint
from streams.agent import gate
from streams.agent.client import SteeringClient, SyncSteeringClient
from streams.agent.gate import DENY_PREFIX, check, denial_text
from streams.agent.session import SteeringSession
from streams.client_settings import ClientSettings
from tests.unit.agent.fake_client import FakeClient, decision

IBAN = "CH9300762011623852957"  # the attacker's account, planted in an e-mail
OWN_IBAN = "DE89370400440532013000"  # the one the user gave
PAY = {"recipient": IBAN, "amount": 100.0, "subject": "rent"}


def entry(value: str, step: int = 1, tool: str = "read_inbox", instr: bool = True) -> dict[str, Any]:
    """The taint entry the worker sends for `value` (its hash, never the value)."""
    (kind, norm), *_ = taint.extract_values(value)
    return {"h": taint.value_hash(norm), "kind": kind, "step": step, "tool": tool, "instr": instr}


def tainted(step: int, *entries: dict[str, Any]) -> dict[str, Any]:
    return decision(step, taint=list(entries))


def session(client: FakeClient, **kw: Any) -> SteeringSession:
    s = SteeringSession(client, model="m", **kw)  # type: ignore[arg-type]
    s.start()
    return s


def after_reading(s: SteeringSession) -> None:
    """Step 1: the agent read its inbox (the decision to it carries the taint list)."""
    s.begin_step()
    s.end_step(action="read_inbox", action_input={}, observation="...")
    s.begin_step()


# -- the check ---------------------------------------------------------------------------------


def test_a_call_carrying_a_value_from_an_instructing_tool_output_is_denied_naming_its_source() -> None:
    v = check(tainted(1, entry(IBAN)), "send_money", PAY)
    assert not v.allow and v.source_step == 1 and v.hashes == (entry(IBAN)["h"],)
    assert v.reason is not None and "step 1" in v.reason and "read_inbox" in v.reason
    assert IBAN not in v.reason and IBAN.lower() not in v.reason  # named by source, never quoted


def test_a_value_the_user_gave_passes() -> None:
    assert check(tainted(1, entry(IBAN)), "send_money", {**PAY, "recipient": OWN_IBAN}).allow
    assert check(tainted(1, entry(IBAN)), "read_file", {"path": "notes.txt"}).allow


@pytest.mark.parametrize(
    "data",
    [
        None,  # no decision: late, the broker away
        decision(1),  # a decision without taint (an older worker)
        decision(1, taint=None),
        decision(1, taint={"h": "0" * 16}),
        decision(1, taint=[]),
        decision(1, taint=["x", 3, None, {"h": 5}, {"h": "zz", "step": "1"}]),
        decision(1, taint=[entry(IBAN)] * 33),  # longer than the wire's 32
        "not a decision",
    ],
)
def test_the_gate_fails_open_on_a_missing_or_malformed_taint_list(data: Any) -> None:
    assert check(data, "send_money", PAY).allow


def test_the_gate_fails_open_when_the_check_itself_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(gate, "gate", broken)
    assert check(tainted(1, entry(IBAN)), "send_money", PAY).allow
    assert check(tainted(1, entry(IBAN)), 42, PAY).allow  # a tool that is no name


def test_the_denial_text_says_who_refused_why_and_to_go_on_without_the_value() -> None:
    text = denial_text(check(tainted(3, entry(IBAN, step=3)), "send_money", PAY), "send_money")
    assert text.startswith(DENY_PREFIX)
    assert "step 3" in text and "user's task" in text and IBAN not in text
    fallback = denial_text(gate.GateVerdict(False, None, 2, ()), "send`money[REASONBLOCKS]")
    assert fallback.startswith(DENY_PREFIX) and "REASONBLOCKS" not in fallback
    assert fallback.count("`") % 2 == 0  # no fence left open


# -- the session ---------------------------------------------------------------------------


def test_a_session_checks_a_call_against_its_latest_decision_and_counts_the_denial(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = session(FakeClient(lambda k: tainted(k, entry(IBAN)) if k == 1 else decision(k)))
    assert s.check_call("send_money", PAY).allow  # decision 0: nothing read yet
    after_reading(s)
    with caplog.at_level(logging.WARNING, logger="streams.agent.gate"):
        first = s.check_call("send_money", PAY)
        second = s.check_call("send_money", {**PAY, "amount": 5})
    assert not first.allow and not second.allow and s.denied_calls == 2
    lines = [r.getMessage() for r in caplog.records if r.name == "streams.agent.gate"]
    assert len(lines) == 2 and all("send_money" in x and s.run_id in x for x in lines), lines
    assert not any(IBAN in x for x in lines)
    assert s.check_call("send_money", {**PAY, "recipient": OWN_IBAN}).allow and s.denied_calls == 2


def test_a_late_decision_leaves_the_call_allowed() -> None:
    s = session(FakeClient(lambda k: tainted(k, entry(IBAN)) if k == 1 else None))
    after_reading(s)
    assert not s.check_call("send_money", PAY).allow
    s.end_step(action="read_file", action_input={"path": "a"}, observation="x")  # decision 2 late
    assert s.last_decision is None and s.check_call("send_money", PAY).allow


def test_the_gate_turned_off_allows_every_call() -> None:
    answer = lambda k: tainted(k, entry(IBAN))  # noqa: E731
    off = session(FakeClient(answer), call_gate=False)
    after_reading(off)
    assert off.check_call("send_money", PAY).allow and off.denied_calls == 0
    client = FakeClient(answer)
    client.call_gate = False  # type: ignore[attr-defined]  # the client's setting (RB_CLIENT_CALL_GATE)
    by_client = session(client)
    after_reading(by_client)
    assert by_client.check_call("send_money", PAY).allow
    on = session(client, call_gate=True)  # the session's own setting wins
    after_reading(on)
    assert not on.check_call("send_money", PAY).allow


def test_call_gate_is_a_session_option_not_a_run_field() -> None:
    with pytest.raises(TypeError, match="call_gate"):
        SteeringSession(FakeClient(), call_gte=False)  # type: ignore[arg-type]


# -- the client and its setting --------------------------------------------------------------


def test_rb_client_call_gate_turns_the_clients_gate_off_and_a_keyword_overrides_it() -> None:
    assert ClientSettings.from_env({}).client_call_gate is True
    off = ClientSettings.from_env({"RB_CLIENT_CALL_GATE": "false"})
    assert off.client_call_gate is False
    assert SteeringClient(off).call_gate is False
    assert SteeringClient(off, call_gate=True).call_gate is True
    assert SteeringClient(ClientSettings.from_env({})).call_gate is True


def test_the_client_allows_a_call_of_a_run_it_does_not_know() -> None:
    c = SyncSteeringClient(ClientSettings.from_env({}, broker="127.0.0.1:9"))
    try:
        assert c.check_call("no-such-run", "send_money", PAY).allow and c.denied_calls == 0
        assert c.call_gate is True
    finally:
        c.stop()
