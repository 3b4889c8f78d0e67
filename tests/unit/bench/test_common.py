"""The benchmarks' CPU accounting: CPU seconds between two instants, main thread and children."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from bench.common import CpuSampler

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"
# the parent burns on its main thread, then starts a child that burns as long, then idles
PARENT = (
    BURN.format(s=0.6)
    + "import subprocess, sys\n"
    + f"subprocess.run([sys.executable, '-c', {BURN.format(s=0.6)!r}])\n"
    + "print('burnt', flush=True)\n"
    + "time.sleep(60)\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_cpu_of_the_main_thread_and_of_the_children_between_two_instants() -> None:
    p = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    cpu = CpuSampler(p.pid, every=0.02)
    t0 = time.time()
    try:
        assert p.stdout is not None and p.stdout.readline() == "burnt\n"  # both burns are over
        time.sleep(0.5)
    finally:
        t1 = time.time()
        cpu.stop()
        p.kill()
        p.wait()
    got = cpu.between(t0, t1)
    assert got is not None
    assert 0.4 <= got["main_cpu_s"] <= 1.0  # the parent's own burn, not its child's
    assert got["cpu_s"] >= got["main_cpu_s"] + 0.3  # the child's burn counts in the total
    idle = cpu.between(t1 - 0.4, t1)
    assert idle is not None and idle["main_cpu_s"] < 0.1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_machine_and_a_second_process_are_sampled_beside_the_main_one() -> None:
    """The broker's CPU (a second pid) and the machine's busy time, over the same instants."""
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    burner = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.6) + "print('burnt', flush=True)\n"])
    cpu = CpuSampler(idle.pid, every=0.02, broker=burner.pid)
    t0 = time.time()
    try:
        assert burner.wait(30) == 0
        time.sleep(0.1)
    finally:
        t1 = time.time()
        cpu.stop()
        idle.kill()
        idle.wait()
    got = cpu.between(t0, t1)
    assert got is not None
    assert got["main_cpu_s"] < 0.1  # the sleeping process
    assert 0.3 <= got["broker_cpu_s"] <= 1.0
    assert got["machine_busy_s"] >= 0.3  # the machine was busy at least with the burner
