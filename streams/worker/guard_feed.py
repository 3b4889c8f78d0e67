"""The guard in the worker: every worker reads the whole outcomes topic and keeps one guard.

Outcome records (`<prefix>.outcomes`) come from every worker's partitions, and a run on this
worker must be masked by what the whole fleet's records say, so the guard's consumer is not in
the steps consumer group: it is assigned every partition, reads from the beginning (the topic
is compacted: one record per run) and follows. A worker that restarts reads it again and
switches again at the same record. Records are fed in the order this consumer hands them
over (per partition in offset order); `rb-streams replay --guard` feeds its own in file order.

On a switch: one log line saying why, and rb_guard_observe_only / rb_guard_switches_total.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import orjson

from ..admin.deadletter_topic import partitions_of as partitions
from ..core.guard import Guard, Switch
from ..shared.logsafe import safe_for_log

log = logging.getLogger("streams.guard")

RETRY_S = 5.0


class GuardFeed:
    """Owns the guard and feeds it (`feed_value`, one record's bytes); `run` is the consumer."""

    def __init__(self, guard: Guard, switched: Callable[[Switch], None] | None = None) -> None:
        self.guard = guard
        self._switched = switched
        self.not_json = 0

    def observe_only(self, org: str, experiment: str | None) -> frozenset[str]:
        return self.guard.observe_only(org, experiment)

    def feed_value(self, value: bytes | None) -> list[Switch]:
        """One record of the topic (None: a tombstone, ignored)."""
        if value is None:
            return []
        try:
            rec = orjson.loads(value)
        except orjson.JSONDecodeError:
            rec = None
        if not isinstance(rec, dict):
            self.not_json += 1
            return []
        made = self.guard.feed(rec)
        for sw in made:
            log.warning("%s", safe_for_log(sw.why, 1000))  # names are cut at 128: bounded
            if self._switched is not None:
                self._switched(sw)
        return made

    async def run(self, consumer_factory: Callable[[], Any], topic: str) -> None:
        """Read `topic` from its start and follow it, until cancelled. A missing topic or a
        broker error is retried every RETRY_S (logged once per cause), never a crash."""
        said: set[str] = set()
        offsets: dict[int, int] = {}  # next offset per partition: a retry resumes, never refeeds
        while True:
            c = consumer_factory()
            try:
                await c.start()
                tps = await partitions(c, topic)  # TopicMissing until a worker created it
                c.assign(tps)
                begins = await c.beginning_offsets(tps)
                for tp in tps:
                    c.seek(tp, max(begins[tp], offsets.get(tp.partition, 0)))
                while True:
                    for tp, recs in (await c.getmany(timeout_ms=1000, max_records=500)).items():
                        for r in recs:
                            self.feed_value(r.value)
                            offsets[tp.partition] = r.offset + 1
                        await asyncio.sleep(0)  # a backlog read at start never holds the loop long
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                why = f"{type(exc).__name__}: {exc}"
                if why not in said:
                    said.add(why)
                    log.warning("guard: cannot read %s (%s); retrying every %.0fs", topic, why[:300], RETRY_S)
                await asyncio.sleep(RETRY_S)
            finally:
                with contextlib.suppress(Exception):
                    await c.stop()
