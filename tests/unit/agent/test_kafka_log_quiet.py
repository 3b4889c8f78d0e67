"""aiokafka's log during a broker outage: its first message as written, the rest counted
(issue 31: an 8 s outage wrote 643 lines); the outage itself is the client's one health line
when it starts and one, with this count, when it ends (issue 40). With a real broker stopped
and started: tests/integration/test_client_outage.py, test_client_fail_open.py."""

from __future__ import annotations

import logging

import pytest

from streams.agent.client import KafkaLogQuiet

CONN = "aiokafka.conn"


def test_an_outage_is_its_first_message_and_the_rest_is_counted_until_the_broker_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import aiokafka  # noqa: F401  (its loggers exist once imported)

    quiet = KafkaLogQuiet()
    quiet.acquire()
    try:
        with caplog.at_level(logging.DEBUG):
            for i in range(50):
                logging.getLogger(CONN).error("Unable connect to node with id 1: attempt %d", i)
                logging.getLogger("aiokafka.producer.sender").warning("Got error produce response")
            logging.getLogger(CONN).debug("a debug line someone asked for")
            counted = quiet.answered()
            again = quiet.answered()  # no outage open: nothing more
    finally:
        quiet.release()
    kafka = [r for r in caplog.records if r.name.startswith("aiokafka")]
    ours = [r.getMessage() for r in caplog.records if r.name == "streams.agent.client"]
    assert [(r.levelno, r.getMessage()) for r in kafka] == [
        (logging.ERROR, "Unable connect to node with id 1: attempt 0"),  # the first, as it was
        (logging.DEBUG, "a debug line someone asked for"),
    ]
    assert ours == []  # the client's health lines speak for the outage (with `counted`)
    assert (counted, again) == (99, 0)
    assert quiet.quieted == 99 and quiet.outages == 1


def test_a_lone_warning_is_only_itself(caplog: pytest.LogCaptureFixture) -> None:
    import aiokafka  # noqa: F401

    quiet = KafkaLogQuiet()
    quiet.acquire()
    try:
        with caplog.at_level(logging.WARNING):
            logging.getLogger(CONN).warning("NotLeaderForPartitionError")
            quiet.answered()
            logging.getLogger(CONN).warning("NotLeaderForPartitionError again, later")
    finally:
        quiet.release()
    assert [r.name for r in caplog.records] == [CONN, CONN] and quiet.quieted == quiet.outages == 0


def test_the_filter_is_removed_when_the_last_client_stops(caplog: pytest.LogCaptureFixture) -> None:
    import aiokafka  # noqa: F401

    quiet = KafkaLogQuiet()
    quiet.acquire()
    quiet.acquire()
    quiet.release()
    assert quiet in logging.getLogger(CONN).filters  # one client still runs
    quiet.release()
    assert quiet not in logging.getLogger(CONN).filters
    with caplog.at_level(logging.WARNING):
        logging.getLogger(CONN).error("Unable connect to node with id 1")
    assert [r.name for r in caplog.records] == [CONN] and quiet.quieted == 0
