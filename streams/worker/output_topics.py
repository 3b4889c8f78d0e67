"""The worker's topics, and which one each of its outputs goes to.

In multi-tenant mode each tenant has its own steps, steering and dead-letter topics; the steps
topics are read together (same partition count, so Faust co-partitions them with the run
table's changelog), and a topic's tenant is the org of every event on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import faust

from ..core.state import TraceState
from ..kafka import wire
from ..kafka.signing import SIGNATURE_HEADER, sign
from ..settings import Settings
from .retention_sweep import SendStep


class Topics:
    """The steps topic(s) the worker reads, and where decisions, dead letters and eviction
    requests are sent (by tenant, or to the shared topics when there are none)."""

    def __init__(self, app: faust.App, settings: Settings, steering_partitions: int) -> None:
        s = settings
        self.steering_partitions = steering_partitions
        self.steps_partitions = s.partitions  # the run table is co-partitioned with the steps topic

        def topic(*names: str) -> Any:
            return app.topic(*names, partitions=s.partitions, key_serializer="raw", value_serializer="raw")

        self.tenants = s.tenant_names
        self._steps_by_tenant = {t: topic(s.tenant_topic(t, "steps")) for t in self.tenants}
        self._steering_by_tenant = {t: topic(s.tenant_topic(t, "steering")) for t in self.tenants}
        self._deadletter_by_tenant = {t: topic(s.tenant_topic(t, "deadletter")) for t in self.tenants}
        self._tenant_by_topic = {s.tenant_topic(t, "steps"): t for t in self.tenants}
        steps = list(self._tenant_by_topic) or [s.steps_topic]
        self.steps = topic(*steps)
        self.steps_names = frozenset(steps)
        self.steering = topic(s.steering_topic)
        self._decision_key = s.decision_key.get_secret_value()
        self.deadletter = topic(s.deadletter_topic)
        self.outcomes = topic(s.outcomes_topic)

    def sources(self) -> list[tuple[str | None, str, Any]]:
        """What the worker's agents read, (tenant, agent name, topic): the steps topic, or one
        per tenant in multi-tenant mode, so that each tenant's events have a buffer and an
        agent of their own and one tenant's backlog cannot queue ahead of another's."""
        if not self.tenants:
            return [(None, "evaluate", self.steps)]
        return [(t, f"evaluate-{t}", self._steps_by_tenant[t]) for t in self.tenants]

    def tenant_of(self, topic: str) -> str | None:
        """The tenant whose steps topic this is; None outside multi-tenant mode."""
        return self._tenant_by_topic.get(topic)

    def steering_partition(self, run_id: str) -> int:
        return wire.partition_for(run_id, self.steering_partitions)

    def steps_partition(self, run_id: str) -> int:
        """The steps partition a run's events (and so its eviction requests) go to, which is
        also the partition its per-org count belongs to (replay counts the same way)."""
        return wire.partition_for(run_id, self.steps_partitions)

    async def send_decision(self, key: bytes, value: bytes, partition: int, *, tenant: str | None) -> None:
        """Signed in a header when RB_DECISION_KEY is set: the value stays replay's bytes."""
        topic = self.steering if tenant is None else self._steering_by_tenant[tenant]
        headers = [(SIGNATURE_HEADER, sign(self._decision_key, key, value))] if self._decision_key else None
        await topic.send(key=key, value=value, partition=partition, headers=headers)

    async def send_deadletter(self, key: bytes | None, value: bytes, *, tenant: str | None) -> None:
        topic = self.deadletter if tenant is None else self._deadletter_by_tenant[tenant]
        await topic.send(key=key, value=value)

    async def send_outcome(self, key: bytes, value: bytes, *, delivered: bool = False) -> None:
        """Every tenant's outcome records go to the one outcomes topic, by run_id. `delivered`:
        sent now (not with the event's ack) and waited for until the broker has it."""
        if not delivered:
            await self.outcomes.send(key=key, value=value)
            return
        fut = await self.outcomes.send(key=key, value=value, force=True)
        await fut

    def eviction_sender(self, lookup: Callable[[str], TraceState | None]) -> SendStep:
        """Sends an eviction request into the steps topic its run's events come from: in
        multi-tenant mode its tenant's, found from the run's state (`lookup`)."""

        async def send(key: bytes, value: bytes, partition: int) -> None:
            topic = self.steps
            if self.tenants:
                st = lookup(key.decode("utf-8"))
                if st is None or st.config.org_id not in self._steps_by_tenant:
                    return  # gone already, or of a tenant no longer served: nothing to order it with
                topic = self._steps_by_tenant[st.config.org_id]
            await topic.send(key=key, value=value, partition=partition)

        return send
