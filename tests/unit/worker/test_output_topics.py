from __future__ import annotations

import asyncio
from typing import Any

from streams.core.state import RunConfig, TraceState
from streams.kafka import wire
from streams.kafka.signing import SIGNATURE_HEADER, sign
from streams.settings import Settings
from streams.worker.output_topics import Topics


class FakeTopic:
    def __init__(self, names: tuple[str, ...], sent: list[tuple[str, dict[str, Any]]]) -> None:
        self.name, self._sent = "+".join(names), sent

    async def send(self, **record: Any) -> None:
        self._sent.append((self.name, record))


class FakeApp:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def topic(self, *names: str, **_: Any) -> FakeTopic:
        return FakeTopic(names, self.sent)


def test_one_tenant_mode_sends_to_the_shared_topics() -> None:
    app = FakeApp()
    topics = Topics(app, Settings.from_env({}), 4)  # type: ignore[arg-type]
    send_eviction = topics.eviction_sender(lambda _run_id: None)

    async def go() -> None:
        await topics.send_decision(b"r", b"d", 2, tenant=None)
        await topics.send_deadletter(None, b"x", tenant=None)
        await send_eviction(b"r", b"e", 3)

    asyncio.run(go())
    assert app.sent == [
        ("rb.steering", {"key": b"r", "value": b"d", "partition": 2, "headers": None}),  # no key: unsigned
        ("rb.deadletter", {"key": None, "value": b"x"}),
        ("rb.steps", {"key": b"r", "value": b"e", "partition": 3}),
    ]
    assert topics.steps_names == {"rb.steps"} and topics.tenant_of("rb.steps") is None
    assert topics.steering_partition("run-7") == wire.partition_for("run-7", 4)


def test_each_tenant_is_answered_on_its_own_topics() -> None:
    app = FakeApp()
    s = Settings.from_env({}, tenants="acme,globex", control_key="k", decision_key="dk")
    topics = Topics(app, s, 4)  # type: ignore[arg-type]
    runs = {
        "a": TraceState("a", RunConfig(org_id="globex")),
        "old": TraceState("old", RunConfig(org_id="gone")),
    }
    send_eviction = topics.eviction_sender(runs.get)

    async def go() -> None:
        await topics.send_decision(b"a", b"d", 1, tenant="globex")
        await topics.send_deadletter(b"a", b"x", tenant="acme")
        await send_eviction(b"a", b"e", 1)
        await send_eviction(b"old", b"e", 1)  # of a tenant no longer served: nowhere to order it
        await send_eviction(b"evicted", b"e", 1)  # gone already

    asyncio.run(go())
    assert app.sent == [
        (
            "rb.globex.steering",
            {
                "key": b"a",
                "value": b"d",
                "partition": 1,
                "headers": [(SIGNATURE_HEADER, sign("dk", b"a", b"d"))],
            },
        ),
        ("rb.acme.deadletter", {"key": b"a", "value": b"x"}),
        ("rb.globex.steps", {"key": b"a", "value": b"e", "partition": 1}),
    ]
    assert topics.steps_names == {"rb.acme.steps", "rb.globex.steps"}
    assert topics.tenant_of("rb.acme.steps") == "acme" and topics.tenant_of("rb.steps") is None


def test_each_tenant_is_read_by_an_agent_of_its_own_and_one_tenant_mode_by_one() -> None:
    """One agent and buffer per tenant: a tenant's backlog queues behind itself only."""
    one = Topics(FakeApp(), Settings.from_env({}), 4)  # type: ignore[arg-type]
    assert [(t, name, topic.name) for t, name, topic in one.sources()] == [(None, "evaluate", "rb.steps")]
    s = Settings.from_env({}, tenants="acme,globex", control_key="k", decision_key="d")
    many = Topics(FakeApp(), s, 4)  # type: ignore[arg-type]
    assert [(t, name, topic.name) for t, name, topic in many.sources()] == [
        ("acme", "evaluate-acme", "rb.acme.steps"),
        ("globex", "evaluate-globex", "rb.globex.steps"),
    ]
