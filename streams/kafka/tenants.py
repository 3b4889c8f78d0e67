"""Multi-tenant mode's Kafka side: a tenant's three topics and the ACLs that make them its own.

A tenant's principal may write `<prefix>.<tenant>.steps` and read `<prefix>.<tenant>.steering`
and `<prefix>.<tenant>.deadletter`, nothing else; the worker's principal may read every
tenant's steps and write its steering and dead-letters. With an authorizer on the brokers,
Kafka then proves which tenant an event came from, and the worker takes the run's org from
the topic (core.engine.check_claim), never from the event.

ACLs are created with the CreateAcls request (aiokafka's admin client has no call for it; the
request itself is in its protocol module). SCRAM credentials are the cluster's business: create
them with Kafka's own tooling (docs/production.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.protocol.admin import CreateAclsRequest

from ..settings import TOPIC_KINDS, Settings, SettingsError, check_tenant_name
from .security import client_kwargs
from .topics import create_missing

# Kafka's protocol numbers (org.apache.kafka.common.acl / resource).
TOPIC, GROUP = 2, 3
LITERAL, PREFIXED = 3, 4
READ, WRITE, DESCRIBE = 3, 4, 8
ALLOW = 3


@dataclass(frozen=True)
class Acl:
    """One ALLOW rule: `principal` may `operation` on the resource, from any host."""

    principal: str
    resource_type: int
    name: str
    pattern: int
    operation: int

    def describe(self) -> str:
        kind = {TOPIC: "topic", GROUP: "group"}[self.resource_type]
        op = {READ: "READ", WRITE: "WRITE", DESCRIBE: "DESCRIBE"}[self.operation]
        how = "prefixed" if self.pattern == PREFIXED else "literal"
        return f"{self.principal} {op} {kind} {self.name} ({how})"


def tenant_acls(settings: Settings, tenant: str, principal: str, worker_principal: str = "") -> list[Acl]:
    """What a tenant's principal (and, if given, the worker's) is allowed; nothing else is."""
    steps, steering, dead = (settings.tenant_topic(tenant, k) for k in TOPIC_KINDS)
    acls = [
        Acl(principal, TOPIC, steps, LITERAL, WRITE),
        Acl(principal, TOPIC, steps, LITERAL, DESCRIBE),
        Acl(principal, TOPIC, steering, LITERAL, READ),
        Acl(principal, TOPIC, steering, LITERAL, DESCRIBE),
        Acl(principal, TOPIC, dead, LITERAL, READ),
        Acl(principal, TOPIC, dead, LITERAL, DESCRIBE),
        # consumer groups the tenant's own readers may use (the steering client uses none)
        Acl(principal, GROUP, f"{settings.topic_prefix}.{tenant}.", PREFIXED, READ),
    ]
    if worker_principal:
        acls += [
            Acl(worker_principal, TOPIC, steps, LITERAL, READ),
            Acl(worker_principal, TOPIC, steps, LITERAL, WRITE),  # eviction records, in the run's order
            Acl(worker_principal, TOPIC, steps, LITERAL, DESCRIBE),
            Acl(worker_principal, TOPIC, steering, LITERAL, WRITE),
            Acl(worker_principal, TOPIC, steering, LITERAL, DESCRIBE),
            Acl(worker_principal, TOPIC, dead, LITERAL, WRITE),
            Acl(worker_principal, TOPIC, dead, LITERAL, DESCRIBE),
        ]
    return acls


@dataclass(frozen=True)
class TenantSetup:
    tenant: str
    topics: list[str]
    created: list[str]
    acls: list[Acl]


async def add_tenant(
    settings: Settings, tenant: str, *, principal: str = "", worker_principal: str = ""
) -> TenantSetup:
    """Create the tenant's topics (idempotent) and its ACLs, with the admin credentials of
    `settings` (a super user, or a principal allowed to create topics and ACLs)."""
    check_tenant_name(tenant)
    principal = principal or f"User:{tenant}"
    for p in (principal, worker_principal):
        if p and not p.startswith("User:"):
            raise SettingsError(f"principal {p[:80]!r}: expected the form User:<name>")
    topics = [settings.tenant_topic(tenant, k) for k in TOPIC_KINDS]
    acls = tenant_acls(settings, tenant, principal, worker_principal)
    admin = AIOKafkaAdminClient(
        bootstrap_servers=settings.bootstrap_servers, request_timeout_ms=10_000, **client_kwargs(settings)
    )
    await admin.start()
    try:
        created = await create_missing(admin, settings, topics)
        for acl in acls:
            request = CreateAclsRequest(
                resource_type=acl.resource_type,
                resource_name=acl.name,
                resource_pattern_type_filter=acl.pattern,
                principal=acl.principal,
                host="*",
                operation=acl.operation,
                permission_type=ALLOW,
            )
            response = await admin._send_request(request)
            for code, message in response.creation_responses:
                if code:
                    raise SettingsError(
                        f"the broker refused the ACL '{acl.describe()}' (error {code}: {message}); "
                        "is an authorizer configured, and may these credentials create ACLs?"
                    )
    finally:
        await admin.close()
    return TenantSetup(tenant, topics, created, acls)


def client_env(settings: Settings, tenant: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    """The settings a tenant's agents need (the password is theirs to fill in)."""
    return {
        "RB_BROKER": settings.broker,
        "RB_TOPIC_PREFIX": settings.topic_prefix,
        "RB_TENANT": tenant,
        "RB_SASL_MECHANISM": mechanism,
        "RB_SASL_USERNAME": tenant,
        "RB_SASL_PASSWORD_FILE": "<a file holding the tenant's password>",
    }
