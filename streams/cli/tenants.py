"""`rb-streams tenants add`: a tenant's topics, ACLs and quotas, and its agents' settings."""

from __future__ import annotations

import argparse
import asyncio

from .common import UserError, _settings


def cmd_tenants_add(args: argparse.Namespace) -> int:
    """A tenant's topics and ACLs (multi-tenant mode), then the settings its agents need."""
    from aiokafka.errors import KafkaError

    from ..admin.quotas import Quotas, set_quotas
    from ..admin.tenants import add_tenant, client_env

    s = _settings(args)
    try:
        done = asyncio.run(
            add_tenant(s, args.name, principal=args.principal, worker_principal=args.worker_principal)
        )
    except KafkaError as exc:
        raise UserError(
            f"could not set up tenant {args.name!r} on {s.broker}: {type(exc).__name__}: {exc}"
        ) from None
    print(
        f"tenant {done.tenant}: topics {', '.join(done.topics)} (created: {', '.join(done.created) or 'none'})"
    )
    for acl in done.acls:
        print(f"  allow {acl.describe()}")
    principal = args.principal or f"User:{done.tenant}"
    quotas = Quotas(args.producer_byte_rate or None, args.request_percentage)
    try:
        asyncio.run(set_quotas(s, principal, quotas))
    except KafkaError as exc:
        raise UserError(
            f"could not set the quotas of {principal} on {s.broker}: {type(exc).__name__}: {exc}"
        ) from None
    print(f"  quota: {principal} may {quotas.describe()}")
    print("its agents' settings:")
    broker = args.tenant_broker or done.listener
    protocol = None if args.tenant_broker else done.listener_protocol
    env = client_env(s, done.tenant, broker=broker, protocol=protocol, principal=done.principal)
    for k, v in env.items():
        print(f"  {k}={v}")
    if not broker:
        print(
            f"  (no SASL listener found on {s.broker}: give the tenants' address with --tenant-broker)",
        )
    served = [*s.tenant_names, done.tenant] if done.tenant not in s.tenant_names else list(s.tenant_names)
    print(f"the workers serve it with RB_TENANTS={','.join(served)} (restart them to pick it up)")
    return 0
