"""Is the broker there? One metadata request that names no topic: the broker answers with its
brokers and controller only.

aiokafka's `fetch_all_metadata` asks for every topic of the cluster, and decoding the answer
runs on the event loop. On a broker with 1,382 topics (4,789 partitions) that held the loop
for 40-185 ms of CPU (up to ~450 ms of wall time on a busy machine) at every probe, once a
second in the worker: under one tenant's flood, about half of another tenant's waits over
60 ms overlapped it (bench/tenant_fairness.py, BENCHMARKS.md section 10). The answer here is a few
hundred bytes whatever the cluster holds.
"""

from __future__ import annotations

from typing import Any

from aiokafka.errors import KafkaConnectionError
from aiokafka.protocol.metadata import MetadataRequest


def no_topics_request() -> MetadataRequest:
    """A metadata request for no topic (from version 1 on, an empty list means none; aiokafka
    bootstraps with the same request)."""
    return MetadataRequest([], allow_auto_topic_creation=False)


async def broker_answers(client: Any) -> None:
    """Ask one known broker of `client` (a bootstrapped aiokafka `AIOKafkaClient`) for
    metadata naming no topic; raises when no broker is known or it does not answer."""
    node = client.get_random_node()
    if node is None:
        raise KafkaConnectionError("no broker known")
    await client.send(node, no_topics_request())


UNKNOWN_TOPIC = 3  # UNKNOWN_TOPIC_OR_PARTITION
TOPIC_AUTHORIZATION_FAILED = 29


class MissingTopic(RuntimeError):
    """The broker answered, and has no such topic (or will not say it has: no ACL to see it)."""


async def topic_partitions(client: Any, topic: str) -> int:
    """How many partitions `topic` has, from one metadata request naming it (never creating
    it). Raises MissingTopic when the broker says it does not exist or may not be seen, and
    KafkaConnectionError when no broker is known. aiokafka's own wait for a topic's metadata
    (`partitions_for`) retries for its whole timeout and logs "Topic ... not found in cluster
    metadata", which an agent read as the broker being away (issue 48)."""
    node = client.get_random_node()
    if node is None:
        raise KafkaConnectionError("no broker known")
    response = await client.send(node, MetadataRequest([topic], allow_auto_topic_creation=False))
    for entry in response.topics:  # (error_code, topic, [is_internal,] partitions)
        if entry[1] != topic:
            continue
        if entry[0] == TOPIC_AUTHORIZATION_FAILED:
            raise MissingTopic(f"not authorized to see topic {topic}")
        if entry[0] == UNKNOWN_TOPIC or not entry[-1]:
            raise MissingTopic(f"no topic {topic}")
        return len(entry[-1])
    raise MissingTopic(f"no topic {topic}")
