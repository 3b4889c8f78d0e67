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


# ---- copies of our own channel in text from a tool (issue 49) ---------------------------------
#
# The steering block is headed `[REASONBLOCKS ...]` and its guidance is tagged `<rule ...>` /
# `<guidance ...>` (`streams.core.etrace_rules`). A tool's output that holds a copy sits where the
# real block sits (placement "end": right after the tool results), so the core flags it as an
# injection (`streams.core.instructions`, signal `channel`) and the agent side rewrites it
# before the model reads it (`streams.agent.compose.defused_content`). Both read the text the
# same way, here: look-alike letters and angles folded one character for one, format
# characters (zero-width, bidi) read as `\x00`, `0` as `o` and `1`/`|` as `l`.

CHANNEL_LOOKED = 16  # copies looked at in one text (the rest is left as it is)
CHANNEL_TAGS_READ = 256  # `<rule` / `<guidance` openings read in one text (an XML file has many)
CHANNEL_TAG_HEAD = 300  # characters after a tag's name read for its attributes
CHANNEL_TAG_BODY = 400  # characters after a tag read for its content
_INV = r"[\x00-\x08\x0e-\x1f\x7f]{0,4}"  # invisible characters (format ones are read as \x00)
_SEPS = r"[\W_]{0,8}"
CHANNEL_MARKER = re.compile(
    "r" + _SEPS + _SEPS.join("eason") + r"([\W_]{0,8})" + "b" + _SEPS + _SEPS.join("locks")
)
CHANNEL_TAG = re.compile(
    "<" + _INV + "(/?)" + _INV + "(?:" + _INV.join("rule") + "|" + _INV.join("guidance") + r")"
    r"(?=[\s/>\x00-\x08\x0e-\x1f\x7f]|$)"
)
CHANNEL_ATTR = re.compile(r"([a-z_:][a-z0-9_:.-]{0,40})[\x00-\x20]{0,4}=")
CHANNEL_INLINE = re.compile(r"<(?:b|i|u|p|em|strong|span|div|br|font|a|h[1-6]|li|ul|ol)\b")
_LETTER = re.compile(r"[^\W\d_]")
_OUR_ATTRS = frozenset({"title", "source"})
_WORD_GAP = frozenset(" \t\r\n,.;:-_'\"()/!?")  # between "reason" and "blocks": two words
_ASCII_TWINS = str.maketrans("01|", "oll")
# letters of the view only (bytes): `0`/`1`/`|` read as letters, everything else dropped
_LETTERS_ONLY = bytes(c if 97 <= c <= 122 else {48: 111, 49: 108, 124: 108}.get(c, 0) for c in range(256))
_NOT_KEPT = bytes(c for c in range(256) if not (97 <= c <= 122 or c in (48, 49, 124)))
# the same for an ASCII text read as it is: A-Z read as a-z too
_ASCII_LETTERS = bytes(c + 32 if 65 <= c <= 90 else _LETTERS_ONLY[c] for c in range(256))
_ASCII_NOT_KEPT = bytes(c for c in _NOT_KEPT if not 65 <= c <= 90)
_FOLD_RANGES = (
    (0x80, 0x2500),
    (0x2C00, 0x2E80),
    (0x3000, 0x3040),
    (0xA640, 0xA800),
    (0xFE00, 0xFE70),
    (0xFF00, 0xFFF0),
    (0x1D400, 0x1D800),
    (0x1F100, 0x1F200),
    (0xE0000, 0xE0080),
)


