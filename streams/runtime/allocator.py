"""glibc malloc settings and statistics for the worker and its embedding child.

Why: glibc gives every thread that contends for the heap an arena of its own (up to 8 per
core) and keeps freed memory inside them. The worker's threads (Faust's consumer thread, the
E-trace pools, RocksDB's flush and compaction threads) free memory in one arena while the
event loop allocates in another, so RSS creeps up although nothing live grows. Two arenas
and a periodic `malloc_trim` keep what is freed returnable to the kernel.

Everything here is a no-op where glibc is not the allocator (macOS, musl): `available()`.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
from collections.abc import Mapping
from functools import cache

log = logging.getLogger(__name__)

TUNING_ENV = "RB_MALLOC_TUNING"  # "off": glibc's defaults and no trimming (to compare)
ARENA_MAX_ENV = "MALLOC_ARENA_MAX"  # glibc's own variable: when set, it is left alone
DEFAULT_ARENA_MAX = 2
MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"
MMAP_THRESHOLD = 128 * 1024  # glibc's initial value, kept fixed (see `configure`)
M_MMAP_THRESHOLD, M_ARENA_MAX = -3, -8  # mallopt parameters (malloc.h)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",  # bytes from sbrk in the main arena plus the other arenas' heaps
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",  # bytes in mmapped chunks
            "usmblks",
            "fsmblks",
            "uordblks",  # bytes in use (not mmapped)
            "fordblks",  # bytes free inside the arenas: kept, not returned
            "keepcost",
        )
    ]


@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt  # noqa: B018 (present only in glibc)
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def available() -> bool:
    return _libc() is not None


def tuning(env: Mapping[str, str] | None = None) -> bool:
    """False when RB_MALLOC_TUNING says off (0, off, false, no): `configure` then changes
    nothing and the worker does not trim."""
    source = os.environ if env is None else env
    return source.get(TUNING_ENV, "").strip().lower() not in ("0", "off", "false", "no")


def configure(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """At process start-up, before threads allocate: at most DEFAULT_ARENA_MAX arenas, and a
    fixed mmap threshold. glibc otherwise raises the threshold to the size of each large
    block freed (up to 32 MB), after which RocksDB's memtable blocks come from the heap and
    their freed pages stay in the process. A setting glibc was given through its own
    environment variable is left alone. Returns what was set (empty without glibc)."""
    source = os.environ if env is None else env
    libc = _libc()
    done: dict[str, int] = {}
    if libc is None or not tuning(source):
        return done
    if not source.get(ARENA_MAX_ENV) and libc.mallopt(M_ARENA_MAX, DEFAULT_ARENA_MAX) == 1:
        done["arena_max"] = DEFAULT_ARENA_MAX
    if not source.get(MMAP_THRESHOLD_ENV) and libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1:
        done["mmap_threshold"] = MMAP_THRESHOLD
    if done:
        log.info("malloc: %s", done)
    return done


async def trim_async() -> bool:
    """`trim` on a thread: it walks every arena (milliseconds on a large heap) and the ctypes
    call releases the GIL, so the event loop goes on meanwhile."""
    return await asyncio.to_thread(trim)


def trim() -> bool:
    """Give the free pages of every arena back to the kernel (`malloc_trim(0)`); True if any."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


def stats() -> dict[str, int] | None:
    """The allocator's bytes: in use, free but kept in the arenas, mmapped; None without
    glibc's mallinfo2 (glibc < 2.33)."""
    libc = _libc()
    fn = getattr(libc, "mallinfo2", None) if libc is not None else None
    if fn is None:
        return None
    fn.restype = _MallInfo2
    info = fn()
    return {"in_use": int(info.uordblks), "free": int(info.fordblks), "mmapped": int(info.hblkhd)}
