"""What semantic_loop keeps of each step and how it compares results: the signal its rules read.

Each step becomes an `Entry` (its call, a key and a bottom-k sketch of its result's content
lines, whether it failed, edited, checked, echoed its input, was cut); the last WINDOW entries
and, per tool, the lines every result of that tool carries (a framework's footer, a wrapper,
the echoed command: its "frame", learnt per run and left out) are the run's state. Whether two
results say the same is measured here (`Window.overlap`); what that means for the run is the
rules' (`rules.py`). Every kept text is cut and hashed: the state is bounded whatever a step holds.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from operator import itemgetter
from typing import Any

from ...reading import grounding
from ...reading.features import StepFeatures, short_hash, sketch_similarity
from ...reading.observation import NOT_RUN_CHARS, cell_unparsed, not_run, window
from ...reading.scan import leftmost, names
from .. import waiting

WINDOW = 12
MESSAGE_CHARS = 160  # of a message step kept to compare with the same agent's next messages
# What a message adds: numbers, quoted or code strings, links, file names (`\b[\w-]+\.[a-z]{2,4}\b`,
# which `scan.leftmost` finds in linear time: as one more alternative it was quadratic in a run).
FACT = re.compile(r"\b\d[\d,.]*\d\b|\d{2,}|`[^`]{2,40}`|\"[^\"]{3,40}\"|https?://\S+")
FACT_NAME = re.compile(names(r"\.[a-z]{2,4}\b"))
DIGITS = re.compile(r"\d+")
# IPython's header of a cell it could not parse: the line where the parser stopped.
CELL_AT = re.compile(r"Cell In\[\d{1,9}\], line (\d{1,9})")
# Numbers and addresses (`0x1f` or a digit run), masked in a result's lines; a digit first, as a
# class, so that the scan skips other characters in C (twice as fast as the two branches).
NUMBERS = re.compile(r"\d(?:(?<=0)x[0-9a-fA-F]+|\d*)")
QUOTED = re.compile(r"'[^'\n]{0,80}'|\"[^\"\n]{0,80}\"|`[^`\n]{0,80}`")
SALIENT = re.compile(
    r'"(?:command|cmd|query|q|pattern|path|file|url|code|search_string|question)"\s*:\s*"((?:[^"\\]|\\.)*)'
)
WORD = re.compile(r"\w+")
# Shell commands that change what a rerun sees though no file is edited.
STATE_CHANGE = re.compile(
    r"\b(?:git (?:checkout|stash|reset|restore|pull|merge|rebase|switch|clean)|rm|mv|cp|touch|mkdir|"
    r"chmod|ln|pip3? install|conda install|npm (?:install|ci)|setup\.py|make)\b"
)
# A framework's status line or an output wrapper: "[Command finished with exit code 0]",
# "<returncode>0</returncode>", "<output>". Never what a command found.
STATUS_LINE = re.compile(r"^\[[A-Z][a-z]+ [^\]\n]*\]$|^<[\w-]+>[^<>\n]{0,40}</[\w-]+>$|^</?[\w-]+>$")
CONTENT_LINES = 16  # hashes kept of a result's content lines (a bottom-k sketch)
FRAME_EDGE = (3, 6)  # lines at the head and tail of a result where a frame sits
FRAME_TOOLS = 8  # tools whose frame is learnt per run
FRAME_KEPT = 16  # line counts kept per tool
FRAME_MIN = 4  # results of a tool before any of its lines counts as frame
FRAME_SHARE = 0.6  # share of a tool's results a frame line appears in
FRAME_KINDS = 3  # distinct results of a tool needed (else every line of a loop would be "frame")
DIGITS_MASKED_FROM = 400  # chars of content from which a result is compared with digits masked
ECHO_LEFT = 8  # words of a result's other lines (a wrapper) at most, for it to be an echo
ECHO_MIN = 4  # words of the input a result must repeat to be an echo
ECHO_LINE_EXTRA = 40  # chars besides the command a line may hold and still be its echo
# Where a result says the call acted: the page a browser-like tool reports ("Address: …",
# "URL: …") or the first link in the head of its result. A page-local call (find on the page,
# scroll) means something else once another page is open.
PLACE_LABEL = re.compile(
    r"(?:address|url|location|current page|page url)\s*+:\s*+(\S[^\n]{0,200})", re.IGNORECASE
)
LINK = re.compile(r"\b(?:https?|file)://[^\s\"'<>)\]]++")
# A page view's position line ("The viewport shows 31% of the webpage, and is positioned ...").
VIEWPORT = re.compile(r"the viewport shows\b", re.IGNORECASE)
PLACE_LINES = 3  # lines of a result's head where it names its page
PLACE_CHARS = 600


@dataclass(slots=True)
class Entry:
    """What the loop rules remember of one step. Stored flattened (`encode`: a list in this
    field order, which keeps the run state small); states written before the later fields
    existed decode with their defaults."""

    step: int
    action: str | None
    text: str  # "tool: input"
    sig: str  # hash of action + input
    obs: str  # the result's key (`_result_key`): whether it failed, its test counts
    lines: list[int]  # hashes of the result's content lines (frame lines left out when compared)
    err: bool
    errline: str  # the error line, digits masked
    thought: str  # hash of the thought
    empty: bool
    condense: bool
    obs_empty: bool  # no content: nothing, "no results", or only the input's own text echoed
    modifies: bool
    verifies: bool = False
    paths: list[str] = field(default_factory=list)
    agent: str = ""
    message: str = ""  # a message step's text (first MESSAGE_CHARS)
    facts: list[str] = field(default_factory=list)  # hashes of what a message states
    changes: bool = False  # a file edit or a command that changes what a rerun sees
    echo: bool = False  # the result only repeats the input's own text
    cut: bool = False  # the input was cut by its producer: equal inputs prove nothing
    verdict: str = ""  # "fail" | "pass" (a test run with no failure) | "" (unknown)
    obs_cut: bool = False  # the result was cut by its producer: its tail is unseen
    shape: str = ""  # hash of action + input with digits masked (`grep -A 20` / `grep -A 30`)
    place: str = ""  # hash of the page the call acted on, when the result names one (`_place`)
    ts: float | None = None  # the event's time (the agent's clock): waiting is told by it
    wait: str = ""  # `waiting.kind`: "pending", "transient", "sleep", or "" (a result like any other)
    # the call never ran (a busy terminal, a format error, a refusal: `observation.not_run`): what
    # it would have brought is unknown, so it has no result to compare and changed nothing
    unrun: bool = False

    def encode(self) -> list[Any]:
        return [
            self.step,
            self.action,
            self.text,
            self.sig,
            self.obs,
            self.lines,
            self.err,
            self.errline,
            self.thought,
            self.empty,
            self.condense,
            self.obs_empty,
            self.modifies,
            self.verifies,
            self.paths,
            self.agent,
            self.message,
            self.facts,
            self.changes,
            self.echo,
            self.cut,
            self.verdict,
            self.obs_cut,
            self.shape,
            self.place,
            self.ts,
            self.wait,
            self.unrun,
        ]

    @classmethod
    def decode(cls, e: list[Any]) -> Entry:
        return cls(*e)

    @classmethod
    def of(cls, f: StepFeatures, frame: set[int], lines: list[tuple[str, int]] | None = None) -> Entry:
        """The entry of step `f`: `lines` are its result's (`result_lines`), `frame` the
        lines this run has learnt its tool always prints."""
        unrun = bool(f.action) and not_run(f.whole_observation)
        lines = [] if unrun else (result_lines(f) if f.action else []) if lines is None else lines
        content = [h for _, h in lines if h not in frame]
        echo = bool(f.action) and not f.modifies and _echoes(f, [t for t, h in lines if h not in frame])
        outcome = f.outcome if f.action and f.whole_observation and not unrun else None
        tests = outcome.tests if outcome else None
        failed = bool(outcome and outcome.failed) or f.is_error
        return cls(
            step=f.step,
            action=f.action,
            text=f.act_text,
            sig=f.sig,
            obs="" if unrun else _result_key(f, lines, failed, tests),
            lines=_kept(content),
            err=f.is_error,
            errline=_error_key(f),
            thought=short_hash(f.thought.strip()) if f.thought.strip() else "",
            empty=f.empty,
            condense=f.condenses,
            obs_empty=bool(f.action)
            and not unrun
            and (f.obs_empty or not content or echo or bool(outcome and outcome.kind == "not_found")),
            modifies=f.modifies and not unrun,
            verifies=f.verifies and not unrun,
            paths=list(f.paths[:2]),
            agent=f.agent,
            message=" ".join(f.thought.split())[:MESSAGE_CHARS] if f.message and not f.coordination else "",
            facts=sorted({short_hash(m.lower())[:8] for m in message_facts(f.thought[:4000])})[:16]
            if f.message
            else [],
            changes=not unrun and (f.modifies or bool(f.command and STATE_CHANGE.search(f.command))),
            echo=echo,
            cut=f.input_cut,
            verdict="fail" if failed else "pass" if tests and not tests[0] else "",
            obs_cut=f.observation_cut,
            shape=_shape(f.action, f.input) if f.action else "",
            place=_place(f) if f.action and not unrun else "",
            ts=f.ts,
            wait=waiting.kind(f),
            unrun=unrun,
        )


@lru_cache(maxsize=64)
def _shape(action: str, given: str) -> str:
    """The call with digits masked, hashed: remembered for the last calls (a loop re-issues
    its call, and masking a long input costs more than the lookup)."""
    return short_hash(f"{action}\x00{DIGITS.sub('#', given)}")


def _place(f: StepFeatures) -> str:
    """The page (address, link) a call's result says it acted on, unless the call names it
    itself: a visit or a search is its own target, a find-on-page or a scroll acts on the page
    that is open. "" when the result names none, or failed (an error says what went wrong)."""
    if f.is_error or not f.whole_observation:
        return ""
    for ln in f.whole_observation[:PLACE_CHARS].strip().splitlines()[:PLACE_LINES]:
        t = ln.strip()
        # a label needs its colon and a link its `://`: a line without them is not searched
        label = PLACE_LABEL.match(t) if ":" in t else None
        on = label[1] if label else t
        link = LINK.search(on) if "://" in on else None
        where = link[0] if link else label[1].strip() if label else ""
        if where:
            asked = salient(f.input) if f.input.startswith("{") else f.input
            return (
                "" if asked.strip() and (asked.strip() in where or where in asked) else short_hash(where)[:8]
            )
    return ""


def _error_key(f: StepFeatures) -> str:
    """The error line as errors compare: digits masked ("line 62230" and "line 62245" are one
    error), and so is what it quotes back of the input ("unexpected keyword argument ''" and
    "... 'arguments'": one error for whatever was passed)."""

    def given(m: re.Match[str]) -> str:
        inner = m[0][1:-1]
        return "'#'" if not inner.strip() or inner in f.input else m[0]

    key = DIGITS.sub("#", QUOTED.sub(given, f.error_line))
    if key and cell_unparsed(f.whole_observation):
        # Where the parser stopped is part of a parse error: the same cell refused at another
        # line each time is not the same refusal (what it was given differed), so it is not
        # counted as one error repeated.
        at = CELL_AT.search(f.whole_observation[:NOT_RUN_CHARS])
        key += f" @{at[1] if at else ''}:{','.join(DIGITS.findall(f.error_line))}"
    return key


def _result_key(
    f: StepFeatures, lines: list[tuple[str, int]], failed: bool, tests: tuple[int, int] | None
) -> str:
    """What two results must share to be the same: a long one its lines with numbers and
    addresses masked (line numbers, ids and `0x7f21f5c1` vary between reruns that say the
    same), a short one its text but for durations and addresses (there a number is often the
    answer) unless it reports an edit (line counts); whether it failed, and its test counts (a
    count that moves is progress)."""
    if not f.whole_observation:
        return ""
    if f.modifies or sum(map(len, map(itemgetter(0), lines))) >= DIGITS_MASKED_FROM:
        # the hashes as 4 big-endian bytes each, packed in C (`int.to_bytes(4, "big")` each)
        text = f"{zlib.crc32(struct.pack(f'>{len(lines)}I', *map(itemgetter(1), lines))):08x}"
    else:
        text = f.obs_hash[:8]
    return f"{text}{'!' if failed else ''}{tests or ''}"


def _line_hash(line: str) -> int:
    masked = NUMBERS.sub("#", line)
    return zlib.crc32(" ".join(masked.lower().split()).encode("utf-8", "replace"))


def result_lines(f: StepFeatures) -> list[tuple[str, int]]:
    """The result's lines (head and tail of a long one) with their hashes, digits masked,
    without status lines and lines that echo the command or query (the query and a few
    words: "Address: search: <query>"; a hit that quotes the query is content)."""
    said = salient(f.act_text.split(":", 1)[1].strip() if ":" in f.act_text else "")
    said = said if len(said) >= 4 else ""
    return list(_lines(window(f.whole_observation), said))


# results (as read: head and tail) whose lines are remembered: a result repeated in a loop is
# read once; at most LINES_KEPT x ~8 KB of text is kept
LINES_KEPT = 64


@lru_cache(maxsize=LINES_KEPT)
def _lines(text: str, said: str) -> tuple[tuple[str, int], ...]:
    # `_line_hash` of every line at once: numbers masked and lower case in one pass over the
    # text (neither adds or removes a line end, so its lines pair with the text's), and each
    # line's hash mapped in C (an ASCII text encodes as is: no char to replace)
    masked = NUMBERS.sub("#", text).lower().splitlines()
    joined = map(" ".join, map(str.split, masked))
    hashes = map(zlib.crc32, map(str.encode, joined) if text.isascii() else map(_encode, joined))
    status = STATUS_LINE.match  # every branch starts with `[` or `<`: asked only of those lines
    pairs = zip(map(str.strip, text.splitlines()), hashes, strict=True)
    if not said:
        return tuple((t, h) for t, h in pairs if t and not (t[0] in "[<" and status(t)))
    n = len(said) + ECHO_LINE_EXTRA
    return tuple(
        (t, h) for t, h in pairs if t and not (t[0] in "[<" and status(t)) and not (said in t and len(t) <= n)
    )


def _encode(t: str) -> bytes:
    return t.encode("utf-8", "replace")


def page_lines(f: StepFeatures) -> list[tuple[str, int]]:
    """A browsing agent's message that shows a page, as a result: its lines after the first
    (what it did: "I typed 'q' into the search bar"), without the lines that frame every page
    (the screenshot's title and link, the viewport's position, the OCR heading)."""
    if not (f.message and f.agent and grounding.renders_page(f.thought)):
        return []
    out = []
    for ln in f.thought[: grounding.OBS_READ].splitlines()[1:]:
        t = ln.strip()
        if t and not (grounding.RENDERED.match(t) or LINK.search(t) or VIEWPORT.match(t)):
            out.append((t, _line_hash(t)))
    return out


def _kept(hashes: list[int]) -> list[int]:
    """A bottom-k sketch of the content's lines: its overlap with another estimates how many
    lines two results share, over the whole result."""
    return sorted(set(hashes))[:CONTENT_LINES]


def _echoes(f: StepFeatures, content: list[str]) -> bool:
    """The result is the input's own text printed back (a request `print`ed instead of sent, a
    hard-coded list shown as found): its lines run word for word through the input, but for
    a few words of wrapper. Nothing was looked up or computed."""
    if not content or not f.input or sum(map(len, content)) > len(f.input) + ECHO_LINE_EXTRA * 4:
        return False  # no echo: more text came back than was sent
    given = f" {' '.join(WORD.findall(f.input.lower()))} "
    quoted = other = 0
    for t in content[:40]:
        words = WORD.findall(t.lower())
        # a line cut by the producer ends in part of a word
        if words and (f" {' '.join(words)} " in given or f" {' '.join(words[:-1])} " in given):
            quoted += len(words)
        else:
            other += len(words)
            if other > ECHO_LEFT:  # too much of its own already: the lines left cannot make it one
                return False
    return quoted >= ECHO_MIN and other <= ECHO_LEFT and 2 * other <= quoted


@dataclass(frozen=True)
class LoopState:
    """The last WINDOW steps, flattened (see `Entry`), and per tool what its results share
    (`frames`: tool -> [results seen, distinct results (hashes, at most FRAME_KINDS kept),
    {line hash: results it appeared in}, at most FRAME_KEPT lines])."""

    window: list[list[Any]] = field(default_factory=list)
    frames: dict[str, list[Any]] = field(default_factory=dict)
    gaps: list[float] = field(default_factory=list)  # seconds before the last ordinary steps (`waiting`)
    waits: list[list[Any]] = field(default_factory=list)  # the calls waited on (`waiting.Wait`)
    # the no-progress floor's memory and streaks (`progress.ProgressState`, flattened)
    progress: list[Any] = field(default_factory=list)
    # the run's context, estimated in tokens (what a wait's calls are priced on: `waiting.call_usd`)
    ctx: int = 0


def frame_of(frames: dict[str, list[Any]], tool: str | None) -> set[int]:
    """The lines that recur in most of a tool's results (footers, wrappers) once it has given
    enough different results for that to mean something."""
    got = frames.get(tool or "")
    if not got:
        return set()
    n, kinds, counts = got
    if n < FRAME_MIN or len(kinds) < FRAME_KINDS:
        return set()
    return {int(h) for h, c in counts.items() if c >= FRAME_SHARE * n}


def learn(
    frames: dict[str, list[Any]], f: StepFeatures, obs: str, lines: list[tuple[str, int]]
) -> dict[str, list[Any]]:
    """`frames` with this step's result counted (a new dict: the state is a value)."""
    if not (f.action and lines) or f.modifies:
        return frames
    n, kinds, counts = frames.get(f.action, [0, [], {}])
    head, tail = FRAME_EDGE
    edge = {str(h) for _, h in lines[:head] + lines[-tail:]}
    new_counts = dict(counts)
    for h in edge:
        new_counts[h] = new_counts.get(h, 0) + 1
    if len(new_counts) > FRAME_KEPT:  # the most frequent lines stay; ties: the earlier seen
        ranked = sorted(new_counts.items(), key=lambda kv: -kv[1])[:FRAME_KEPT]
        keep = {k for k, _ in ranked}
        new_counts = {k: c for k, c in new_counts.items() if k in keep}
    key = obs[:8]
    new_kinds = kinds if key in kinds or len(kinds) >= FRAME_KINDS else [*kinds, key]
    out = {k: v for k, v in frames.items() if k != f.action}
    if len(out) >= FRAME_TOOLS:  # the tool seen least makes room
        out.pop(min(out, key=lambda k: out[k][0]))
    out[f.action] = [n + 1, new_kinds, new_counts]
    return out


@dataclass(slots=True)
class Window:
    """What every rule sees: the entries up to and including the current step."""

    entries: list[Entry]
    features: StepFeatures
    frames: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def cur(self) -> Entry:
        return self.entries[-1]

    @property
    def before(self) -> list[Entry]:
        return self.entries[:-1]

    def content(self, e: Entry) -> list[int]:
        """The sketch of a result's content, without what this run has learnt is frame."""
        frame = frame_of(self.frames, e.action)
        return [h for h in e.lines if h not in frame]

    def overlap(self, a: Entry, b: Entry) -> float:
        """Estimated share of content lines two results have in common."""
        return sketch_similarity(self.content(a), self.content(b))


def message_facts(text: str) -> list[str]:
    """What `FACT` or a file/host name matches in `text`, in order."""
    return [m[0] if m else text[s:e] for s, e, m in leftmost(FACT, FACT_NAME, text)]


def salient(raw: str) -> str:
    m = SALIENT.search(raw) if raw.startswith("{") else None
    return m.group(1) if m else raw
