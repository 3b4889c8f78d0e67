"""The fast readings of a result (the floor's units, the loop signal's lines, the page a call
acted on) give exactly what the plain line-by-line readings they replaced gave: decisions and
stored states depend on every byte. Each reference below is the earlier code, kept verbatim,
but for ids (`IDS`, issue 48), masked first in every reading."""

from __future__ import annotations

import random
import re
import zlib
from types import SimpleNamespace
from typing import Any

from streams.core.monitors import progress
from streams.core.monitors.loop import signal
from streams.core.reading.features import IDS, VOLATILE
from streams.core.reading.observation import window

PIECES = [
    "12", "0", "7\t", "3:", "4|", " ", "  ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c",
    "\x1f", "\x85", "\u2028", "\u0130", "\u01c5", "\u00e9", "\u00b2", "\u0663", "\u00df", "\ufb01",
    "[Command finished with exit code 0]", "[Running x]", "<output>", "</output>",
    "<returncode>0</returncode>", "path/to/f.py:12:", "a.py:3-", "x:", ":1", "Results for 'foo bar'",
    '"foo bar"', "foo bar", ": foo bar", "FOO", "Bar", "12 ms", "0x1f2e", "pid=123",
    "2024-01-02 12:00", "12:00:00", "\ud800", "abc", "ABC", "-", ".", "/", "_", "\x00",
    "Address: ", "URL:", "https://a.b/c", "file:///x", "://", "search",
    "550e8400-e29b-41d4-a716-446655440000", "3f2a9c1e4b5d", "DEADBEEF01", "tmpk3j2_x9a", "tmp",
    "2024-01-02T12:00:13.5Z", "1767225637.25", "deadbeef",
]  # fmt: skip
SAIDS = ["", "foo bar", "foo", "x:", "12", "\u00e9", "bar"]


def _texts(seed: int, n: int) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        t = "".join(
            rnd.choice(PIECES) if rnd.random() < 0.7 else chr(rnd.randrange(32, 127))
            for _ in range(rnd.randrange(0, 60))
        )
        if i % 3 == 0:  # the common case: an ASCII result
            t = t.encode("ascii", "ignore").decode()
        if i % 100 == 0:  # a line past LINE_CHARS, a result past the read window
            t = "a:" * rnd.randrange(80, 250) + t + "\n12\tx" * rnd.randrange(0, 900)
        out.append(t)
    return out


def _masked(text: str) -> str:
    return VOLATILE.sub("#", IDS.sub("#", text))


def _old_result_units(obs: str, said: str) -> tuple[bytes, ...]:
    text = _masked(obs)
    out: list[bytes] = []
    status = progress.STATUS_LINE.match
    for ln in text.splitlines():
        t = ln.lstrip()
        if not t or (t[0] in "[<" and status(t.rstrip())):
            continue
        t = " ".join(progress._unnumbered(t[: progress.LINE_CHARS]).lower().split())
        if said and said in t and progress._quotes(t, said):
            t = t.replace(said, "\x00")
            if not any(c.isalnum() for c in t):
                continue
        if not t:
            continue
        out.append(t.encode("utf-8", "replace"))
        if len(out) >= progress.UNITS_PER_STEP:
            break
    return tuple(out)


def _old_written(text: str) -> list[bytes]:
    out: list[bytes] = []
    for ln in _masked(text[: progress.INPUT_READ]).lower().splitlines():
        t = ln.lstrip()
        t = " ".join(progress._unnumbered(t[: progress.LINE_CHARS]).split()) if t else ""
        if t:
            out.append(t.encode("utf-8", "replace"))
            if len(out) >= progress.UNITS_PER_STEP:
                break
    return out


def _old_result_lines(act_text: str, obs: str) -> list[tuple[str, int]]:
    said = signal.salient(act_text.split(":", 1)[1].strip() if ":" in act_text else "")
    said = said if len(said) >= 4 else ""
    out = []
    text = window(obs)
    masked = signal.NUMBERS.sub("#", IDS.sub("#", text)).lower().splitlines()
    for ln, low in zip(text.splitlines(), masked, strict=True):
        t = ln.strip()
        if (
            t
            and not signal.STATUS_LINE.match(t)
            and not (said and said in t and len(t) <= len(said) + signal.ECHO_LINE_EXTRA)
        ):
            out.append((t, zlib.crc32(" ".join(low.split()).encode("utf-8", "replace"))))
    return out


def _old_place(f: Any) -> str:
    if f.is_error or not f.whole_observation:
        return ""
    asked = signal.salient(f.input) if f.input.startswith("{") else f.input
    for ln in f.whole_observation[: signal.PLACE_CHARS].strip().splitlines()[: signal.PLACE_LINES]:
        t = ln.strip()
        label = signal.PLACE_LABEL.match(t)
        link = signal.LINK.search(label[1] if label else t)
        where = link[0] if link else label[1].strip() if label else ""
        if where:
            return (
                ""
                if asked.strip() and (asked.strip() in where or where in asked)
                else signal.short_hash(where)[:8]
            )
    return ""


def _or_error(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ValueError:  # lower case that adds a line end: both readings refuse alike
        return "error"


def test_floor_units_are_the_line_by_line_units() -> None:
    rnd = random.Random(7)
    for t in _texts(1, 1500):
        said = rnd.choice(SAIDS)
        assert progress._result_units(t, said) == _old_result_units(t, said), (t, said)


def test_written_units_are_the_line_by_line_units() -> None:
    for t in _texts(2, 1500):
        t = t.lstrip("{")  # a structured input is parsed first (not read here)
        f: Any = SimpleNamespace(input=t)
        assert progress.written_units(f) == _old_written(t), t


def test_result_lines_are_the_line_by_line_lines_and_hashes() -> None:
    rnd = random.Random(9)
    acts = ["bash: ", "search: ", "x", 'tool: {"query": "']
    for t in _texts(3, 1500):
        act = rnd.choice(acts) + rnd.choice(SAIDS)
        f: Any = SimpleNamespace(act_text=act, whole_observation=t)
        # asked twice: the second answer comes from the memory of recent results
        for _ in range(2):
            assert _or_error(signal.result_lines, f) == _or_error(_old_result_lines, act, t), (act, t)


def test_place_is_found_as_before() -> None:
    rnd = random.Random(11)
    inputs = ["", "search", "https://a.b/c", '{"url": "https://a.b/c"}', '{"q": "a.b"}', "a.b/c"]
    for t in _texts(4, 1500):
        f: Any = SimpleNamespace(is_error=rnd.random() < 0.05, whole_observation=t, input=rnd.choice(inputs))
        assert signal._place(f) == _old_place(f), (t, f.input)


def test_result_key_packs_the_hashes_as_before() -> None:
    rnd = random.Random(13)
    for _ in range(300):
        lines = [("x" * rnd.randrange(0, 60), rnd.randrange(0, 2**32)) for _ in range(rnd.randrange(0, 30))]
        f: Any = SimpleNamespace(whole_observation="o", modifies=rnd.random() < 0.3, obs_hash="abcdef0123")
        old = (
            f"{zlib.crc32(b''.join(h.to_bytes(4, 'big') for _, h in lines)):08x}"
            if sum(len(t) for t, _ in lines) >= signal.DIGITS_MASKED_FROM or f.modifies
            else "abcdef01"
        )
        assert signal._result_key(f, lines, False, None) == old


def test_shape_masks_digits_as_before() -> None:
    for t in _texts(5, 500):
        masked = re.sub(r"\d+", "#", t)
        assert signal._shape("bash", t) == signal.short_hash(f"bash\x00{masked}")
