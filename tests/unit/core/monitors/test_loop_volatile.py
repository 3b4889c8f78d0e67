"""One varying line does not hide a loop (issue 48, item 8): the same call failing or printing
the same, but for a value printed anew each run (a timestamp, a UUID, a temp dir, a hex id, an
epoch time, a random word), is caught by step 5, whatever the error's shape; a result that
really changed (a count going down, a new error, a longer message) still differs."""

from __future__ import annotations

import pytest

from streams.core.reading.features import extract, mask_volatile

from .trajectories import Run, bash

LOOP = "semantic_loop"
CALL = "python -c \"import cfg; cfg.load('app.ini')\""
WORDS = ["banana", "falcon", "meadow", "copper", "lantern", "orchid", "pebble", "quartz", "saffron", "tundra"]
WORDS += ["velvet", "walnut"]


def varying(kind: str, i: int) -> str:
    """The value of run i: each differs from every other."""
    return {
        "timestamp": f"2026-12-01T23:{10 + i:02d}:{(7 * i) % 60:02d}.{123456 + 7919 * i}Z",
        "epoch": f"{1767225600 + 37 * i}.{(389 * i) % 1000:03d}",
        "uuid": f"{0x550E8400 + 977 * i:08x}-e29b-41d4-a716-{0x446655440000 + 104729 * i:012x}",
        "temp dir": f"/tmp/tmp{'k3j2x9a_q4zr8w1m'[i % 8 : i % 8 + 7]}{i % 10}",
        "hex id": f"{0x3F2A9C1E4B5D6E7F + 7919 * i * 0x10001:016x}",
        "random word": WORDS[i % len(WORDS)],
    }[kind]


KINDS = ["timestamp", "epoch", "uuid", "temp dir", "hex id", "random word"]
# A traceback with no source line: `python -c` has no file to quote.
SOURCELESS = (
    "Traceback (most recent call last):\n"
    '  File "<string>", line 1, in <module>\n'
    "ValueError: could not convert string to float: 'abc'\n"
)
REPORT = (
    "loading config from app.ini\nfound 3 sections\nparsing section [main]\nno handler for section main\n"
)


def _first_fire(sem, outputs: list[str], error: bool) -> int | None:
    run = Run(sem, task="Load the app config")
    for n, out in enumerate(outputs, start=1):
        if LOOP in run.feed(bash(CALL, out, error=error)).fired:
            return n
    return None


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("error", [True, False], ids=["flagged", "not flagged"])
def test_a_failing_call_with_one_varying_line_and_a_sourceless_traceback_is_caught_by_step_5(
    sem, kind, error
):
    outputs = [f"run {varying(kind, i)}\n{SOURCELESS}" for i in range(12)]
    assert len(set(outputs)) == 12
    first = _first_fire(sem, outputs, error)
    assert first is not None and first <= 5, (kind, first)


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_report_with_one_varying_line_is_caught_by_step_5(sem, kind):
    outputs = [f"session {varying(kind, i)}\n{REPORT}" for i in range(12)]
    first = _first_fire(sem, outputs, False)
    assert first is not None and first <= 5, (kind, first)


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "random word"])
def test_an_error_line_that_holds_a_volatile_token_is_one_error(sem, kind):
    """The token inside the error itself: masked there too, so the error repeats."""
    outputs = [
        'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
        f"FileNotFoundError: [Errno 2] No such file or directory: '{varying(kind, i)}/app.ini'\n"
        for i in range(12)
    ]
    first = _first_fire(sem, outputs, True)
    assert first is not None and first <= 5, (kind, first)


def test_the_error_after_a_sourceless_frame_is_the_error_line():
    f = extract(
        {
            "step": 1,
            "action": "bash",
            "action_input": "python -c 'x'",
            "observation": SOURCELESS,
            "observation_is_error": True,
        },
        20_000,
    )
    assert f.error_line == "ValueError: could not convert string to float: 'abc'"
    # a frame with its source: the source line is still not the error
    framed = SOURCELESS.replace("<module>\n", "<module>\n    ValueError: raised(here)\n").replace(
        "<string>", "app.py"
    )
    g = extract(
        {
            "step": 1,
            "action": "bash",
            "action_input": "python app.py",
            "observation": framed,
            "observation_is_error": True,
        },
        20_000,
    )
    assert g.error_line.startswith("ValueError: could not convert")


@pytest.mark.parametrize("kind", KINDS[:-1])
def test_each_volatile_token_is_masked(kind):
    a, b = (mask_volatile(f"at {varying(kind, i)} done") for i in (1, 2))
    assert a == b and a in ("at # done", "at /tmp/# done")


# ---- a result that really changed still differs


def test_a_test_count_going_down_beside_a_varying_line_is_not_a_loop(sem):
    outputs = [
        f"run {varying('random word', i)}\ncollected 12 items\n\ntests/test_cfg.py ..F\n"
        f"========================= {12 - i} failed, {i} passed in 0.42s ========================="
        for i in range(8)
    ]
    assert _first_fire(sem, outputs, False) is None


def test_a_new_error_each_run_beside_a_varying_line_is_not_one_error(sem):
    keys = ["host", "port", "user", "password", "timeout", "retries", "scheme", "path"]
    outputs = [
        f"run {varying('uuid', i)}\n"
        'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
        f"KeyError: missing setting {keys[i]} in section main\n"
        for i in range(8)
    ]
    run = Run(sem, task="Load the app config")
    for out in outputs:
        res = run.feed(bash(CALL, out, error=True))
        assert not (res.text and ("same error" in res.text or "same result" in res.text)), res.text


def test_one_long_line_that_changed_is_a_different_result(sem):
    """A short line is a value of the moment; a long one is a message: that one changed."""
    outputs = [
        f"{REPORT}the parser stopped in section main at key number {i}: expected a value after the equals sign"
        f" but found {WORDS[i]} instead"
        for i in range(8)
    ]
    run = Run(sem, task="Load the app config")
    for out in outputs:
        res = run.feed(bash(CALL, out))
        assert not (res.text and "same result" in res.text), res.text
