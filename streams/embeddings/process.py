"""MiniLM in a child process at low CPU priority: the E-trace query embeddings.

Why a process: a query embedding is 15-45 ms of CPU. On a thread of the worker it competes
with the event loop for the GIL between numpy calls and, at the same priority, for the cores
the broker and the agents use; measured at 200 steps/s on 2 cores, the decisions made while
embeddings ran made the p99 (11-12 ms against 6 ms with E-traces off). E1/E2 are answered
one decision late (`core.etrace_rules`), so an embedding has the agent's whole model call to
finish: it can run in a process of its own, niced, that uses the CPU the worker leaves idle
and never holds the worker's GIL. The vectors are the in-process model's, bit for bit (same
code, same weights, same single BLAS thread).

A child that dies is replaced on the next call (that call fails; the retriever counts it as
a store failure and says so in the decision). A child never outlives its worker (issue 48: a
worker stopped while the child loaded the model left it running, adopted by init, ~157 MB):
it watches the pid it was given from the first thing it does, and on Linux the kernel also
kills it when the thread that spawned it (the main thread, for the worker's child) ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]
NICE = 10  # the child's niceness above the worker's: it gets the CPU the worker leaves idle
PARENT_WATCH_S = 0.5  # the child checks this often that its worker is still there
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

_model = None  # in the child: the MiniLMEmbedder


def _die_with(parent: int, deathsig: bool) -> None:
    """In the child, first of all: exit once `parent` is gone. Watched from here on, not from
    after the model load (a worker stopped during the load left its child adopted by init, and
    a pid read then was init's, so the child never noticed). `deathsig`: the spawning thread
    is the worker's main thread, which lives as long as the worker: the kernel kills the child
    the moment it ends (PR_SET_PDEATHSIG; the watch covers other systems and the race below)."""
    if deathsig and sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):  # no libc prctl: the watch alone
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)

    def orphaned() -> None:
        while os.getppid() == parent:  # (checked at once: the parent may have died already)
            time.sleep(PARENT_WATCH_S)
        os._exit(0)

    threading.Thread(target=orphaned, name="rb-embed-parent-watch", daemon=True).start()


def _start(model_dir: str, nice: int, parent: int | None = None, deathsig: bool = False) -> None:
    """In the child: watch the worker, lower its priority, one BLAS thread, load the model."""
    global _model
    _die_with(os.getppid() if parent is None else parent, deathsig)
    from threadpoolctl import threadpool_limits

    from ..runtime.allocator import configure
    from ..runtime.memtrace import start_from_env
    from .minilm import MiniLMEmbedder
    from .models import BLAS_THREADS

    configure()  # two malloc arenas, a fixed mmap threshold (streams.runtime.allocator)
    if nice > 0:
        with contextlib.suppress(OSError):  # not permitted: run at the worker's priority
            os.nice(nice)
    threadpool_limits(limits=BLAS_THREADS, user_api="blas")
    start_from_env("embed")  # opt-in heap tracing (RB_MEMTRACE_FILE): the child's own report
    _model = MiniLMEmbedder(model_dir)


def _embed(texts: list[str]) -> FloatArray:
    assert _model is not None
    out: FloatArray = _model.embed(texts)
    return out


def _embed_each(texts: list[str]) -> FloatArray:
    """One text per forward pass, as the monitors embed (`Semantics`): a batch pads to its
    longest text, which changes the BLAS blocking and so the last bits."""
    assert _model is not None
    return np.stack([_model.embed([t])[0] for t in texts])


def _ping() -> int:
    return os.getpid()


class ProcessEmbedder:
    """An `Embedder` whose `embed` runs MiniLM in one child process (blocking the caller's
    thread, not the GIL, while it waits). Callers: the retriever's pool threads."""

    def __init__(self, model_dir: Path | str, *, name: str, dim: int, nice: int = NICE) -> None:
        self.model_dir = str(model_dir)
        self.name = name
        self.dim = dim
        self.nice = nice
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        _LIVE.add(self)

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                # spawn: the worker has threads (Faust, aiokafka, the retriever); fork would copy
                # their locks in whatever state they are in
                main = threading.current_thread() is threading.main_thread()
                pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start,
                    initargs=(self.model_dir, self.nice, os.getpid(), main),
                )
                # the child is spawned here, by the first submit, so on this thread: the one
                # its death signal is tied to (only ever the main thread)
                pool.submit(_ping)
                self._pool = pool
            return self._pool

    def start(self) -> int:
        """Start the child and wait until it has loaded the model; its pid."""
        return self._executor().submit(_ping).result()

    def embed(self, texts: Sequence[str]) -> FloatArray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        pool = self._executor()
        try:
            return pool.submit(_embed, list(texts)).result()
        except BrokenProcessPool:
            self._replace(pool)
            raise

    def submit_each(self, texts: Sequence[str]) -> Future[FloatArray]:
        """Embed `texts` in the child, one per forward pass, without waiting: rows bit-identical
        to the in-process model's `embed([text])`. A dead child fails the future and is
        replaced on the next call."""
        pool = self._executor()
        try:
            fut: Future[FloatArray] = pool.submit(_embed_each, list(texts))
        except BrokenProcessPool:
            self._replace(pool)
            raise
        fut.add_done_callback(lambda f: self._replace(pool) if _broken(f) else None)
        return fut

    def _replace(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:  # replaced once, whoever sees it first
                log.warning("the embedding process died; starting a new one")
                self._pool = None
                pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def kill(self) -> None:
        """Stop the child now, whatever it is doing: a worker start-up interrupted while the
        child loads the model (`close` would wait for the load, then for the queued work)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = getattr(pool, "_processes", None) or {}  # CPython's pid -> Process map
        for proc in list(processes.values()):
            with contextlib.suppress(Exception):
                proc.kill()
        manager = getattr(pool, "_executor_manager_thread", None)  # CPython's; shutdown drops it
        pool.shutdown(wait=False, cancel_futures=True)
        _join_manager(manager)


def _join_manager(manager: object, timeout_s: float = 5.0) -> None:
    """Wait (bounded) for the pool's manager thread to end. Left running, it closes its wakeup
    pipe while the interpreter's exit hook writes to it: a race in CPython 3.11's
    concurrent.futures that printed `OSError: Bad file descriptor` and a traceback in the log of
    a worker that had stopped cleanly."""
    if isinstance(manager, threading.Thread) and manager is not threading.current_thread():
        manager.join(timeout_s)


_LIVE: weakref.WeakSet[ProcessEmbedder] = weakref.WeakSet()


def kill_all() -> None:
    """Kill every child of this process now (a worker start-up stopped by a signal)."""
    for embedder in list(_LIVE):
        embedder.kill()


def _broken(fut: Future[FloatArray]) -> bool:
    return not fut.cancelled() and isinstance(fut.exception(), BrokenProcessPool)
