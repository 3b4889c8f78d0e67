"""`tenants add` without a broker: the ACLs it grants and the listener it tells agents to use
(on a real broker: tests/integration/test_tenants.py, whose worker runs as that principal)."""

from __future__ import annotations

from streams.admin.tenants import (
    CLUSTER,
    GROUP,
    TOPIC,
    client_env,
    pick_sasl_listener,
    tenant_acls,
)
from streams.settings import Settings

S = Settings.from_env({}, topic_prefix="mt", app_id="mt-worker")


def test_the_worker_principal_gets_its_group_its_own_topics_and_the_shared_ones() -> None:
    got = {a.describe() for a in tenant_acls(S, "acme", "User:acme", "User:w")}
    for want in (
        "User:w READ topic mt.acme.steps (literal)",
        "User:w WRITE topic mt.acme.steering (literal)",
        "User:w READ group mt-worker (literal)",
        "User:w CREATE topic mt-worker- (prefixed)",
        "User:w WRITE topic mt-worker- (prefixed)",
        "User:w READ topic mt-worker- (prefixed)",
        "User:w DESCRIBE topic mt.steering (literal)",
        "User:w IDEMPOTENT_WRITE cluster kafka-cluster (literal)",
    ):
        assert want in got
    # the tenant itself: its own topics only, and never WRITE on a steering topic
    tenant = [a for a in tenant_acls(S, "acme", "User:acme", "User:w") if a.principal == "User:acme"]
    assert {a.resource_type for a in tenant} == {TOPIC, GROUP}
    assert not any(a.name.endswith(".steering") and a.describe().split()[1] == "WRITE" for a in tenant)
    assert all(a.resource_type != CLUSTER for a in tenant)
    assert not [a for a in tenant_acls(S, "acme", "User:acme") if a.principal == "User:w"]


def test_the_tenants_listener_is_the_sasl_one_ssl_first() -> None:
    plain = "PLAINTEXT://10.0.0.1:9092,SASL_PLAINTEXT://kafka.example:9094"
    assert pick_sasl_listener(plain, "") == ("kafka://kafka.example:9094", "SASL_PLAINTEXT")
    named = "INTERNAL://10.0.0.1:9092,EXTERNAL://kafka.example:9095,OTHER://k:9096"
    mapping = "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT,OTHER:SASL_SSL,CONTROLLER:PLAINTEXT"
    assert pick_sasl_listener(named, mapping) == ("kafka://k:9096", "SASL_SSL")
    assert pick_sasl_listener("PLAINTEXT://127.0.0.1:9092", "") == (None, None)
    assert pick_sasl_listener("SASL_PLAINTEXT://:9094", "") == (None, None)  # no host to give


def test_the_agents_settings_name_the_listener_never_the_admins_address() -> None:
    admin = S.with_(broker="kafka://127.0.0.1:9092")
    env = client_env(
        admin, "acme", broker="kafka://kafka.example:9096", protocol="SASL_SSL", principal="User:ac"
    )
    assert env["RB_BROKER"] == "kafka://kafka.example:9096" and env["RB_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert env["RB_SASL_USERNAME"] == "ac" and "RB_DECISION_KEY_FILE" in env and "RB_SSL_CAFILE" in env
    unknown = client_env(admin, "acme")
    assert "127.0.0.1:9092" not in unknown["RB_BROKER"] and "--tenant-broker" in unknown["RB_BROKER"]
