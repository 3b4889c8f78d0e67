"""MiniLM in a child process: the same vectors as in-process, and a dead child is replaced."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pytest

from streams.embeddings.minilm import MiniLMEmbedder
from streams.embeddings.process import ProcessEmbedder
from tests.models import models

TEXTS = [
    "I need to fix the failing session test; the token expiry check raises KeyError.",
    "Run the unit tests again.",
    "",
]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    m = models().full.model
    assert isinstance(m, MiniLMEmbedder)
    return m


def test_vectors_from_the_child_are_bit_identical_to_in_process(minilm: MiniLMEmbedder) -> None:
    child = ProcessEmbedder(minilm.model_dir, name=minilm.name, dim=minilm.dim)
    try:
        assert child.start() != os.getpid()
        got = child.embed(TEXTS)
        assert got.dtype == np.float32 and got.shape == (3, minilm.dim)
        assert np.array_equal(got, minilm.embed(TEXTS))
        assert child.embed([]).shape == (0, minilm.dim)
    finally:
        child.close()


def test_the_child_runs_at_a_lower_priority(minilm: MiniLMEmbedder) -> None:
    child = ProcessEmbedder(minilm.model_dir, name=minilm.name, dim=minilm.dim, nice=5)
    try:
        pid = child.start()
        assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0) + 5
    finally:
        child.close()


@pytest.mark.parametrize(
    "embed",
    [
        pytest.param(lambda child, texts: child.embed(texts), id="embed"),
        pytest.param(lambda child, texts: child.submit_each(texts).result(timeout=60), id="submit_each"),
    ],
)
def test_a_dead_child_fails_one_call_and_is_replaced(minilm: MiniLMEmbedder, embed) -> None:
    child = ProcessEmbedder(minilm.model_dir, name=minilm.name, dim=minilm.dim)
    try:
        pid = child.start()
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        with pytest.raises(BrokenProcessPool):
            embed(child, TEXTS[:1])
        assert np.array_equal(embed(child, TEXTS[:1]), minilm.embed(TEXTS[:1]))  # a new child
    finally:
        child.close()


def test_a_killed_child_leaves_no_pool_thread_for_the_exit_hook_to_race(minilm: MiniLMEmbedder) -> None:
    """`kill` (every worker's last step) returns only once the pool's manager thread has ended:
    left running at interpreter exit, it closed its wakeup pipe while CPython's exit hook wrote
    to it, and a cleanly stopped worker logged `OSError: Bad file descriptor` with a traceback."""
    child = ProcessEmbedder(minilm.model_dir, name=minilm.name, dim=minilm.dim)
    child.start()
    manager = child._pool._executor_manager_thread  # type: ignore[union-attr]
    assert manager is not None and manager.is_alive()
    child.kill()
    assert not manager.is_alive()


def test_a_single_string_is_refused(minilm: MiniLMEmbedder) -> None:
    child = ProcessEmbedder(minilm.model_dir, name=minilm.name, dim=minilm.dim)
    with pytest.raises(TypeError):
        child.embed("one text")  # type: ignore[arg-type]


def test_submit_each_embeds_one_text_per_pass_like_the_monitors(minilm: MiniLMEmbedder) -> None:
    child = ProcessEmbedder(minilm.model_dir, name=minilm.name, dim=minilm.dim)
    try:
        got = child.submit_each(TEXTS[:2]).result(timeout=60)
        # the monitors embed one text per call (Semantics): the rows must be those bits
        assert np.array_equal(got, np.stack([minilm.embed([t])[0] for t in TEXTS[:2]]))
    finally:
        child.close()


ORPHAN = """
import os, signal, sys, threading, time
from streams.embeddings.process import ProcessEmbedder

child = ProcessEmbedder(sys.argv[1], name="minilm", dim=int(sys.argv[2]))
spawn = lambda: child._executor()  # spawns the child, which starts loading the model
if sys.argv[3] == "main":
    spawn()
else:  # another thread: no death signal, the child's own watch must see the parent go
    t = threading.Thread(target=spawn)
    t.start()
    t.join()
print(next(iter(child._executor()._processes)), flush=True)
time.sleep(float(sys.argv[4]))
os.kill(os.getpid(), signal.SIGKILL)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize(
    ("spawned_on", "after_s"), [("main", 1.0), ("thread", 0.0), ("thread", 1.0)], ids=str
)
def test_a_child_whose_worker_dies_while_it_starts_exits_within_seconds(
    minilm: MiniLMEmbedder, spawned_on: str, after_s: float
) -> None:
    """Issue 48: the child read its parent's pid after loading the model, so a worker killed
    during the load left a child that took init for its parent and ran for ever."""
    # the child inherits the pipe: read the pid line only, never to EOF
    proc = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, str(minilm.model_dir), str(minilm.dim), spawned_on, str(after_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    with proc.stdout:
        pid = int(proc.stdout.readline())
    assert proc.wait(60) == -signal.SIGKILL
    deadline = time.monotonic() + 5.0
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = _alive(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"the embedding child {pid} outlived its parent by 5 s"
