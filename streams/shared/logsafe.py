"""Producer-controlled text made safe to put in a log line.

Run ids, org ids, action names, pattern ids and exception messages that quote them come from
whoever writes to the steps topic (or the pattern store). Logged raw, a newline starts a
forged log line and ANSI escapes rewrite the operator's terminal. Every log call that includes
such text passes it through `safe_for_log`: one line, control characters visible as escapes,
length cut. A traceback's last line is the exception's message, which may quote the event:
`safe_traceback` formats one with every message escaped (the frames are our own code).
"""

from __future__ import annotations

import traceback

LOG_TEXT_MAX = 200  # characters of one logged value kept; the rest is counted, not shown


def _escape(ch: str) -> str:
    if ch == "\\":
        return "\\\\"  # so an escape in the text cannot pass for one of ours
    if ch.isprintable():
        return ch
    return repr(ch)[1:-1]  # '\n' -> \n, ESC -> \x1b, U+2028 -> \u2028


def safe_for_log(value: object, limit: int | None = LOG_TEXT_MAX) -> str:
    """`value` as one printable line: control, format and separator characters (newlines,
    ESC, bidi controls, U+2028) repr-escaped, backslashes doubled, cut at `limit` characters
    (None: never) with the number cut said."""
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:  # an object's __str__ may raise: logging must not
        text = f"<unprintable {type(value).__name__}>"
    cut = 0
    if limit is not None and len(text) > limit:
        cut = len(text) - limit
        text = text[:limit]
    if "\\" in text or not text.isprintable():
        text = "".join(_escape(ch) for ch in text)
    return f"{text}...(+{cut} chars)" if cut else text


_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def safe_traceback(exc: BaseException) -> str:
    """`traceback.format_exception(exc)` with each exception's message through
    `safe_for_log` (log it as text instead of passing `exc_info`)."""
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    link = ""
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append((e, link))
        if e.__cause__ is not None:
            e, link = e.__cause__, _CAUSE
        else:
            e, link = (None if e.__suppress_context__ else e.__context__), _CONTEXT
    parts: list[str] = []
    for e, link in reversed(chain):
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_tb(e.__traceback__))
        parts.append(f"{type(e).__qualname__}: {safe_for_log(e, 2000)}\n")
        parts.append(link)
    return "".join(parts).rstrip("\n")
