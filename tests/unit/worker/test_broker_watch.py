"""The worker's broker watch: /ready and rb_broker_connected follow the broker, an outage is
one log line when it starts and one when it ends, and the Kafka clients' flood of warnings
(~60 ERROR lines a second, issue 40) is counted instead of logged. The outage through a real
broker: tests/integration/test_client_fail_open.py."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from aiokafka import AIOKafkaClient
from prometheus_client import CollectorRegistry, Gauge

from streams.worker.broker_watch import COORDINATOR_LOGGER, BrokerWatch, QuietKafkaLogs, StartupCoordinatorLog


def gauge() -> Gauge:
    return Gauge("rb_broker_connected", "test", registry=CollectorRegistry())


def test_an_outage_is_one_line_when_it_starts_one_when_it_ends_and_the_kafka_flood_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import aiokafka  # noqa: F401  (its loggers exist once imported)

    quiet = QuietKafkaLogs()
    logging.getLogger("faust.transport.drivers.aiokafka")  # imported after the filter: a probe adds it
    quiet.install()
    g = gauge()
    now = [100.0]
    watch = BrokerWatch(lambda: None, g, quiet, clock=lambda: now[0])
    try:
        with caplog.at_level(logging.WARNING):
            watch.answered()
            quiet.install()  # (what each probe does)
            assert watch.connected and g._value.get() == 1
            for i in range(120):  # two seconds of a dead broker, as aiokafka and Faust log it
                logging.getLogger("aiokafka.conn").error("Unable connect to node with id 1: %d", i)
                logging.getLogger("faust.transport.drivers.aiokafka").error("Fetch failed %d", i)
                if i % 20 == 0:
                    watch.failed(ConnectionRefusedError("refused"))
                now[0] += 0.1
            assert not watch.connected and g._value.get() == 0
            watch.answered()
    finally:
        quiet.remove()
    lines = [r.getMessage() for r in caplog.records]
    ours = [m for m in lines if m.startswith("Kafka broker")]
    assert len(ours) == 2, ours
    assert ours[0].startswith("Kafka broker unreachable (ConnectionRefusedError: refused)")
    assert ours[1] == "Kafka broker reachable again after 12.0 s (239 Kafka client messages not logged)"
    assert [m for m in lines if not m.startswith("Kafka broker")] == ["Unable connect to node with id 1: 0"]
    assert quiet.quieted == 239


def test_a_worker_that_never_reached_its_broker_is_not_connected_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: refused
    g = gauge()

    async def main() -> list[bool]:
        watch = BrokerWatch(lambda: AIOKafkaClient(bootstrap_servers=f"127.0.0.1:{port}"), g, timeout_s=1.0)
        return [await watch.probe() for _ in range(3)]

    with caplog.at_level(logging.ERROR, logger="streams.worker.broker_watch"):
        assert asyncio.run(main()) == [False, False, False]
    assert g._value.get() == 0
    # never connected: the worker's start says so elsewhere; no outage line repeated per probe
    assert [r for r in caplog.records if r.name == "streams.worker.broker_watch"] == []


def test_ready_names_what_is_missing_and_answers_503() -> None:
    from streams.worker.views import ready_answer

    class View:
        def json(self, body: dict[str, object], status: int) -> tuple[int, dict[str, object]]:
            return status, body

    assert ready_answer(View(), False, {}, {}, ["broker", "partitions"]) == (
        503,
        {"ready": False, "missing": ["broker", "partitions"]},
    )
    assert ready_answer(View(), True, {}, {}, []) == (200, {"ready": True})


def test_the_probe_asks_for_no_topics_metadata_so_its_cost_does_not_grow_with_the_cluster() -> None:
    """fetch_all_metadata asked for every topic: on a broker with ~1,400 topics, decoding the
    answer held the worker's event loop 40-185 ms of CPU each second (BENCHMARKS.md §10)."""
    from aiokafka.protocol.metadata import MetadataRequest_v1, MetadataRequest_v5

    sent: list[tuple[int, object]] = []

    class Client:
        async def bootstrap(self) -> None:
            pass

        def get_random_node(self) -> int | None:
            return 1

        async def send(self, node: int, request: object) -> None:
            sent.append((node, request))

        async def fetch_all_metadata(self) -> None:
            raise AssertionError("every topic's metadata asked for")

    g = gauge()

    async def main() -> list[bool]:
        watch = BrokerWatch(Client, g, timeout_s=1.0)
        return [await watch.probe() for _ in range(3)]

    assert asyncio.run(main()) == [True, True, True]
    assert g._value.get() == 1
    assert [node for node, _ in sent] == [1, 1]  # the first probe is the bootstrap
    for _, request in sent:
        for version in (MetadataRequest_v1, MetadataRequest_v5):
            assert request.build(version).topics == []  # type: ignore[attr-defined]


class SlowHandshake:
    """A client whose bootstrap takes a while (a SASL handshake's round trips)."""

    def __init__(self) -> None:
        self.bootstrapped = self.closed = self.cancelled = False

    async def bootstrap(self) -> None:
        try:
            await asyncio.sleep(0.3)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.bootstrapped = True

    async def close(self) -> None:
        self.closed = True


def test_a_stop_mid_handshake_lets_the_probe_finish_then_closes_its_client() -> None:
    """The timer cancelled while its probe is in the handshake (a worker stopping): the
    handshake is not cut (aiokafka reported a cut one as an unclosed connection with a
    traceback), `close` waits for it and then closes the client; no probe starts after."""
    client = SlowHandshake()
    made: list[SlowHandshake] = []

    def connect() -> SlowHandshake:
        made.append(client)
        return client

    async def main() -> None:
        watch = BrokerWatch(connect, gauge(), timeout_s=2.0)
        timer = asyncio.ensure_future(watch.probe())
        await asyncio.sleep(0.05)
        timer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await timer
        assert not client.cancelled and not client.bootstrapped  # still shaking hands
        await watch.close()
        assert client.bootstrapped and client.closed and not client.cancelled
        assert await watch.probe() is True  # closed: the last answer, no new connection
        assert len(made) == 1

    asyncio.run(main())


def test_a_fresh_workers_group_coordinator_error_is_one_info_line_at_start_and_an_error_after_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from aiokafka.errors import GroupCoordinatorNotAvailableError

    now = [0.0]
    lowered = StartupCoordinatorLog(grace_s=60.0, clock=lambda: now[0])
    quiet = QuietKafkaLogs()
    lowered.install()
    quiet.install()
    lg = logging.getLogger(COORDINATOR_LOGGER)
    try:
        with caplog.at_level(logging.INFO, logger="aiokafka"):
            for _ in range(5):  # aiokafka retries every 100 ms at start
                lg.error("Group Coordinator Request failed: %s", GroupCoordinatorNotAvailableError())
            lg.error("Heartbeat failed: %r", "other")  # another error passes as written
            quiet.answered()  # the broker answers: that error's episode is over
            now[0] = 61.0  # past the grace a missing coordinator is a problem, and says so
            lg.error("Group Coordinator Request failed: %s", GroupCoordinatorNotAvailableError())
    finally:
        lowered.remove()
        quiet.remove()
    got = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == COORDINATOR_LOGGER]
    assert got[0][0] == "INFO" and got[0][1].startswith("waiting for the Kafka group coordinator")
    assert got[1] == ("ERROR", "Heartbeat failed: 'other'")
    assert got[2][0] == "ERROR" and "GroupCoordinatorNotAvailableError" in got[2][1]
    assert len(got) == 3 and lowered.lowered == 5  # the 4 later ones at start were DEBUG
