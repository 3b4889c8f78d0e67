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

from bench.tenant_fairness import fairness_settings, one_round
from streams.local.worker_process import WorkerProcess
from tests.integration.helpers import make_settings, start_worker

pytestmark = pytest.mark.integration

FLOOD_STEPS = 200  # of ~120 KB: ~24 MB, a backlog of several seconds of the worker's time
# An unloaded p95 below this counts as this: on a 2-core machine every process stalls now and
# then, loaded or not. The floor is low enough that the tree before aiokafka's prefetch hold was
# released (BENCHMARKS.md §10: flooded p95 a steady 90-130 ms, on a quiet machine too) fails:
# with it, 29-64 ms at load average 1.7 to 5. A round that misses is run once more (a stall
# of the machine, not of the worker, passes the second time; the hold failed every round).
FLOOR_MS = 30.0
ROUNDS = 2


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
    for attempt in range(1, ROUNDS + 1):
        r = asyncio.run(
            one_round(
                two_tenants.settings,
                n_runs=4,
                unloaded_s=4.0,
                flood=FLOOD_STEPS,
                kb=120.0,
                seed=7,
                think_s=0.05,
            )
        )
        f = r.figures()
        assert f["loaded_n"] >= 20, f  # calm stepped all through the flood's backlog
        if f["loaded_p95"] <= 3 * max(f["unloaded_p95"], FLOOR_MS):
            return
        print(f"round {attempt}: flooded p95 {f['loaded_p95']:.1f} ms, unloaded {f['unloaded_p95']:.1f} ms")
    raise AssertionError(
        f"calm's flooded p95 over 3x its unloaded p95 (floor {FLOOR_MS} ms) in {ROUNDS} rounds: {f}"
    )
