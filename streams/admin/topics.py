"""Create the pipeline's topics up front so producers never race the worker's start-up."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, TopicAlreadyExistsError

from ..kafka.client_settings import TOPIC_KINDS, SettingsError
from ..kafka.security import client_kwargs, diagnose
from ..settings import Settings
from .ownership import claim_app_id

log = logging.getLogger(__name__)


async def ensure_topics(
    settings: Settings, timeout_s: float = 30.0, *, claim: bool = False
) -> dict[str, int]:
    """Create steps/steering/deadletter/outcomes if missing (and every served tenant's three,
    in multi-tenant mode); return each topic's partition count. With `claim` (a worker's start),
    first claim the app id for the topic prefix, or refuse it (streams.admin.ownership)."""
    names = [
        settings.steps_topic,
        settings.steering_topic,
        settings.deadletter_topic,
        settings.outcomes_topic,
    ]
    for tenant in settings.tenant_names:
        names += [settings.tenant_topic(tenant, k) for k in TOPIC_KINDS]
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=settings.bootstrap_servers, request_timeout_ms=10_000, **client_kwargs(settings)
        )
        try:
            await admin.start()
            break
        except KafkaConnectionError:
            await admin.close()
            await diagnose(settings)  # wrong credentials: fail now, with the reason
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.5)
    try:
        if claim:
            await claim_app_id(admin, settings)
        created = await create_missing(admin, settings, names)
        if created:
            log.info("created topics %s", created)
        counts: dict[str, int] = {}
        for _ in range(50):
            meta = await admin.describe_topics(names)
            counts = {t["topic"]: len(t["partitions"]) for t in meta if not t.get("error_code")}
            if len(counts) == len(names) and all(counts.values()):
                break
            await asyncio.sleep(0.1)
        check_partitions(settings, counts)
        return counts
    finally:
        await admin.close()


# Topics keyed by run_id whose last record per run is all that matters: compacted, so the
# outcomes topic keeps one record per run however long it runs (and a re-send replaces its copy).
COMPACTED = {"cleanup.policy": "compact"}


async def create_missing(admin: AIOKafkaAdminClient, settings: Settings, names: list[str]) -> list[str]:
    """Create those of `names` that do not exist (RB_PARTITIONS, RB_REPLICATION_FACTOR; the
    outcomes topic compacted); the names created. Another creator winning the race is fine."""
    existing = set(await admin.list_topics())
    new = [
        NewTopic(
            n,
            settings.partitions,
            settings.replication_factor,
            topic_configs=COMPACTED if n == settings.outcomes_topic else None,
        )
        for n in names
        if n not in existing
    ]
    if new:
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics(new)
    return [t.name for t in new]


def check_partitions(settings: Settings, counts: dict[str, int]) -> None:
    """The partition count is fixed once the topics exist: a run's partition (hence its
    state's home) is its key's hash modulo the count, and the table and its changelog are
    laid out by it. Starting with a different RB_PARTITIONS would split the group's view."""
    steps = counts.get(settings.steps_topic)
    if steps is not None and steps != settings.partitions:
        raise SettingsError(
            f"RB_PARTITIONS={settings.partitions} but topic {settings.steps_topic} already has "
            f"{steps} partitions; the count is fixed once the topics exist: set RB_PARTITIONS={steps} "
            f"(or use a new RB_TOPIC_PREFIX and RB_APP_ID)"
        )
    for tenant in settings.tenant_names:
        for kind in TOPIC_KINDS:
            name = settings.tenant_topic(tenant, kind)
            n = counts.get(name)
            if n is not None and n != settings.partitions:
                raise SettingsError(
                    f"topic {name} has {n} partitions but RB_PARTITIONS={settings.partitions}: a "
                    "tenant's topics must have the same count as the worker's (re-create them)"
                )
    steering = counts.get(settings.steering_topic)
    if steering is not None and steering != steps:
        raise SettingsError(
            f"topic {settings.steps_topic} has {steps} partitions but {settings.steering_topic} has "
            f"{steering}: they must match (RB_PARTITIONS)"
        )
