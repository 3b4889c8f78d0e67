"""When a run's state may leave the table, and the control record that removes it.

Finished runs stay for a retention period (late duplicates are still recognised and
/runs/{id} still answers); unfinished runs that go quiet are dropped after an idle timeout.
The clock is the worker time of the last event applied (`TraceState.updated_ts`), never the
agent's `ts`, so a skewed agent clock cannot evict a live run.

Faust only writes a table (and its changelog) from inside a stream event, so the worker asks
for an eviction by publishing an `rb.evict` record to the steps topic under the run's key: it
arrives in order with the run's own events, and the run is removed only if nothing happened
to it since the request (its `version` still matches: every event applied to a run changes
last_step, finished or duplicates, and the version also names the run's incarnation, the
`ts` of its run_start, so a request made for an earlier run of the same id never matches a
run started again). The removal is a changelog tombstone, so a worker recovering the table
does not bring the run back.

Any producer can write to the steps topic, so a control record is verified before it acts:
with `RB_CONTROL_KEY` set, workers sign their requests (HMAC-SHA256) and worker and replay
apply only records whose signature checks. Whether a record applies is then decided by
`judge`, from the record and the run's state alone, which worker and replay share: replay
has no worker clock (its states carry its own processing times), so a rule that read the
clock could not be replayed. A signed record that matches the state applies (the worker
signed it for exactly that state, once it had expired); a record for another incarnation
is refused (a replayed one). Without a key anyone can write a matching record, so the
worker also refuses one for a run its clock says is not expired; replay cannot see that
clock and applies it (set the key for replay to agree on every record). Refused records
are dead-lettered `invalid_control`.

The table is also bounded per org and overall (`RunsHeld`): an org may hold at most
`RB_MAX_RUNS_PER_ORG` runs (unfinished, and finished ones within their retention), and all
orgs together at most `RB_MAX_RUNS` (one run per org of a flood of distinct orgs passes the
per-org cap), each counted per partition so that it follows from the partition's own event
order, the same for the worker and replay.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from .state import TraceState

EVICT_TYPE = "rb.evict"
# Why a control record is refused (dead-letter detail, the same from worker and replay).
NOT_KEYED = "control record not keyed by its run_id"
BAD_SIGNATURE = "control record signature missing or wrong (RB_CONTROL_KEY)"
OTHER_RUN = "control record made for an earlier run of this id (its run_start ts differs): a replayed record"
DEFAULT_MAX_RUNS_PER_ORG = 10_000
# Runs the table may hold across all orgs. What a held run costs the worker beyond its table
# entry: its retention clock (run_index), its org (runs_held) and RocksDB's share; a flood of
# 40,000 one-event runs of distinct orgs took a worker from 283 to 395 MB RSS (issue 48, ~2.8
# KB a run), so the default bounds that to ~280 MB, well inside the 2 GiB a worker is given
# (deploy/k8s/worker.yaml), and is ten orgs at their full per-org cap.
DEFAULT_MAX_RUNS = 100_000
TOO_MANY_RUNS = "too_many_runs"  # the org's share is full (RB_MAX_RUNS_PER_ORG)
TABLE_FULL = "table_full"  # every org's runs together fill the table's share (RB_MAX_RUNS)
_PREFIX = b'{"type":"rb.evict"'


# (last_step, finished, duplicates, the run_start's ts): which run, and how far it has got.
Version = tuple[int, bool, int, float | None]


@dataclass(frozen=True)
class EvictRequest:
    run_id: str
    version: Version
    mac: str | None = None  # HMAC-SHA256 of (type, run_id, version) under RB_CONTROL_KEY


def version(st: TraceState) -> Version:
    """Changes with every event applied to the run, and differs between two runs of one id
    (the agent's run_start ts: in the recorded stream, so replay computes the same)."""
    return (st.last_step, st.finished, st.duplicates, st.started_ts)


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


def _mac(key: str, run_id: str, ver: Version) -> str:
    msg = orjson.dumps([EVICT_TYPE, run_id, list(ver)])
    return hmac.new(key.encode("utf-8"), msg, hashlib.sha256).hexdigest()


def evict_request(run_id: str, ver: Version, key: str = "") -> bytes:
    """The control record; signed when a control key is configured."""
    d: dict[str, object] = {"type": EVICT_TYPE, "run_id": run_id, "version": list(ver)}
    if key:
        d["mac"] = _mac(key, run_id, ver)
    return orjson.dumps(d)


def verified(req: EvictRequest, key: str) -> bool:
    """Without a key every record passes this check (the worker's expiry check remains)."""
    if not key:
        return True
    return req.mac is not None and hmac.compare_digest(req.mac, _mac(key, req.run_id, req.version))


def judge(req: EvictRequest, st: TraceState | None, key: str) -> tuple[bool, str | None]:
    """(apply it, why it is refused) for a request keyed by its run: the rule worker and
    replay share. Neither: stale (the run is gone or moved on since it was asked for).

    Reads no clock, so replay decides exactly as the worker did. The worker adds one check
    when no key is set (`expiry` by its clock: an unsigned record proves nothing)."""
    if not verified(req, key):
        return False, BAD_SIGNATURE
    if st is None:
        return False, None  # evicted already
    if st.started_ts != req.version[3]:
        return False, OTHER_RUN
    return version(st) == req.version, None


def parse_evict(raw: bytes | str | None) -> EvictRequest | None:
    """The request if `raw` is one (a prefix test first: cheap for every other event).
    A malformed one is None: it is then judged as an event (schema_violation)."""
    if raw is None:
        return None
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if not data.startswith(_PREFIX):
        return None
    try:
        d = orjson.loads(data)
        ver = d["version"]
        step, finished, dups, started = (*ver, None) if len(ver) == 3 else ver  # 3: before incarnations
        run_id, mac = d["run_id"], d.get("mac")
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    if not (isinstance(run_id, str) and type(step) is int and type(finished) is bool and type(dups) is int):
        return None
    if started is not None and (type(started) is bool or not isinstance(started, (int, float))):
        return None
    return EvictRequest(run_id, (step, finished, dups, started), mac if isinstance(mac, str) else None)


class RunsHeld:
    """How many runs each org holds in the table, per partition, and the caps on them.

    A run counts from its accepted run_start until it is evicted (finished runs count during
    their retention: they take table space too). Counting per partition makes the count a
    function of the partition's event order, which worker and replay share: runs are added
    when their run_start is evaluated (a new run's run_start never waits behind another
    event) and removed when an eviction is applied (in order with the run's events). Each cap
    is split evenly: ceil(max_runs_per_org / partitions) per org and partition, and
    ceil(max_runs / partitions) per partition for all orgs together (a worker that owns every
    partition holds at most about `max_runs`; one that owns some, its partitions' shares).
    """

    def __init__(
        self, max_runs_per_org: int, partition_of: Callable[[str], int], partitions: int, max_runs: int = 0
    ) -> None:
        self.max_runs_per_org = max_runs_per_org
        self.partitions = max(1, partitions)
        self.per_partition = _share(max_runs_per_org, self.partitions)
        self.max_runs = max_runs
        self.total_per_partition = _share(max_runs, self.partitions)
        self._partition_of = partition_of
        self._runs: dict[str, tuple[int, str]] = {}  # run_id -> (partition, org)
        self._counts: Counter[tuple[int, str]] = Counter()
        self._totals: Counter[int] = Counter()  # partition -> runs of every org

    @property
    def capacity(self) -> int:
        """The most runs this could count with every partition (0: no overall cap)."""
        return self.total_per_partition * self.partitions

    def partition_of(self, run_id: str) -> int:
        """The partition that owns a run: its key's partition, where its state lives and its
        share of the cap is counted (an event read from another partition is refused)."""
        return self._partition_of(run_id)

    def refusal(self, org: str, run_id: str) -> tuple[str, str] | None:
        """(reason, detail) when a new run of `org` is refused, or None: the org's share of
        its partition is full (`too_many_runs`), or the partition's share of all runs is
        (`table_full`). The org's own cap is named first: it says who must act."""
        partition = self._partition_of(run_id)
        if self.per_partition:
            held = self._counts[(partition, org)]
            if held >= self.per_partition:
                return TOO_MANY_RUNS, (
                    f"org {org[:100]!r} already holds {held} runs on this run's partition: the cap is "
                    f"{self.max_runs_per_org} runs per org (RB_MAX_RUNS_PER_ORG), {self.per_partition} per "
                    f"partition; runs leave when evicted (finished: after RB_FINISHED_RETENTION_S)"
                )
        if self.total_per_partition:
            total = self._totals[partition]
            if total >= self.total_per_partition:
                return TABLE_FULL, (
                    f"the worker's table holds {total} runs of all orgs on this run's partition: the "
                    f"cap is {self.max_runs} runs in all (RB_MAX_RUNS), {self.total_per_partition} per "
                    f"partition; runs leave when evicted (finished: after RB_FINISHED_RETENTION_S, "
                    f"idle: after RB_IDLE_TIMEOUT_S)"
                )
        return None

    def add(self, run_id: str, org: str) -> None:
        if run_id in self._runs:
            return
        where = (self._partition_of(run_id), org)
        self._runs[run_id] = where
        self._counts[where] += 1
        self._totals[where[0]] += 1

    def remove(self, run_id: str) -> None:
        where = self._runs.pop(run_id, None)
        if where is None:
            return
        self._counts[where] -= 1
        if self._counts[where] <= 0:
            del self._counts[where]
        self._totals[where[0]] -= 1
        if self._totals[where[0]] <= 0:
            del self._totals[where[0]]

    def reset(self, runs: dict[str, str]) -> None:
        """Rebuild from the table (run_id -> org), after a recovery."""
        self._runs.clear()
        self._counts.clear()
        self._totals.clear()
        for run_id, org in runs.items():
            self.add(run_id, org)

    def __len__(self) -> int:
        """Runs counted (one per run in the table): the `runs_held` cache gauge."""
        return len(self._runs)

    def held(self, org: str) -> int:
        return sum(n for (_, o), n in self._counts.items() if o == org)

    def orgs(self) -> dict[str, str]:
        """run_id -> org of every run counted (a copy: the worker's `GET /runs` pages it)."""
        return {run_id: org for run_id, (_, org) in self._runs.items()}


def _share(cap: int, partitions: int) -> int:
    """A cap's share per partition, rounded up (0: no cap)."""
    return -(-cap // partitions) if cap > 0 else 0