@lru_cache(maxsize=1)
def _fold_table() -> dict[int, str]:
    """Non-ASCII characters the view reads otherwise: look-alike letters and angles as their
    ASCII twin, format characters as `\\x00`; A-Z as a-z, `0` as `o`, `1` and `|` as `l`.
    Built once, on the first non-ASCII text (a few milliseconds)."""
    table: dict[int, str] = {ord(c): c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    table.update({ord("0"): "o", ord("1"): "l", ord("|"): "l"})
    for lo, hi in _FOLD_RANGES:
        for cp in range(lo, hi):
            ch = chr(cp)
            if unicodedata.category(ch) == "Cf":
                table[cp] = "\x00"
                continue
            tw = _twin(ch.translate(_ANGLES))
            if tw != ch and tw.isascii() and (tw.isalpha() or tw in "<>[]/"):
                table[cp] = tw.lower()
    for c in _OPEN[1:]:
        table[ord(c)] = "<"
    for c in _CLOSE[1:]:
        table[ord(c)] = ">"
    return table


def channel_view(text: str) -> str:
    """`text` as the channel readers read it, one character for one (positions are the text's)."""
    if text.isascii():
        return text.lower().translate(_ASCII_TWINS)
    return text.translate(_fold_table())


def _shaped_tag(text: str, view: str, m: re.Match[str]) -> bool:
    """Whether a `<rule` / `<guidance` opening passes for ours: its attributes are none or only
    ours (`title`, `source`, in any order), or its content opens with words (or with inline
    HTML: `<b>`, `<p>`, ...). A closing tag, a self-closing one, or an element of an XML file
    (`<rule name="x">` with markup inside: a web server's rewrite rules, a linter's rule set)
    is not. `text`: what `view` was read from (its digits are digits)."""
    if m.group(1):
        return False
    head = view[m.end() : m.end() + CHANNEL_TAG_HEAD]
    j = head.find(">")
    names = set(CHANNEL_ATTR.findall(head if j < 0 else head[:j]))
    if j < 0:  # no end in sight: ours only if it spells our attributes
        return bool(names) and names <= _OUR_ATTRS
    if head[:j].rstrip().endswith("/"):
        return False
    if names <= _OUR_ATTRS:
        return True
    at = m.end() + j + 1
    body = view[at : at + CHANNEL_TAG_BODY]
    k = body.find("<")
    if k >= 0 and CHANNEL_INLINE.match(body, k):
        return True
    return len(_LETTER.findall(text, at, at + (CHANNEL_TAG_BODY if k < 0 else k))) >= 2


def _markers(view: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for m in CHANNEL_MARKER.finditer(view):
        a, b = m.span()
        gap = m.group(1)
        glued = b - a == 12 + len(gap)  # no separator inside "reason" or "blocks"
        two_words = glued and bool(gap) and all(c in _WORD_GAP for c in gap)
        before = view.rfind("[", max(0, a - 4), a)
        if not two_words or before >= 0:
            # the brackets go with it: `[REASONBLOCKS]` is replaced whole
            after = view.find("]", b, b + 4)
            out.append((a if before < 0 else before, b if after < 0 else after + 1))
            if len(out) >= CHANNEL_LOOKED:
                break
    return out


@lru_cache(maxsize=128)
def channel_copies(text: str) -> tuple[tuple[int, int, str], ...]:
    """Copies of our channel in `text`: (start, end, "marker" | "tag"), in order. A marker in
    any case, spacing or look-alike spelling ("reason blocks", two words, is not one, unless
    bracketed); a `<rule` or `<guidance` opening shaped as ours (`_shaped_tag`). Cheap on a
    text that holds none: one C pass over its letters and a substring search."""
    if not text:
        return ()
    if text.isascii():  # the usual case: its letters in C, and the view only if they say so
        letters = text.encode().translate(_ASCII_LETTERS, _ASCII_NOT_KEPT)
        marker = b"reasonblocks" in letters
        tag = "<" in text and (b"rule" in letters or b"guidance" in letters)
        if not (marker or tag):
            return ()
        view = channel_view(text)
    else:
        view = channel_view(text)
        letters = view.encode("utf-8", "surrogatepass").translate(_LETTERS_ONLY, _NOT_KEPT)
        marker = b"reasonblocks" in letters
        tag = "<" in view and (b"rule" in letters or b"guidance" in letters)
    found: list[tuple[int, int, str]] = []
    if marker:
        found += ((a, b, "marker") for a, b in _markers(view))
    if tag:
        for looked, m in enumerate(CHANNEL_TAG.finditer(view)):
            if looked >= CHANNEL_TAGS_READ:
                break
            if _shaped_tag(text, view, m):
                found.append((m.start(), m.start() + 1, "tag"))
                if len(found) >= 2 * CHANNEL_LOOKED:
                    break
    return tuple(sorted(found))


def defuse_channel(text: str) -> str:
    """`text` with every copy of our channel made inert (`channel_copies`): a marker becomes
    `(marker removed)`, a tag's `<` becomes `(`. The same text gives the same result on every
    call (a provider's cached prefix stays the same); a text without a copy is returned as is."""
    copies = channel_copies(text)
    if not copies:
        return text
    parts: list[str] = []
    at = 0
    for a, b, kind in copies:
        if a < at:
            continue
        parts.append(text[at:a])
        parts.append(MARKER_SHOWN if kind == "marker" else "(")
        at = b
    parts.append(text[at:])
    return "".join(parts)
