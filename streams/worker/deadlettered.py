"""What the worker dead-lettered lately, by run: so that `/runs/{id}` can say why a run the
agent started does not exist (its run_start was refused) instead of a bare 404.

Bounded (the oldest run is forgotten first) and in memory: since this worker started, for
the runs of the partitions it processed. The dead-letter topic has everything
(`rb-streams deadletters --run ID`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

RUNS_KEPT = 1024
DETAIL_CHARS = 500


ANY = "*"  # `get`'s tenant for a reader of every tenant (the operator); no tenant name has '*'


class RecentDeadletters:
    """run id -> its first dead-letter of late (the cause: the `unknown_run` steps that follow
    a refused run_start do not replace it) and how many there were since, per tenant whose
    topic the input came from (multi-tenant mode: a tenant that writes into another's run id
    has its own entry, and neither reads the other's; None in single-tenant mode)."""

    def __init__(self, runs_kept: int = RUNS_KEPT) -> None:
        self._runs: OrderedDict[str, dict[str | None, dict[str, Any]]] = OrderedDict()
        self._kept = runs_kept

    def add(
        self, run_id: str, reason: str, detail: str, step: int | None, ts: float, tenant: str | None = None
    ) -> None:
        by_tenant = self._runs.setdefault(run_id, {})
        seen = by_tenant.get(tenant)
        if seen is not None:
            seen["count"] += 1
            seen["last_reason"] = reason
            return
        by_tenant[tenant] = {
            "reason": reason,
            "detail": detail[:DETAIL_CHARS],
            "step": step,
            "ts": ts,
            "count": 1,
            "last_reason": reason,
        }
        while len(self._runs) > self._kept:
            self._runs.popitem(last=False)

    def get(self, run_id: str, tenant: str | None = ANY) -> dict[str, Any] | None:
        """The run's entry for inputs of `tenant`'s topic (ANY: the first of any tenant's)."""
        by_tenant = self._runs.get(run_id)
        if not by_tenant:
            return None
        seen = next(iter(by_tenant.values())) if tenant == ANY else by_tenant.get(tenant)
        return None if seen is None else dict(seen)

    def __len__(self) -> int:
        return len(self._runs)
