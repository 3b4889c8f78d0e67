"""Kafka client quotas for a tenant's principal (multi-tenant mode): the brokers throttle what
one tenant may produce, so a flood from one tenant cannot fill the brokers and the worker's
fetches ahead of every other tenant's steps.

Set with the AlterClientQuotas request (KIP-546; aiokafka's admin client has no call for it,
and its protocol module only has the describe side, so the request is declared here from
Kafka's protocol definition), read back with DescribeClientQuotas. A quota is per broker: a
tenant may produce `producer_byte_rate` bytes/s to each broker that leads one of its steps
partitions. Past it the broker delays its answers (the producer waits; nothing is lost).

Sizing (docs/production.md): the tenant's peak steps per second times its step size, with
room to spare: 100 agents stepping once a second with 10 KB steps need ~1 MB/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.admin import DescribeClientQuotasRequest
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import Array, Boolean, Float64, Int16, Int32, Schema, String

from ..kafka.client_settings import SettingsError
from ..kafka.security import client_kwargs
from ..settings import Settings

PRODUCER_BYTE_RATE = "producer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
# 1 MiB/s per broker: 100 agents stepping once a second with 10 KB steps, and room to spare.
DEFAULT_PRODUCER_BYTE_RATE = 1024 * 1024
USER = "user"  # the quota entity of a SASL principal User:<name>
MATCH_EXACT = 0


class AlterClientQuotasResponse_v0(Response):  # type: ignore[misc]  # aiokafka has no stubs
    API_KEY = 49
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "entries",
            Array(
                ("error_code", Int16),
                ("error_message", String("utf-8")),
                ("entity", Array(("entity_type", String("utf-8")), ("entity_name", String("utf-8")))),
            ),
        ),
    )


class AlterClientQuotasRequest_v0(RequestStruct):  # type: ignore[misc]
    API_KEY = 49
    API_VERSION = 0
    RESPONSE_TYPE = AlterClientQuotasResponse_v0
    SCHEMA = Schema(
        (
            "entries",
            Array(
                ("entity", Array(("entity_type", String("utf-8")), ("entity_name", String("utf-8")))),
                ("ops", Array(("key", String("utf-8")), ("value", Float64), ("remove", Boolean))),
            ),
        ),
        ("validate_only", Boolean),
    )


AlterClientQuotasRequestStruct: TypeAlias = AlterClientQuotasRequest_v0


class AlterClientQuotasRequest(Request[AlterClientQuotasRequestStruct]):  # type: ignore[misc]
    """Set (or remove, with None) quotas of one user entity."""

    API_KEY = 49

    def __init__(self, user: str, quotas: dict[str, float | None]) -> None:
        self._user = user
        self._quotas = quotas

    def build(
        self, request_struct_class: type[AlterClientQuotasRequestStruct]
    ) -> AlterClientQuotasRequestStruct:
        ops = [(k, 0.0 if v is None else float(v), v is None) for k, v in self._quotas.items()]
        return request_struct_class([([(USER, self._user)], ops)], False)


@dataclass(frozen=True)
class Quotas:
    """What a tenant's principal may use per broker (None: not limited by rb-streams)."""

    producer_byte_rate: int | None = DEFAULT_PRODUCER_BYTE_RATE
    request_percentage: float | None = None

    def as_dict(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.producer_byte_rate is not None:
            out[PRODUCER_BYTE_RATE] = float(self.producer_byte_rate)
        if self.request_percentage is not None:
            out[REQUEST_PERCENTAGE] = float(self.request_percentage)
        return out

    def describe(self) -> str:
        parts = []
        if self.producer_byte_rate is not None:
            parts.append(f"produce at most {self.producer_byte_rate} bytes/s per broker")
        if self.request_percentage is not None:
            parts.append(f"use at most {self.request_percentage:g}% of a broker request thread")
        return ", ".join(parts) or "no quota"


def user_of(principal: str) -> str:
    """The quota entity name of a principal `User:<name>`."""
    if not principal.startswith("User:") or len(principal) == len("User:"):
        raise SettingsError(f"principal {principal[:80]!r}: expected the form User:<name>")
    return principal[len("User:") :]


async def set_quotas(settings: Settings, principal: str, quotas: Quotas) -> None:
    """Set `quotas` on the principal's user entity, with the admin credentials of `settings`
    (idempotent: setting the same value again changes nothing)."""
    values = quotas.as_dict()
    if not values:
        return
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.bootstrap_servers, request_timeout_ms=10_000, **client_kwargs(settings)
    )
    await admin.start()
    try:
        response = await admin._send_request(AlterClientQuotasRequest(user_of(principal), dict(values)))
        for code, message, _entity in response.entries:
            if code:
                raise SettingsError(
                    f"the broker refused the quotas of {principal} (error {code}: {message}); may "
                    "these credentials alter client quotas (ALTER_CONFIGS on the cluster)?"
                )
    finally:
        await admin.close()


async def read_quotas(settings: Settings, principal: str) -> dict[str, float]:
    """The quotas the brokers hold for the principal's user entity (exact match)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.bootstrap_servers, request_timeout_ms=10_000, **client_kwargs(settings)
    )
    await admin.start()
    try:
        req = DescribeClientQuotasRequest([(USER, MATCH_EXACT, user_of(principal))], True)
        response = await admin._send_request(req)
        if response.error_code:
            raise SettingsError(f"could not read the quotas of {principal}: {response.error_message}")
        return {name: value for _entity, values in response.entries for name, value in values}
    finally:
        await admin.close()
