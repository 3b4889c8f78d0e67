"""Text from events, made safe to stand in a steering text: the one way it gets there.

Tool output, thoughts, tool inputs, agent names, file paths, a task, a pattern's fields: whoever
controls a web page, an e-mail or a file the agent read controls them. A steering text lands in
the system prompt (or OpenAI Agents' instructions, Claude's additionalContext), with its
authority; copied there raw, such text could close our quote, forge the `[REASONBLOCKS]`
marker or a `<rule>` tag, and speak to the model as we do. So every event-derived piece goes
through `clean` (or `fenced`, which also sets it apart):

- cut to a short bound (its raw input too, before any work: cost stays bounded);
- on one line, with control, format (bidi, zero-width), private-use and separator characters
  removed;
- the marker in any case, spacing or look-alike spelling replaced by `(marker removed)`;
- tag-like markup (`<rule`, `</x`, `<!`, fullwidth and other angle look-alikes) turned into
  `(rule`, so no tag can be opened or closed;
- backticks replaced by `'`: `fenced` wraps the result in backticks, a fence it cannot close.

Steering texts name things where they can (a tool, a program, a file's basename) and put
quoted data only in a fence, never where the steering text's own instruction goes.

`scrub` is the backstop for our own composed texts (a monitor's, a plugin's, the ladder's):
the same removals with newlines kept and an unpaired backtick dropped; `cut` shortens such a
text without splitting a fence. Standard library only: the core, the worker and the agent side
(stop reasons) all use it.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

QUOTE_MAX = 80  # characters of one quoted piece, unless the caller says fewer or more
RAW_FACTOR = 8  # raw characters looked at per character kept (bounds the work on huge input)
MARKER_SHOWN = "(marker removed)"
ELLIPSIS = "…"

# Letters that look like those of the marker (Cyrillic, Greek, Latin small capitals): matched
# as their Latin twin, one character for one, so positions stay those of the original.
_TWINS = str.maketrans(
    {
        **dict.fromkeys("\u0430\u0410\u03b1\u0391\u1d00", "a"),
        **dict.fromkeys("\u0432\u0412\u03b2\u0392\u0299", "b"),
        **dict.fromkeys("\u0441\u0421\u1d04", "c"),
        **dict.fromkeys("\u0435\u0415\u03b5\u0395\u1d07", "e"),
        **dict.fromkeys("\u0131", "i"),
        **dict.fromkeys("\u043a\u041a\u03ba\u039a\u1d0b", "k"),
        **dict.fromkeys("\u029f\u04cf\u0406", "l"),
        **dict.fromkeys("\u041d\u03bd\u039d\u0274", "n"),
        **dict.fromkeys("\u043e\u041e\u03bf\u039f\u1d0f", "o"),
        **dict.fromkeys("\u0433\u03c1\u03a1\u0280", "r"),
        **dict.fromkeys("\u0455\u0405\ua731", "s"),
        "|": "l",
        "1": "l",
    }
)
_SEP = r"[\W_]*"  # anything but a letter or digit between the marker's letters
MARKER = re.compile(_SEP.join("reasonblocks"))  # matched on the lower-case twin

# Angle brackets and their look-alikes (fullwidth, small, mathematical, canadian syllabics).
_OPEN = "<\u2039\u2329\u3008\u27e8\u276e\u276c\u29fc\u02c2\u1438\uff1c\ufe64"
_CLOSE = ">\u203a\u232a\u3009\u27e9\u276f\u276d\u29fd\u02c3\u1433\uff1e\ufe65"
_ANGLES = str.maketrans({**dict.fromkeys(_OPEN[1:], "<"), **dict.fromkeys(_CLOSE[1:], ">")})
# An opening angle that starts markup: a letter, `/`, `!` or `?` right after it (as in XML;
# `a < b` is no tag, and stays).
TAG = re.compile(r"<(?=[/!?]|[^\W\d_])")
_SPACE = re.compile(r"\s+")

# Characters that never stay: controls, format (bidi, zero-width, tags), surrogates, private
# use, unassigned; line and paragraph separators become spaces.
_DROP = frozenset(("Cc", "Cf", "Cs", "Co", "Cn"))
_BLANK = frozenset(("Zl", "Zp"))


def _plain(text: str, keep_newlines: bool) -> str:
    """Angle look-alikes folded; control, format and private-use characters out."""
    t = text.translate(_ANGLES)
    if t.isascii() and t.isprintable():
        return t
    out: list[str] = []
    for ch in t:
        if ch.isprintable() or (ch == "\n" and keep_newlines):
            out.append(ch)
        elif ch in "\t\n\r\x0b\x0c\x85" or unicodedata.category(ch) in _BLANK:
            out.append(" ")
        elif unicodedata.category(ch) not in _DROP:
            out.append(ch)  # a space kind (no-break, thin): str.isprintable() says no
    return "".join(out)


@lru_cache(maxsize=4096)
def _twin(ch: str) -> str:
    """One character as the plain lower-case letter it passes for (a fullwidth R, a Cyrillic
    e, a small capital R), or itself: always one character, so positions stay the same."""
    f = unicodedata.normalize("NFKC", ch)
    f = f.lower() if len(f) == 1 else ch.lower()
    return f.translate(_TWINS) if len(f) == 1 else ch


def folded(t: str) -> str:
    """`t` in lower case with every look-alike letter (fullwidth, Cyrillic, Greek, small
    capitals) read as its Latin twin, one character for one (`|` and `1` read as `l`): what a
    reader of words sees in it."""
    return t.lower().translate(_TWINS) if t.isascii() else "".join(_twin(c) for c in t)


def _defuse(t: str) -> str:
    """The marker, in any spelling, replaced; markup openings turned into parentheses."""
    twin = folded(t)
    spans = [m.span() for m in MARKER.finditer(twin)]
    if spans:
        parts: list[str] = []
        at = 0
        for a, b in spans:
            parts.append(t[at:a])
            parts.append(MARKER_SHOWN)
            at = b
        parts.append(t[at:])
        t = "".join(parts)
    return TAG.sub("(", t) if "<" in t else t


def _shorten(t: str, n: int) -> str:
    return t if len(t) <= n else t[: max(n - 1, 0)].rstrip() + ELLIPSIS


def clean(text: object, n: int = QUOTE_MAX) -> str:
    """Event text as data: one line of at most `n` characters (with `…` when cut), no control
    or format character, no marker, no markup opening, no backtick. Put it in a steering
    text inside a fence (`fenced`) or where a name goes, never as the text's instruction."""
    t = text if isinstance(text, str) else str(text)
    t = t[: max(n, 1) * RAW_FACTOR]
    t = _defuse(_plain(t, keep_newlines=False)).replace("`", "'")
    t = _SPACE.sub(" ", t).strip()
    return _shorten(t, n)


def fenced(text: object, n: int = QUOTE_MAX) -> str:
    """`clean(text, n)` set apart in backticks (`(empty)` when nothing is left)."""
    t = clean(text, n)
    return f"`{t}`" if t else "(empty)"


def scrub(text: str, n: int | None = None) -> str:
    """Our own composed steering text made safe whatever went into it (a monitor's or a
    plugin's, the ladder's): newlines kept, every other control and format character out, no
    marker, no markup opening, and an unpaired backtick made a quote mark. `n`: cut first."""
    t = text[:n] if n is not None else text
    t = _defuse(_plain(t, keep_newlines=True))
    if t.count("`") % 2:
        i = t.rfind("`")
        t = t[:i] + "'" + t[i + 1 :]
    return t


def cut(text: str, n: int) -> str:
    """Our own text on one line, at most `n` characters, never cut inside a fence: a cut that
    would leave a backtick open ends before that fence."""
    t = " ".join(text.split())
    if len(t) <= n:
        return t
    t = t[: max(n - 1, 0)]
    if t.count("`") % 2:
        t = t[: t.rfind("`")]
    return t.rstrip() + ELLIPSIS
