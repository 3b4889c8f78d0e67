"""Which deployment an app id belongs to, claimed and checked through the broker.

The app id is Faust's consumer group and the prefix of the run table's changelog: two
deployments (topic prefixes) on one app id would read each other's runs and split each
other's partitions. The default app id derives from the prefix (`<prefix>-streams`), so only
an explicit RB_APP_ID can collide; this check makes that collision a refusal, not a leak.

The claim is a topic, `<app id>-owner-<prefix>`, that holds no records: its name is the claim.
Creating a topic is atomic on the broker and a topic stays until someone deletes it, so the
claim survives restarts, data-dir loss and every worker of the deployment at once. At start a
worker lists the claims of its app id:

* its own prefix's claim only: it owns the id;
* another prefix's claim: it refuses to start, with one line naming that prefix;
* none: an app id from before claims existed may still be in use, so the group's committed
  offsets are read first; offsets on another prefix's steps topic are that prefix's use (a
  refusal), otherwise the worker creates its claim and lists again. Two prefixes that claim
  one id at the same moment both see both claims: the lexically first prefix keeps the id, the
  other deletes its own claim and refuses.

The topics are inside the `<app id>-` namespace the worker's ACLs already grant (Faust's own
topics live there), so a secured cluster needs no new grant.
"""

from __future__ import annotations

import contextlib
import logging

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from ..kafka.client_settings import SettingsError
from ..settings import Settings, default_app_id, owner_topic

log = logging.getLogger(__name__)


def claimed_by(app_id: str, topics: list[str] | set[str]) -> list[str]:
    """The prefixes whose claim on `app_id` is among `topics`, sorted."""
    head = owner_topic(app_id, "")
    return sorted(t[len(head) :] for t in topics if t.startswith(head) and len(t) > len(head))


def foreign_steps(settings: Settings, committed: list[str] | set[str]) -> list[str]:
    """The steps topics of other prefixes among the topics the group has committed offsets
    on: another deployment's use of the app id. This prefix's own (`<prefix>.steps`, a
    tenant's `<prefix>.<tenant>.steps`, a tenant served before) and the app's own
    `<app id>-` topics are not."""
    own = settings.topic_prefix + "."
    return sorted(
        t
        for t in set(committed)
        if t.endswith(".steps") and not t.startswith(own) and not t.startswith(settings.app_id + "-")
    )


def refusal(settings: Settings, owner: str, how: str) -> SettingsError:
    """The one line a worker stops with when its app id is another deployment's."""
    own = default_app_id(settings.topic_prefix)
    fix = (
        f"unset RB_APP_ID (this prefix's default is {own})"
        if settings.app_id != own
        else "give this deployment an RB_APP_ID of its own"
    )
    return SettingsError(
        f"RB_APP_ID: {settings.app_id!r} belongs to the deployment with RB_TOPIC_PREFIX={owner!r} "
        f"({how}), not to this one (RB_TOPIC_PREFIX={settings.topic_prefix!r}): sharing it would "
        f"share its consumer group and run table; {fix}"
    )


async def claim_app_id(admin: AIOKafkaAdminClient, settings: Settings) -> None:
    """Claim the app id for this prefix, or raise `refusal` (docstring of the module)."""
    app, mine = settings.app_id, settings.topic_prefix
    owners = claimed_by(app, await admin.list_topics())
    if not owners:
        try:
            committed = await admin.list_consumer_group_offsets(app)
        except KafkaError:  # no group yet, or no DESCRIBE on it: no use to find
            committed = {}
        foreign = foreign_steps(settings, {tp.topic for tp in committed})
        if foreign:
            owner = foreign[0].removesuffix(".steps")
            raise refusal(settings, owner, f"its group has committed offsets on {foreign[0]}")
        with contextlib.suppress(TopicAlreadyExistsError):
            await admin.create_topics([NewTopic(owner_topic(app, mine), 1, settings.replication_factor)])
        log.info("claimed app id %s for topic prefix %s (topic %s)", app, mine, owner_topic(app, mine))
        owners = claimed_by(app, await admin.list_topics())
        if not owners:  # the listing lags the creation on some clusters: the claim stands
            owners = [mine]
    others = [p for p in owners if p != mine]
    if not others:
        return
    if mine in owners and mine < others[0]:
        return  # a claim at the same moment as another prefix's: the lexically first keeps it
    if mine in owners:  # we lost that race: take our claim back
        with contextlib.suppress(KafkaError):
            await admin.delete_topics([owner_topic(app, mine)])
    raise refusal(settings, others[0], f"claimed by the topic {owner_topic(app, others[0])}")
