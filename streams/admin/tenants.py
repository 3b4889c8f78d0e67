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

from ..kafka.client_settings import TOPIC_KINDS, SettingsError, check_tenant_name
from ..kafka.security import client_kwargs
from ..settings import Settings
from .topics import create_missing

# Kafka's protocol numbers (org.apache.kafka.common.acl / resource).
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
READ, WRITE, CREATE, DESCRIBE, DESCRIBE_CONFIGS, IDEMPOTENT_WRITE = 3, 4, 5, 8, 10, 12
ALLOW = 3
CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name
_OPS = {
    READ: "READ",
    WRITE: "WRITE",
    CREATE: "CREATE",
    DESCRIBE: "DESCRIBE",
    DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS",
    IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE",
}
_KINDS = {TOPIC: "topic", GROUP: "group", CLUSTER: "cluster", TRANSACTIONAL_ID: "transactional-id"}


@dataclass(frozen=True)
class Acl:
    """One ALLOW rule: `principal` may `operation` on the resource, from any host."""

    principal: str
    resource_type: int
    name: str
    pattern: int
    operation: int

    def describe(self) -> str:
        kind, op = _KINDS[self.resource_type], _OPS[self.operation]
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
            *worker_acls(settings, worker_principal),
        ]
    return acls


def worker_acls(settings: Settings, principal: str) -> list[Acl]:
    """What the worker needs besides its tenants' topics (granted again with every tenant:
    creating an ACL that exists is a no-op). At start it creates and describes the shared
    topics (`ensure_topics`), then Faust creates, reads and writes its own `<app id>-` topics
    (the run table's changelog, the leader topic, the app id's claim), joins the group
    `<app id>`, and produces idempotently (with exactly_once: transactionally, ids prefixed `<app id>`)."""
    app = settings.app_id
    shared = [settings.steps_topic, settings.steering_topic, settings.deadletter_topic]
    acls = [Acl(principal, TOPIC, t, LITERAL, op) for t in shared for op in (CREATE, DESCRIBE)]
    # every tenant's outcome records go to the shared outcomes topic (the operator's to read)
    acls += [Acl(principal, TOPIC, settings.outcomes_topic, LITERAL, op) for op in (CREATE, DESCRIBE, WRITE)]
    acls += [Acl(principal, TOPIC, f"{app}-", PREFIXED, op) for op in (CREATE, DESCRIBE, READ, WRITE)]
    acls += [
        Acl(principal, TOPIC, f"{app}-", PREFIXED, DESCRIBE_CONFIGS),
        Acl(principal, GROUP, app, LITERAL, READ),
        Acl(principal, GROUP, app, LITERAL, DESCRIBE),
        Acl(principal, TRANSACTIONAL_ID, app, PREFIXED, WRITE),
        Acl(principal, TRANSACTIONAL_ID, app, PREFIXED, DESCRIBE),
        Acl(principal, CLUSTER, CLUSTER_NAME, LITERAL, IDEMPOTENT_WRITE),
    ]
    return acls


@dataclass(frozen=True)
class TenantSetup:
    tenant: str
    topics: list[str]
    created: list[str]
    acls: list[Acl]
    # the brokers' SASL listener the tenant's agents connect to ("kafka://host:port") and its
    # protocol, read from the broker's advertised.listeners (None: none found)
    listener: str | None = None
    listener_protocol: str | None = None
    principal: str = ""


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
        listener, listener_protocol = await sasl_listener(admin)
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
    return TenantSetup(tenant, topics, created, acls, listener, listener_protocol, principal)


async def sasl_listener(admin: AIOKafkaAdminClient) -> tuple[str | None, str | None]:
    """The listener a tenant's agents use: the first SASL_SSL (else SASL_PLAINTEXT) listener
    in a broker's `advertised.listeners` (the admin's own address is often a PLAINTEXT one the
    tenant may not reach or may not be authenticated on). (None, None) when there is none or
    the broker does not say (a principal without DescribeConfigs)."""
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.errors import KafkaError

    try:
        broker = next(iter(admin._client.cluster.brokers()))
        resp = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(broker.nodeId))])
        configs = {c[0]: c[1] for r in resp for res in r.resources for c in res[4]}
    except (KafkaError, StopIteration, IndexError, TypeError, ValueError):
        return None, None
    return pick_sasl_listener(
        str(configs.get("advertised.listeners") or configs.get("listeners") or ""),
        str(configs.get("listener.security.protocol.map") or ""),
    )


def pick_sasl_listener(advertised: str, protocol_map: str) -> tuple[str | None, str | None]:
    """("kafka://host:port", protocol) of the first SASL_SSL, else SASL_PLAINTEXT, listener."""
    protocols = dict(p.split(":", 1) for p in protocol_map.split(",") if ":" in p)
    found: dict[str, str] = {}
    for entry in advertised.split(","):
        name, sep, address = entry.strip().partition("://")
        proto = protocols.get(name, name)  # without a map, a listener's name is its protocol
        if sep and address and not address.startswith(":") and proto in ("SASL_SSL", "SASL_PLAINTEXT"):
            found.setdefault(proto, f"kafka://{address}")
    for proto in ("SASL_SSL", "SASL_PLAINTEXT"):
        if proto in found:
            return found[proto], proto
    return None, None


def client_env(
    settings: Settings,
    tenant: str,
    mechanism: str = "SCRAM-SHA-512",
    *,
    broker: str | None = None,
    protocol: str | None = None,
    principal: str = "",
) -> dict[str, str]:
    """The settings a tenant's agents need: the brokers' SASL listener (`broker`, never the
    admin's own address), their principal's name, the decision key (secrets are theirs to
    fill in)."""
    env = {
        "RB_BROKER": broker or "<the brokers' SASL listener, host:port (tenants add --tenant-broker)>",
        "RB_TOPIC_PREFIX": settings.topic_prefix,
        "RB_TENANT": tenant,
    }
    if protocol == "SASL_SSL":
        env["RB_SECURITY_PROTOCOL"] = protocol
        env["RB_SSL_CAFILE"] = "<the CA bundle (PEM) that signed the brokers' certificates>"
    env.update(
        {
            "RB_SASL_MECHANISM": mechanism,
            "RB_SASL_USERNAME": (principal or f"User:{tenant}").removeprefix("User:"),
            "RB_SASL_PASSWORD_FILE": "<a file holding the tenant's password>",
            "RB_DECISION_KEY_FILE": "<a file holding the workers' RB_DECISION_KEY>",
        }
    )
    return env
