from __future__ import annotations

import pytest

from streams.kafka.topics import check_partitions
from streams.settings import Settings, SettingsError

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
