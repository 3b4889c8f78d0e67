"""Producer-controlled text in log lines: one line, escapes visible (issue 32)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from streams.core.monitors import Semantics
from streams.shared.logsafe import LOG_TEXT_MAX, safe_for_log, safe_traceback
from tests.factories import run_start
from tests.unit.worker.harness import GatedStore, rig

FORGED = "r1\n2026-01-01 00:00:00 INFO [streams] forged line \x1b[31mred\x1b[0m"


def test_control_characters_are_escaped_and_printable_text_kept() -> None:
    assert safe_for_log("run-42 é 中") == "run-42 é 中"
    out = safe_for_log(FORGED)
    assert "\n" not in out and "\x1b" not in out
    assert "\\n2026" in out and "\\x1b[31mred\\x1b[0m" in out
    assert safe_for_log("a\u2028b\u202ec\td\r") == "a\\u2028b\\u202ec\\td\\r"
    assert safe_for_log("C:\\n") == "C:\\\\n"  # a literal backslash-n is not a newline escape


def test_long_values_are_cut_with_the_count_said() -> None:
    out = safe_for_log("x" * (LOG_TEXT_MAX + 50))
    assert out == "x" * LOG_TEXT_MAX + "...(+50 chars)"
    assert safe_for_log("y" * 1000, None) == "y" * 1000
    assert safe_for_log(b"\n") == "b'\\\\n'"  # not a str: its str(), escaped like any text

    class Bad:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert safe_for_log(Bad()) == "<unprintable Bad>"


def test_a_traceback_keeps_its_frames_and_chain_and_escapes_every_message() -> None:
    def fail() -> None:
        try:
            raise KeyError("k")
        except KeyError as exc:
            raise ValueError(FORGED) from exc

    with pytest.raises(ValueError) as info:
        fail()
    text = safe_traceback(info.value)
    assert "\x1b" not in text and not any(line.startswith("2026") for line in text.splitlines())
    assert text.count("Traceback (most recent call last):") == 2 and "direct cause" in text
    assert ", in fail" in text and text.endswith("ValueError: " + safe_for_log(FORGED, 2000))


def test_a_run_id_with_a_newline_and_ansi_escapes_is_logged_on_one_line(
    sem: Semantics, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker logs an evicted run's id and an internal error's message (which may quote
    the event); neither may start a forged line or colour the operator's terminal."""

    async def go() -> None:
        r = rig(sem, GatedStore(), idle_s=60.0)
        await r.feed(run_start(FORGED))
        await r.drain()
        r.now[0] += 61
        assert await r.retention.sweep(r.now[0]) == 1
        key, evict, _ = r.steps_sent[0]
        await r.feed(evict, key=key)
        assert r.runs.lookup(FORGED) is None

        async def refused(key: bytes, *_: object, **__: object) -> None:
            raise ValueError(f"broker refused the record of {key.decode()}")

        r.processor._send_decision = refused
        await r.feed(run_start(FORGED))
        await r.drain()

    with caplog.at_level(logging.INFO):
        asyncio.run(go())
    logged = [rec.getMessage() for rec in caplog.records if "r1" in rec.getMessage()]
    evicted = [m for m in logged if m.startswith("evicted run")]
    assert evicted == [f"evicted run {safe_for_log(FORGED)} (idle)"]
    assert evicted[0].startswith("evicted run r1\\n2026")
    failed = [m for m in logged if m.startswith("internal error at stage send")]
    assert len(failed) == 1 and "\\x1b[31mred" in failed[0].splitlines()[0]
    # the traceback logged with it ends in the same message, escaped
    assert failed[0].splitlines()[-1].startswith("ValueError: broker refused the record of r1\\n2026")
    for m in logged:
        assert "\x1b" not in m and not any(line.startswith("2026") for line in m.splitlines())
