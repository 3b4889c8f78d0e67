"""The opt-in heap tracer: off unless asked for, and a report that names what grew."""

from __future__ import annotations

import os
import sys
import tracemalloc
from pathlib import Path

import pytest

from streams.runtime.memtrace import FILE_ENV, INTERVAL_ENV, MemTracer, rss_bytes, start_from_env


def test_off_unless_the_variable_names_a_file() -> None:
    assert start_from_env("worker", {}) is None
    assert start_from_env("worker", {FILE_ENV: ""}) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_rss_of_this_process_and_of_none() -> None:
    assert rss_bytes() > 1_000_000
    assert rss_bytes(2**22 + 7) == 0  # no such process


def test_a_report_names_the_site_that_grew(tmp_path: Path) -> None:
    was_tracing = tracemalloc.is_tracing()
    tracer = MemTracer(tmp_path / "m.txt", interval_s=3600)
    if not was_tracing:
        tracemalloc.start(4)
    try:
        tracer.dump()  # the baseline: largest sites
        kept = [bytearray(1000) for _ in range(2000)]  # ~2 MB from this line
        tracer.dump()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    text = (tmp_path / "m.txt").read_text()
    assert text.count("== t=") == 2 and "rss=" in text and "traced=" in text
    growth = text.split("-- growth since the first snapshot", 1)[1].splitlines()[1]
    assert "test_memtrace.py" in growth and growth.lstrip().startswith("+")
    assert len(kept) == 2000


def test_started_from_the_environment_writes_per_process(tmp_path: Path) -> None:
    was_tracing = tracemalloc.is_tracing()
    tracer = start_from_env("role", {FILE_ENV: str(tmp_path / "sub" / "trace"), INTERVAL_ENV: "bad"})
    try:
        assert tracer is not None and tracer.interval_s == 300.0  # unparsable: the default
        assert tracer.path == tmp_path / "sub" / f"trace.role.{os.getpid()}.txt"
        assert tracemalloc.is_tracing()
    finally:
        assert tracer is not None
        tracer.stop()
        if not was_tracing:
            tracemalloc.stop()
