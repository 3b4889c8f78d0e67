"""Opt-in heap tracing: what grows in a long-running worker (and its embedding child).

Set `RB_MEMTRACE_FILE=/path/prefix` and every `RB_MEMTRACE_INTERVAL_S` (default 300) seconds
each process appends to `<prefix>.<role>.<pid>.txt` its RSS, the Python heap tracemalloc
sees, and the allocation sites that grew most since the first snapshot and since the
previous one. RSS growing while the traced heap does not points outside Python's objects
(RocksDB, the allocator), which is how issue 32's soak growth was told apart.

Off by default: tracemalloc roughly doubles the cost of every allocation. Read from the
environment (like RB_DEBUG), not `Settings`, so the spawned embedding child sees it too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import tracemalloc
from pathlib import Path
from typing import IO

log = logging.getLogger(__name__)

FILE_ENV = "RB_MEMTRACE_FILE"
INTERVAL_ENV = "RB_MEMTRACE_INTERVAL_S"
FRAMES = 4  # traceback depth kept per allocation: enough to name the caller of a container
TOP = 25  # allocation sites written per comparison
_FILTERS = (
    tracemalloc.Filter(False, tracemalloc.__file__),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
    tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
    tracemalloc.Filter(False, "<unknown>"),
)


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size of a process from /proc (0 where there is no /proc)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class MemTracer:
    """Snapshots on a daemon thread; `dump` can also be called directly (tests)."""

    def __init__(self, path: Path, interval_s: float, frames: int = FRAMES) -> None:
        self.path = path
        self.interval_s = max(1.0, interval_s)
        self.frames = frames
        self._first: tracemalloc.Snapshot | None = None
        self._prev: tracemalloc.Snapshot | None = None
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(self.frames)
        self._thread = threading.Thread(target=self._loop, name="rb-memtrace", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.dump()
            except Exception:  # a diagnostic must never take the worker down
                log.exception("memtrace dump failed")

    def dump(self) -> None:
        """Append one report: RSS, traced heap, top growth since the first and last snapshot."""
        snap = tracemalloc.take_snapshot().filter_traces(_FILTERS)
        current, peak = tracemalloc.get_traced_memory()
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(
                f"== t={time.monotonic() - self._t0:.0f}s rss={rss_bytes() / 1e6:.1f} MB "
                f"traced={current / 1e6:.1f} MB (peak {peak / 1e6:.1f})\n"
            )
            if self._first is None:
                self._first = snap
                _top(out, "largest sites", snap.statistics("lineno")[:TOP])
            else:
                _diff(out, "growth since the first snapshot", snap.compare_to(self._first, "traceback"))
                if self._prev is not None and self._prev is not self._first:
                    _diff(out, "growth since the previous snapshot", snap.compare_to(self._prev, "lineno"))
            self._prev = snap


def _top(out: IO[str], title: str, stats: list[tracemalloc.Statistic]) -> None:
    out.write(f"-- {title}\n")
    for s in stats:
        out.write(f"{s.size / 1e6:9.3f} MB {s.count:8d} blocks  {_where(s.traceback)}\n")


def _diff(out: IO[str], title: str, diffs: list[tracemalloc.StatisticDiff]) -> None:
    out.write(f"-- {title}\n")
    for d in sorted(diffs, key=lambda d: d.size_diff, reverse=True)[:TOP]:
        out.write(
            f"{d.size_diff / 1e6:+9.3f} MB (now {d.size / 1e6:8.3f} MB, {d.count_diff:+7d} blocks)  "
            f"{_where(d.traceback)}\n"
        )


def _where(tb: tracemalloc.Traceback) -> str:
    """file:line of each frame, innermost first (no source lines: reading them through
    linecache would itself show up as growth)."""
    return " <- ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}" for f in reversed(tb))


def start_from_env(role: str, env: dict[str, str] | None = None) -> MemTracer | None:
    """Start tracing in this process if RB_MEMTRACE_FILE is set; None otherwise."""
    source = os.environ if env is None else env
    prefix = source.get(FILE_ENV, "")
    if not prefix:
        return None
    interval = 300.0
    with contextlib.suppress(ValueError):
        interval = float(source.get(INTERVAL_ENV, "") or interval)
    path = Path(f"{prefix}.{role}.{os.getpid()}.txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    tracer = MemTracer(path, interval)
    tracer.start()
    log.warning("memtrace on: %s every %.0fs (tracemalloc slows every allocation)", path, interval)
    return tracer
