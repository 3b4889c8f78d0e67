"""Who owns an app id (streams.admin.ownership), against an in-memory stand-in for the admin
client's four calls; the real broker's side is tests/integration/test_isolation.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import TopicAlreadyExistsError

from streams.admin.ownership import claim_app_id, claimed_by, foreign_steps
from streams.kafka.client_settings import SettingsError
from streams.settings import Settings, owner_topic


class Admin:
    """The topics and committed offsets of a broker; `listing_lags` hides claims made after
    the first listing (a second prefix that claims the same id at the same moment)."""

    def __init__(self, topics: set[str] | None = None, committed: dict[str, set[str]] | None = None) -> None:
        self.topics = set(topics or ())
        self.committed = committed or {}
        self.racing: list[str] = []  # topics another worker creates right after our first listing

    async def list_topics(self) -> list[str]:
        seen = sorted(self.topics)
        self.topics |= set(self.racing)
        self.racing = []
        return seen

    async def list_consumer_group_offsets(self, group: str) -> dict[TopicPartition, Any]:
        return {TopicPartition(t, 0): object() for t in self.committed.get(group, ())}

    async def create_topics(self, new: list[Any]) -> None:
        names = {t.name for t in new}
        if names & self.topics:
            raise TopicAlreadyExistsError
        self.topics |= names

    async def delete_topics(self, names: list[str]) -> None:
        self.topics -= set(names)


def claim(admin: Admin, prefix: str, app_id: str = "") -> None:
    asyncio.run(claim_app_id(admin, Settings.from_env({}, topic_prefix=prefix, app_id=app_id)))  # type: ignore[arg-type]


def test_the_first_worker_of_a_prefix_claims_its_app_id_and_the_claim_stands_on_restart():
    admin = Admin({"rb.steps"})
    claim(admin, "rb")
    assert owner_topic("rb-streams", "rb") in admin.topics
    claim(admin, "rb")  # a restart, or a second replica
    assert claimed_by("rb-streams", admin.topics) == ["rb"]


def test_another_prefix_on_a_claimed_app_id_is_refused_with_one_line_saying_what_to_do():
    admin = Admin({owner_topic("rb-streams", "rb")})
    with pytest.raises(SettingsError) as err:
        claim(admin, "other2", app_id="rb-streams")
    line = str(err.value)
    assert "\n" not in line and "RB_TOPIC_PREFIX='rb'" in line and "RB_TOPIC_PREFIX='other2'" in line
    assert "unset RB_APP_ID (this prefix's default is other2-streams)" in line
    assert claimed_by("rb-streams", admin.topics) == ["rb"]  # nothing claimed by the refused one


def test_an_app_id_used_by_another_prefix_before_claims_existed_is_refused_and_not_claimed():
    admin = Admin({"rb.steps", "rb-streams-runs-changelog"}, {"rb-streams": {"rb.steps"}})
    with pytest.raises(SettingsError, match=r"committed offsets on rb\.steps"):
        claim(admin, "other2", app_id="rb-streams")
    assert claimed_by("rb-streams", admin.topics) == []
    claim(admin, "rb")  # the deployment that used it claims it on its next start
    assert claimed_by("rb-streams", admin.topics) == ["rb"]


def test_a_prefixs_own_tenant_topics_and_the_apps_own_topics_are_not_another_deployments_use():
    s = Settings.from_env({}, topic_prefix="rb")
    own = {"rb.steps", "rb.acme.steps", "rb.gone-tenant.steps", "rb-streams-__assignor-__leader"}
    assert foreign_steps(s, own) == []
    assert foreign_steps(s, own | {"late1.steps", "rbx.steps"}) == ["late1.steps", "rbx.steps"]


@pytest.mark.parametrize("first", ["aaa", "zzz"])
def test_two_prefixes_claiming_one_id_at_once_agree_the_lexically_first_keeps_it(first):
    other = "zzz" if first == "aaa" else "aaa"
    admin = Admin()
    admin.racing = [owner_topic("shared", other)]  # the other's claim lands during ours
    if first < other:
        claim(admin, first, app_id="shared")
    else:
        with pytest.raises(SettingsError, match=f"RB_TOPIC_PREFIX='{other}'"):
            claim(admin, first, app_id="shared")
    with pytest.raises(SettingsError, match="RB_TOPIC_PREFIX='aaa'"):  # the loser's own check
        claim(admin, "zzz", app_id="shared")
    assert claimed_by("shared", admin.topics) == ["aaa"]  # the loser took its claim back
    claim(admin, "aaa", app_id="shared")  # the winner's next start


def test_claims_are_read_by_exact_app_id():
    topics = {owner_topic("rb-streams", "rb"), owner_topic("rb-streams-2", "x"), "rb-streams-owner-"}
    assert claimed_by("rb-streams", topics) == ["rb"]
    assert claimed_by("rb-streams-2", topics) == ["x"]
