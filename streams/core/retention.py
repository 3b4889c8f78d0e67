"""When a run's state may leave the table, and the control record that removes it.

Finished runs stay for a retention period (late duplicates are still recognised and
/runs/{id} still answers); unfinished runs that go quiet are dropped after an idle timeout.
The clock is the worker time of the last event applied (`TraceState.updated_ts`), never the
agent's `ts`, so a skewed agent clock cannot evict a live run.

Faust only writes a table (and its changelog) from inside a stream event, so the worker asks
for an eviction by publishing an `rb.evict` record to the steps topic under the run's key: it
arrives in order with the run's own events, and the run is removed only if nothing happened
to it since the request (its `version` still matches: every event applied to a run changes
last_step, finished or duplicates). The removal is a changelog tombstone, so a worker
recovering the table does not bring the run back. `replay` of a recorded steps topic applies
the same records by version alone, so it evicts exactly what the worker evicted.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from .state import TraceState

EVICT_TYPE = "rb.evict"
_PREFIX = b'{"type":"rb.evict"'


@dataclass(frozen=True)
class EvictRequest:
    run_id: str
    version: tuple[int, bool, int]


def version(st: TraceState) -> tuple[int, bool, int]:
    """Changes with every event applied to the run."""
    return (st.last_step, st.finished, st.duplicates)


def retention_clock(st: TraceState) -> float | None:
    return st.updated_ts if st.updated_ts is not None else st.last_event_ts


def expiry(
    finished: bool, seen_ts: float | None, now: float, finished_retention_s: float, idle_timeout_s: float
) -> str | None:
    """'finished' or 'idle' when the run may be evicted now; 0 disables either rule."""
    if seen_ts is None:
        return None
    age = now - seen_ts
    if finished:
        return "finished" if finished_retention_s > 0 and age >= finished_retention_s else None
    return "idle" if idle_timeout_s > 0 and age >= idle_timeout_s else None


def evict_request(run_id: str, ver: tuple[int, bool, int]) -> bytes:
    return orjson.dumps({"type": EVICT_TYPE, "run_id": run_id, "version": list(ver)})


def parse_evict(raw: bytes | str | None) -> EvictRequest | None:
    """The request if `raw` is one (a prefix test first: cheap for every other event)."""
    if raw is None:
        return None
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
    if not data.startswith(_PREFIX):
        return None
    try:
        d = orjson.loads(data)
        step, finished, dups = d["version"]
        return EvictRequest(str(d["run_id"]), (int(step), bool(finished), int(dups)))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
