"""One tenant's flood does not hold another tenant's steps (multi-tenant mode, real worker and
broker): while tenant `flood` has a backlog of large steps on its topic, tenant `calm`'s p95
decision latency stays within 3x its unloaded p95, measured a moment before in the same test.
(Before each tenant had its own agent and the flood was paced, calm waited ~1 s: BENCHMARKS.md.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.fairness import fairness_settings, one_round
from streams.local.worker_process import WorkerProcess
from tests.integration.conftest import make_settings, start_worker

pytestmark = pytest.mark.integration

FLOOD_STEPS = 200  # of ~120 KB: ~24 MB, a backlog of several seconds of the worker's time
# An unloaded p95 below this counts as this: on a busy 2-core machine every process stalls
# now and then, loaded or not (before the per-tenant agents the p95 here was ~1,800 ms).
# With the probe and hand-over fixes (BENCHMARKS.md §10), this test's round at load average 6 to
# 9 gave an unloaded p95 of 20-40 ms and a flooded p95 of 95-213 ms (6 rounds); the tree before
# them 300-576 ms flooded. A lower floor would leave too little room on such a machine.
FLOOR_MS = 100.0


@pytest.fixture(scope="module")
def two_tenants(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    tmp: Path = tmp_path_factory.mktemp("fairness")
    w = start_worker(fairness_settings(make_settings(broker, tmp)), tmp)
    yield w
    w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)


def test_a_tenants_flood_keeps_the_other_tenants_p95_within_3x_of_unloaded(
    two_tenants: WorkerProcess,
) -> None:
    r = asyncio.run(
        one_round(
            two_tenants.settings, n_runs=4, unloaded_s=4.0, flood=FLOOD_STEPS, kb=120.0, seed=7, think_s=0.05
        )
    )
    f = r.figures()
    assert f["loaded_n"] >= 20, f  # calm stepped all through the flood's backlog
    assert f["loaded_p95"] <= 3 * max(f["unloaded_p95"], FLOOR_MS), f
