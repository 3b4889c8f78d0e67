"""Is the broker there? The worker asks it each second (a metadata request naming no topic, on
a connection of its own: `streams.kafka.probe`) so that `/ready`, `rb_broker_connected` and
the log say so while it is away, instead of `/ready` answering true and the Kafka clients
writing ~60 ERROR lines a second (issue 40).

While the broker is away, the Kafka client libraries' warnings and errors (aiokafka, Faust)
are counted, not logged: the outage is one line when it starts and one, with the count, when
the broker answers again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ..kafka.probe import broker_answers

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 2.0  # a broker that does not answer the metadata request in this long is away
# The probe's client tracks no topic, so its own metadata refresh would ask for every topic of
# the cluster (held the event loop up to ~450 ms on a broker with ~1,400 topics); once a day.
PROBE_METADATA_MAX_AGE_MS = 24 * 3600 * 1000
QUIETED = ("aiokafka", "faust", "mode")  # the loggers whose warnings an outage multiplies


class QuietKafkaLogs(logging.Filter):
    """The first warning or error of an episode passes as written; the rest are counted until
    the broker answers again (`answered`). Installed on every logger under QUIETED (a
    logger's filter sees only its own records); records below WARNING pass untouched."""

    def __init__(self, prefixes: tuple[str, ...] = QUIETED) -> None:
        super().__init__()
        self.prefixes = prefixes
        self.quieted = 0
        self._open = False
        self._in_episode = 0
        self._mutex = threading.Lock()
        self._loggers: list[logging.Logger] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or record.name.startswith(__name__):
            return True
        with self._mutex:
            if not self._open:
                self._open, self._in_episode = True, 0
                return True
            self._in_episode += 1
            self.quieted += 1
        return False

    def answered(self) -> int:
        """The broker answered: the episode, if any, is over. Returns its quieted count."""
        with self._mutex:
            n, self._open, self._in_episode = self._in_episode, False, 0
        return n

    def install(self) -> None:
        """On every logger under QUIETED that exists now; called again by each probe, so the
        loggers of modules imported later (Faust's transport) get it too."""
        names = {
            n
            for n in list(logging.root.manager.loggerDict)
            if any(n == p or n.startswith(p + ".") for p in self.prefixes)
        }
        have = {lg.name for lg in self._loggers}
        for name in sorted(names | set(self.prefixes) - have):
            lg = logging.getLogger(name)
            lg.addFilter(self)
            self._loggers.append(lg)

    def remove(self) -> None:
        for lg in self._loggers:
            lg.removeFilter(self)
        self._loggers = []


COORDINATOR_LOGGER = "aiokafka.consumer.group_coordinator"
COORDINATOR_GRACE_S = 60.0  # a fresh worker's group coordinator is normally found within this


class StartupCoordinatorLog(logging.Filter):
    """aiokafka's "Group Coordinator Request failed: [Error 15] GroupCoordinatorNotAvailableError",
    logged at ERROR by every fresh worker while the broker elects the group's coordinator (it
    retries, and finds it): in the first `grace_s` after `install`, the first such record is
    one INFO line saying so and the rest are DEBUG. Past the grace they pass as written: a
    coordinator still missing then is a problem (the runbook's RbWorkerStalled)."""

    def __init__(
        self, grace_s: float = COORDINATOR_GRACE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.grace_s, self.clock = grace_s, clock
        self.since = clock()
        self.lowered = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not _coordinator_not_available(record):
            return True
        if self.clock() - self.since > self.grace_s:
            return True
        self.lowered += 1
        if self.lowered == 1:
            record.msg, record.args = (
                "waiting for the Kafka group coordinator (GroupCoordinatorNotAvailable: normal while a "
                "new worker joins; aiokafka retries)",
                None,
            )
            record.levelno, record.levelname = logging.INFO, "INFO"
        else:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True

    def install(self) -> None:
        """On aiokafka's group coordinator logger, first in line (before QuietKafkaLogs, which
        then sees a record below WARNING and lets it be)."""
        lg = logging.getLogger(COORDINATOR_LOGGER)
        lg.filters.insert(0, self)

    def remove(self) -> None:
        logging.getLogger(COORDINATOR_LOGGER).removeFilter(self)


def _coordinator_not_available(record: logging.LogRecord) -> bool:
    if not str(record.msg).startswith("Group Coordinator Request failed"):
        return False
    args = record.args if isinstance(record.args, tuple) else (record.args,)
    return any(type(a).__name__ == "GroupCoordinatorNotAvailableError" for a in args)


class BrokerWatch:
    """`probe()` once a second (a timer): `connected`, the gauge, and one line per outage."""

    def __init__(
        self,
        connect: Callable[[], Any],
        gauge: Any,
        quiet: QuietKafkaLogs | None = None,
        clock: Callable[[], float] = time.monotonic,
        timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        """`connect()`: a started-on-demand aiokafka client (made on the loop that probes)."""
        self.connect, self.gauge, self.quiet, self.clock = connect, gauge, quiet, clock
        self.timeout_s = timeout_s
        self.connected = False
        self.down_since: float | None = None
        self._client: Any = None
        self._answered_once = False
        self._inflight: asyncio.Future[bool] | None = None
        self._closed = False
        gauge.set(0)

    async def probe(self) -> bool:
        """One probe, shielded: a stop that cancels the timer mid-handshake (SASL's takes
        several round trips) does not cancel the connection's own coroutines, which aiokafka
        then reported as an unclosed connection with a traceback; `close` waits for it."""
        if self._closed:
            return self.connected
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.ensure_future(self._probe())
        return await asyncio.shield(self._inflight)

    async def _probe(self) -> bool:
        if self.quiet is not None:
            self.quiet.install()
        try:
            if self._client is None:  # bootstrapping fetches the metadata: that is the probe
                client = self.connect()
                try:
                    await asyncio.wait_for(client.bootstrap(), self.timeout_s)
                except BaseException:
                    closing = asyncio.ensure_future(client.close())
                    await asyncio.wait([closing], timeout=1.0)
                    raise
                self._client = client
            else:
                await asyncio.wait_for(broker_answers(self._client), self.timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failed(exc)
            return False
        self.answered()
        return True

    async def close(self) -> None:
        """Close the probe's connection (the worker is stopping), after a probe in flight has
        ended (bounded by its timeout); never raises."""
        self._closed = True
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            await asyncio.wait([inflight], timeout=self.timeout_s + 1.0)
            if not inflight.done():
                inflight.cancel()
                await asyncio.wait([inflight], timeout=1.0)
        if inflight is not None and inflight.done() and not inflight.cancelled():
            inflight.exception()  # retrieved: never "exception was never retrieved"
        client, self._client = self._client, None
        if client is not None:
            closing = asyncio.ensure_future(client.close())
            await asyncio.wait([closing], timeout=1.0)
            if closing.done() and not closing.cancelled():
                closing.exception()

    def failed(self, exc: BaseException) -> None:
        if self.connected or (self.down_since is None and self._answered_once):
            why = "no answer" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"[:200]
            log.error(
                "Kafka broker unreachable (%s): this worker is not ready and decides nothing until "
                "it answers; Kafka client messages are counted, not logged, meanwhile",
                why,
            )
        if self.down_since is None:
            self.down_since = self.clock()
        self.connected = False
        self.gauge.set(0)

    def answered(self) -> None:
        quieted = self.quiet.answered() if self.quiet is not None else 0
        if self.down_since is not None and self._answered_once:
            log.warning(
                "Kafka broker reachable again after %.1f s (%d Kafka client messages not logged)",
                self.clock() - self.down_since,
                quieted,
            )
        self.down_since = None
        self.connected = self._answered_once = True
        self.gauge.set(1)
