r"""Regex scans that stay linear where one alternation would not.

A pattern such as `\b[\w-]+\.[a-z]{2,4}\b` (a file or host name) retries at every word boundary
of a long `a-b-c-...` run and rescans the run each time: quadratic in the run's length, so a few
KB of such text from one agent cost the worker seconds. Whether it matches depends only on what
follows the run, so `leftmost` decides that once per run and finds the same matches, in the same
order, as `re.finditer` on `head|\b[\w-]+TAIL` would (the name alternative last, as written).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_BOUNDARY = re.compile(r"\b")


def names(tail: str) -> str:
    r"""The pattern `leftmost` takes for names `\b[\w-]+TAIL`: each maximal run of name
    characters that TAIL follows, TAIL as group 1 (the run starts only where a run starts, so
    the scan is linear)."""
    return rf"(?<![\w-])[\w-]++(?=({tail}))"


def leftmost(
    head: re.Pattern[str], name: re.Pattern[str], text: str
) -> Iterator[tuple[int, int, re.Match[str] | None]]:
    r"""(start, end, match) of `head|\b[\w-]+TAIL` over `text`, leftmost first and not
    overlapping, as `finditer` finds them, with `name` compiled from `names(TAIL)`; `match` is
    None for a name. `head` never matches an empty string."""
    # A name starts at any word boundary of its run and ends where TAIL ends after the run:
    # the same end from every start in the run, so one match per run decides.
    runs = [(r.start(), r.end(), r.end(1)) for r in name.finditer(text)]
    heads = head.finditer(text)
    if not runs:  # no name anywhere: the head's matches alone
        for only in heads:
            yield only.start(), only.end(), only
        return
    m: re.Match[str] | None = next(heads, None)
    pos = i = 0
    while True:
        if m is not None and m.start() < pos:  # a name took the text where it starts
            heads = head.finditer(text, pos)
            m = next(heads, None)
        hs = m.start() if m is not None else len(text) + 1
        hit: tuple[int, int] | None = None
        while i < len(runs) and runs[i][0] < hs:
            s, e, te = runs[i]
            if e > pos:
                hi = min(e, hs)  # the head match wins from hs on
                b = _BOUNDARY.search(text, max(s, pos), hi)
                if b is not None and b.start() < hi:
                    hit = (b.start(), te)
                    break
                if e > hs:
                    break
            i += 1
        if hit is not None:
            yield hit[0], hit[1], None
            pos = hit[1]
        elif m is not None:
            yield m.start(), m.end(), m
            pos = m.end()
            m = next(heads, None)
        else:
            return
