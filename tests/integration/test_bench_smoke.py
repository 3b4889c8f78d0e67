"""Every benchmark still runs end to end (a few seconds each, tiny sizes) and prints its summary.

Figures are not checked: speed is measured by the benchmarks themselves (BENCHMARKS.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from tests.integration.helpers import PORT

pytestmark = pytest.mark.integration

BENCHES = {
    "wire_cost": ["--max-steps", "60"],
    "flat_cost": ["--steps", "120", "--runs", "1", "--worker"],
    "throughput": ["--runs", "8", "--steps", "6", "--partitions", "2"],
    "latency": ["--rates", "20", "--runs", "4", "--duration", "2", "--partitions", "2"],
    "etrace_latency": ["--patterns", "60", "--orgs", "2", "--queries", "8"],
    "embedders": ["--no-build", "--min-seconds", "0.2", "--rounds", "1"],
    # the chain of collecting benches' figures into the summary, on the two quickest (each bench
    # on its own is checked above; latency and throughput would add a minute and check no more)
    "headline": ["--smoke", "--rounds", "1", "--only", "flat_cost,etraces"],
    "soak": ["--minutes", "0.15", "--concurrency", "2", "--steps", "3", "--sample", "3", "--retention", "2"],
    "regex_cost": ["--sizes", "1,2", "--step-sizes", "2", "--repeat", "1", "--step-units", "a-"],
    "step_cost": ["--runs", "1", "--repeat", "1"],
}


# the summary's name where it is not the module's (`bench.etrace_latency` reports on E-traces)
SUMMARY_NAMES = {"etrace_latency": "etraces"}


# The benchmarks run as child processes, CONCURRENT at a time, started when the first test asks
# for them: each spends most of its time loading models and waiting on the broker, so side by
# side they take about half the wall time they take one after another (figures are not checked).
CONCURRENT = 3


@pytest.fixture(scope="module")
def runs(broker) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    # the benchmarks reuse the test broker instead of starting their own
    env = {**os.environ, "RB_BENCH_KAFKA_PORT": str(PORT), "HF_HUB_OFFLINE": "1"}

    def run(bench: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", f"bench.{bench}", *BENCHES[bench]]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(CONCURRENT) as pool:
        yield {bench: pool.submit(run, bench) for bench in sorted(BENCHES)}


@pytest.mark.parametrize("bench", sorted(BENCHES))
def test_benchmark_runs_and_prints_its_summary(runs, bench):
    p = runs[bench].result()
    assert p.returncode == 0, p.stderr[-3000:]
    name = SUMMARY_NAMES.get(bench, bench)
    assert f"SUMMARY {name}" in p.stdout or f"SUMMARY {name.rstrip('s')}" in p.stdout, p.stdout[-2000:]
