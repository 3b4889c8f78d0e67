"""The worker's malloc settings: two arenas and a fixed mmap threshold unless glibc was told
otherwise, heap pages handed back, and the statistics the rb_malloc_bytes gauge shows."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from streams.runtime import allocator

pytestmark = pytest.mark.skipif(not allocator.available(), reason="glibc malloc only")


def test_statistics_see_an_allocation_and_its_release() -> None:
    before = allocator.stats()
    assert before is not None and set(before) == {"in_use", "free", "mmapped"}
    blocks = [bytearray(100_000) for _ in range(50)]  # under the mmap threshold: in the heap
    during = allocator.stats()
    assert during is not None and during["in_use"] >= before["in_use"] + 4_000_000
    del blocks
    assert asyncio.run(allocator.trim_async()) in (True, False)  # ran, on a thread


def test_configure_sets_both_unless_glibc_has_its_own_variables() -> None:
    # In a fresh interpreter: mallopt changes the process for good.
    code = "from streams.runtime import allocator; print(sorted(allocator.configure().items()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert (
        out.strip()
        == f"[('arena_max', {allocator.DEFAULT_ARENA_MAX}), ('mmap_threshold', {allocator.MMAP_THRESHOLD})]"
    )
    env = {allocator.ARENA_MAX_ENV: "4", allocator.MMAP_THRESHOLD_ENV: "65536"}
    code = f"from streams.runtime import allocator; print(allocator.configure({env!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "{}"
    off = {allocator.TUNING_ENV: "off"}
    code = f"from streams.runtime import allocator; print(allocator.configure({off!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "{}"


def test_tuning_is_on_unless_switched_off() -> None:
    assert allocator.tuning({}) and allocator.tuning({allocator.TUNING_ENV: "1"})
    assert not any(allocator.tuning({allocator.TUNING_ENV: v}) for v in ("0", "off", "False", " no "))
