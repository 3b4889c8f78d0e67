from __future__ import annotations

import pytest

from streams.admin.topics import check_partitions
from streams.kafka.client_settings import SettingsError
from streams.settings import Settings

S = Settings(partitions=8)


def test_topics_with_the_configured_partition_count_pass():
    check_partitions(S, {S.steps_topic: 8, S.steering_topic: 8, S.deadletter_topic: 8})


def test_existing_topics_with_another_count_fail_naming_the_setting_and_the_fix():
    with pytest.raises(
        SettingsError, match=r"RB_PARTITIONS=8 but topic rb\.steps already has 12 .*RB_PARTITIONS=12"
    ):
        check_partitions(S, {S.steps_topic: 12, S.steering_topic: 12})


def test_steps_and_steering_must_match():
    with pytest.raises(SettingsError, match="must match"):
        check_partitions(S, {S.steps_topic: 8, S.steering_topic: 4})


def test_the_outcomes_topic_is_created_compacted_and_the_others_are_not():
    import asyncio
    from typing import Any

    from streams.admin.topics import create_missing

    class Admin:
        def __init__(self) -> None:
            self.created: list[Any] = []

        async def list_topics(self) -> list[str]:
            return [S.steps_topic]

        async def create_topics(self, topics: list[Any]) -> None:
            self.created += topics

    admin = Admin()
    names = [S.steps_topic, S.steering_topic, S.outcomes_topic]
    assert asyncio.run(create_missing(admin, S, names)) == [S.steering_topic, S.outcomes_topic]  # type: ignore[arg-type]
    configs = {t.name: t.topic_configs for t in admin.created}
    assert S.outcomes_topic == "rb.outcomes"
    assert configs == {S.steering_topic: {}, S.outcomes_topic: {"cleanup.policy": "compact"}}
    assert all(t.num_partitions == 8 for t in admin.created)
