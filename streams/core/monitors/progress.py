"""The no-progress signal: what each step adds to what its agent has already seen.

A loop is an agent that keeps acting and learns nothing new, whatever the wording of its calls
and whatever their class (reads, listings, searches, messages). So the floor of loop detection
does not compare calls: it compares what came back. Each result is read as units (its lines,
with line-number prefixes, status lines, durations and addresses left out, and the lines that
only echo the call's own query; for a chat message that shows no tool output, the facts it
states: numbers, quoted values, links, file names), and the units are looked up in a bounded
memory of what earlier results of the same agent held (two Bloom filters, salted per agent).

A step **brings something** when enough of its units are new (`gain`), or another agent of the
run brought something since this agent last acted (a reply to an instruction, a sub-agent's
report); it **changes something** when it edits or writes a file, changes the workspace
(`rm`, `git checkout`, an install) or calls a writing tool on an input not written before
(`send_email`, `create_event`, `cancel_order`). A step that does neither is *stale*. The same
command re-run on a result that changed (a test suite failing less, a page scrolled, a status
that moved) brings something; `ls` eight times on the same listing, one file read seven ways,
reworded searches that bring back the same hit do not.

What cannot be known is not counted either way (it neither extends nor breaks a streak): a
result its producer cut (round length) whose sent part is all old, a command the framework did
not run ("is NOT executed", a refused reply), a pending or transient answer (waiting is not
looping), routing and planning messages, a finish. A stale streak of STALE_FIRE steps of one
agent is a finding, whose text says only what the run shows: how many calls since which step,
how many printed nothing, how many repeated an earlier result whole (one of the agent's last
RESULTS_KEPT, kept exactly), showed only lines seen before or almost nothing new, and that
nothing changed.

Bounded and linear: a result is read in its head and tail (`window`), at most UNITS_PER_STEP
lines; the memory is two filters of MEMORY_BITS bits (base64, ~1.4 KB each), a new generation
every GENERATION units; at most AGENTS_KEPT agents are tracked, each with CALLS_KEPT calls.
"""

from __future__ import annotations

import base64
import functools
import re
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from itertools import repeat
from typing import Any

import orjson

from ..quoting import quoted
from ..reading import grounding
from ..reading.features import PATH_KEYS, StepFeatures, mask_volatile
from . import waiting
from .base import Finding

MEMORY_BITS = 8192  # bits of one Bloom filter: 2 bits per unit from one crc32
GENERATION = 800  # units a filter takes before the older one is dropped (~3 % false "seen")
UNITS_PER_STEP = 200  # lines of one result read at most ...
READ_HEAD = 3000  # ... in its first chars ...
READ_TAIL = 1000  # ... and its last (a summary, a result printed last)
LINE_CHARS = 400  # chars of a line hashed (a minified blob is one line)
AGENTS_KEPT = 8  # agents whose streaks are tracked (the least recent makes room)
CALLS_KEPT = 4  # distinct calls of a streak kept to name in the text
CALL_CHARS = 80  # chars of a call kept
GAIN_SHARE = 0.05  # new units past this share of a result's units (and at least one) bring something
STALE_FIRE = 4  # stale steps of one agent in a row that are a finding
SAME_FIRE = 3  # ... or calls of one tool in a row that brought back the very same result
STALE_STRONG = 8  # ... and that make it a strong one
NOT_RUN_CHARS = 400  # of a result's head read for "the command did not run"

# A framework's status line or an output wrapper: "[Command finished with exit code 0]",
# "<returncode>0</returncode>", "<output>". Never what a command found.
STATUS_LINE = re.compile(r"^\[[A-Z][a-z]+ [^\]\n]*\]$|^<[\w-]+>[^<>\n]{0,40}</[\w-]+>$|^</?[\w-]+>$")
# A line-number prefix (`nl`, `cat -n`, an editor's view, `grep -n`): one file read seven ways
# has the same lines once it is gone.
PATH_LINE = re.compile(r"^[\w./-]{1,200}:\d{1,7}[:-]")  # `grep -n`: `path:12:` (or `path:12-` of context)
# The framework says the call did not run: a busy terminal, a refused or unparsed reply.
NOT_RUN = re.compile(
    r"\b(?:is|was) not (?:been )?(?:executed|run)\b|\bnot executed\b|\bcannot send new commands\b|"
    r"\b(?:call|command|request|reply|action) (?:was )?(?:refused|rejected|blocked)\b",
    re.IGNORECASE,
)
NOT_RUN_ACTIONS = frozenset({"format_error", "parse_error", "invalid_action"})
NOT_RUN_HINTS = (
    "not executed",
    "not been executed",
    "not run",
    "cannot send",
    "refused",
    "rejected",
    "blocked",
)
# A reply to the user: without an answer in the step (the run ends on it) it brought nothing
# because it asked for nothing.
RESPOND_ACTIONS = frozenset({"respond", "reply", "say", "message_user", "ask_user", "send_message_to_user"})
# Inputs that are free text (a query, a message, code): never a target.
FREE_TEXT_KEYS = frozenset(
    {
        "query",
        "q",
        "question",
        "text",
        "message",
        "body",
        "content",
        "code",
        "command",
        "cmd",
        "prompt",
        "thought",
        "reason",
        "description",
        "summary",
        "new_str",
        "old_str",
        "file_text",
        "search_string",
    }
)
TARGET_CHARS = 120
TARGET_INPUT = 1000  # chars of a structured input read for its targets (a longer one carries content)
INPUT_READ = 4000  # chars of a written input read for what it wrote
# Query-like inputs, for leaving out result lines that only echo them ("Results for 'x':").
SALIENT = re.compile(
    r'"(?:command|cmd|query|q|pattern|path|file|url|code|search_string|question)"\s*:\s*"((?:[^"\\]|\\.)*)'
)
# Tools that write: the first word of their name (`send_email`, `create_calendar_event`,
# `cancel_pending_order`, `reserve_hotel`). A write on an input not written before is a change.
WRITE_VERB = re.compile(
    r"^(?:send|create|update|delete|remove|add|append|write|edit|modify|set|post|put|patch|reserve|"
    r"book|cancel|exchange|return|transfer|pay|move|rename|share|invite|schedule|reschedule|"
    r"insert|upload|submit|apply|change|reply|forward|reset)(?:_|$)"
)
# Shell commands that change what a rerun sees though no file is edited.
STATE_CHANGE = re.compile(
    r"\b(?:git (?:checkout|stash|reset|restore|pull|merge|rebase|switch|clean|apply|commit)|rm|mv|cp|"
    r"touch|mkdir|chmod|ln|pip3? install|conda install|npm (?:install|ci)|setup\.py|make)\b"
)
CODE_NAME = re.compile(r"[^\W_]_[^\W_]|[a-z][A-Z]|[A-Z]{2}[a-z]|::")
NAME_SPLIT = re.compile(r"[^\w.:]+")
# A fact a message states: a number, a quoted or back-quoted value, a link. Every match starts
# with a digit, a quote, a back quote or `h`, taken first as a class so that the scan skips
# other characters in C; each branch checks that character by a lookbehind (`\b\d` is a digit
# with no word character before it). Three times faster than the branches tried everywhere.
FACT = re.compile(
    r"[\d`\"h](?:(?<=\d)(?<!\w\d)[\d,.]*\d\b|(?<=\d)\d+|(?<=`)[^`\n]{2,40}`|(?<=\")[^\"\n]{3,40}\"|"
    r"(?<=h)ttps?://\S{1,200})"
)


@dataclass(frozen=True)
class ProgressState:
    """The memory of what results held (two Bloom filters, base64, and the current one's
    count), and per agent its stale streak (`NAME` ... `TS` below): [agent, stale steps, first
    stale step, empty results, repeated results, steps not known, last step, last step it
    brought something, calls of the streak (at most CALLS_KEPT "tool: input"), changes made
    during the streak, its last tool and result (a hash) and how many calls in a row brought
    it back, the last step's time]."""

    seen: str = ""
    seen_old: str = ""
    seen_n: int = 0
    agents: list[list[Any]] = field(default_factory=list)

    def encode(self) -> list[Any]:
        """Flattened for the run state (the loop monitor's `progress` field)."""
        return [self.seen, self.seen_old, self.seen_n, self.agents] if self.seen or self.agents else []

    @classmethod
    def decode(cls, stored: list[Any]) -> ProgressState:
        return cls(*stored[:4]) if stored else cls()


@dataclass(frozen=True, slots=True)
class Reading:
    """What one step brought, as the signal judges it."""

    known: bool  # what came back is known (not cut, ran, not a wait)
    units: int  # units of its result
    new: int  # ... not seen before
    gain: bool  # it brought something
    change: bool  # it changed something
    empty: bool  # its result held no unit at all
    aimed: bool = False  # the call is aimed at a target it had not aimed at before
    key: int = 0  # the tool and its result as a whole (0: no tool, or not known)
    waits: bool = False  # a pending or transient answer: waiting, when spaced out in time
    first_finish: bool = False  # the agent's first finish: its result is remembered, never judged
    new_whole: bool = False  # its lines are known, but not together as one result
    passes: bool = False  # a test run whose summary shows no failure
    new_check: bool = False  # ... whose command this agent had not run before
    # of its units, those no filter held (a filter's false "seen" may hide one; none is falsely
    # new but one of a generation dropped)
    fresh_units: int = 0
    whole: int = 0  # its lines as one set (`key` without the input); 0: no tool, or not known


@functools.lru_cache(maxsize=8)
def _salient(text: str) -> str:
    """The query or command of a structured input (a step asks it three times: remembered)."""
    m = SALIENT.search(text) if text.startswith("{") else None
    return m.group(1) if m else text


def result_units(f: StepFeatures) -> list[bytes]:
    """The units of a tool result: its lines, normalised (line numbers, durations and addresses
    out; lower case; spaces collapsed), without status lines, and with the query the call sent
    left out of the lines that echo it (a header that quotes a reworded query is the same header).
    Runs on every line of every result: `_quotes` is asked only of a line that holds the query."""
    said = _salient(f.input).strip().lower()
    said = said if len(said) >= 4 else ""
    obs = f.whole_observation
    if len(obs) > READ_HEAD + READ_TAIL:
        obs = obs[:READ_HEAD] + "\n" + obs[-READ_TAIL:]
    if len(said) > SAID_KEPT:  # a long query is read, not kept
        return list(_result_units(obs, said))
    got = _UNITS.get((obs, said))
    if got is None:
        got = _result_units(obs, said)
        if len(_UNITS) >= UNITS_KEPT:
            del _UNITS[next(iter(_UNITS))]
        _UNITS[(obs, said)] = got
    return list(got)


# results (as read: head and tail) whose units are remembered: a result repeated in a loop is
# read once; at most UNITS_KEPT x ~4 KB of text is kept
_UNITS: dict[tuple[str, str], tuple[bytes, ...]] = {}
UNITS_KEPT = 128
SAID_KEPT = 1000  # chars of a query whose results' units may be kept


def _result_units(obs: str, said: str) -> tuple[bytes, ...]:
    text = mask_volatile(obs)
    out: list[bytes] = []
    status = STATUS_LINE.match
    for ln in text.splitlines():
        t = ln.lstrip()
        if not t or (t[0] in "[<" and status(t.rstrip())):
            continue
        t = " ".join(_unnumbered(t[:LINE_CHARS]).lower().split())
        if said and said in t and _quotes(t, said):  # the query echoed ("Results for 'x':"): the rest counts
            t = t.replace(said, "\x00")
            if not any(c.isalnum() for c in t):
                continue
        if not t:
            continue
        out.append(t.encode("utf-8", "replace"))
        if len(out) >= UNITS_PER_STEP:
            break
    return tuple(out)


def _quotes(line: str, said: str) -> bool:
    """The line quotes the query (in quotes, or after a label's colon), as a header does; a hit
    that merely contains it (`SESSION_TTL = 3600` for the query `SESSION_TTL`) is content."""
    i = line.find(said)
    if i < 0:
        return False
    before = line[max(0, i - 2) : i]
    return (
        (i == 0 and len(line) == len(said))
        or before[-1:] in ("'", '"', "`", "\u201c", "\u2018")
        or before == ": "
    )


def _unnumbered(line: str) -> str:
    """The line without its line-number prefix: `12<tab>`, `12:` or `12|` (`nl`, `cat -n`, an
    editor's view) or `path:12:` (`grep -n`). A number followed by a space is content
    (`3 failed`), never a prefix."""
    if line[:1].isdigit():
        rest = line.lstrip("0123456789")
        return rest[1:] if rest[:1] in ("\t", ":", "|") else line  # `41<tab>`: a blank line, numbered
    i = line.find(":", 0, 200)
    if i > 0 and line[i + 1 : i + 2].isdigit():
        m = PATH_LINE.match(line)
        return line[m.end() :].lstrip() if m else line
    return line


def written_units(f: StepFeatures) -> list[bytes]:
    """The lines a writing step sends (a heredoc, an editor's new text): the agent's own words,
    which a later read of the file shows back without teaching it anything."""
    text = f.input
    if text.startswith("{"):
        try:
            got = orjson.loads(text)
        except orjson.JSONDecodeError:
            return []  # cut: its texts are not whole
        text = "\n".join(v for v in got.values() if isinstance(v, str)) if isinstance(got, dict) else ""
    out: list[bytes] = []
    low = mask_volatile(text[:INPUT_READ]).lower()
    # an ASCII text encodes as is (no char to replace); a line with no leading digit and no
    # colon in its first 200 chars has no prefix to take off (`_unnumbered` is not asked)
    encode = str.encode if low.isascii() else _encode
    for t in map(str.lstrip, low.splitlines()):
        if not t:
            continue
        t = _unnumbered(t[:LINE_CHARS]) if t[0].isdigit() or ":" in t[:200] else t[:LINE_CHARS]
        t = " ".join(t.split())
        if t:
            out.append(encode(t))
            if len(out) >= UNITS_PER_STEP:
                break
    return out


def _encode(t: str) -> bytes:
    return t.encode("utf-8", "replace")


def message_units(f: StepFeatures) -> list[bytes] | None:
    """The units of a message: the lines of a tool output or page it shows, else the facts it
    states; None for routing and planning, which bring nothing and hold nothing back."""
    if f.coordination or not f.thought.strip():
        return None
    if grounding.renders_output(f.thought) or grounding.renders_page(f.thought):
        lines = mask_volatile(f.thought[: grounding.OBS_READ]).lower().splitlines()[1:]
        units = [" ".join(ln.split()).encode() for ln in lines if ln.strip()]
        return units[:UNITS_PER_STEP]
    return [m.group(0).lower().encode() for m in FACT.finditer(f.thought[:4000])][:UNITS_PER_STEP]


def targets(f: StepFeatures) -> list[bytes]:
    """What a call is aimed at: the files it names, and the identifier-like values of its
    structured input (a channel, an id, a URL; not a query or a message, whose rewording is
    no new target). A known result from a new target is not stale: which target holds it is news."""
    asked = f.command or _salient(f.input)
    given = f.input if f.input.startswith("{") and len(f.input) <= TARGET_INPUT else ""
    return list(_targets(tuple(f.paths), asked[:TARGET_INPUT], f.action, given))


@functools.lru_cache(maxsize=1024)
def _targets(paths: tuple[str, ...], asked: str, action: str, given: str) -> tuple[bytes, ...]:
    """`targets` of a call's paths, the command or query it asks, its tool and its structured
    input (when short): remembered for the last 1,024 calls (a run re-issues its calls)."""
    out = [p.encode("utf-8", "replace") for p in paths]
    # the names a command or query looks for (`grep "class ASTBase"`, then `"class Symbol"`)
    out += [t.encode("utf-8", "replace") for t in _code_names(asked)]
    if given:
        try:
            got = orjson.loads(given)
        except orjson.JSONDecodeError:
            got = None
        if isinstance(got, dict):
            for k, v in list(got.items())[:16]:
                if isinstance(v, int | float) and not isinstance(v, bool):
                    v = str(v)
                if (
                    isinstance(v, str)
                    and k.lower() not in FREE_TEXT_KEYS
                    and k not in PATH_KEYS  # a file is the same target whatever reads it (`paths`)
                    and v
                    and " " not in v.strip()
                ):
                    # the same channel asked about with another tool is another question
                    out.append(f"{action}\x00{k}={v[:TARGET_CHARS]}".encode("utf-8", "replace"))
    return tuple(b"\x00target\x00" + t for t in out[:8])


def _code_names(text: str) -> list[str]:
    """Name-like words (snake_case, camelCase, `Cls::member`) in order, at most 4."""
    names = [t.strip(".:") for t in NAME_SPLIT.split(text)]
    # a word of one case with no `_` or `::` cannot match (the common word: no search)
    return list(dict.fromkeys(t for t in names if _maybe_name(t) and CODE_NAME.search(t)))[:4]


def _maybe_name(t: str) -> bool:
    """Whether CODE_NAME can match `t` at all: it needs `_`, `::`, or both an upper and a lower
    case letter."""
    return "_" in t or ":" in t or (t != t.lower() and t != t.upper())


@functools.lru_cache(maxsize=256)
def _salt(agent: str) -> int:
    return zlib.crc32(agent.encode("utf-8", "replace"))


def _hashes(agent: str, units: list[bytes]) -> list[int]:
    """The units' hashes, salted per agent, each once (in C: this runs on every unit)."""
    return list(dict.fromkeys(map(zlib.crc32, units, repeat(_salt(agent), len(units)))))


_DECODED: dict[str, bytes] = {}  # the last filters decoded (the state carries them as text)


def _filters(st: ProgressState) -> list[bytes]:
    """The state's filters as bytes; a run's next step usually carries the very same texts, so
    the last few decodings are kept (a cache: the result is the same either way)."""
    out = []
    for packed in (st.seen, st.seen_old):
        if not packed:
            continue
        got = _DECODED.get(packed)
        if got is None:
            if len(_DECODED) >= 8:
                _DECODED.pop(next(iter(_DECODED)))
            got = _DECODED[packed] = base64.b64decode(packed)
        out.append(got)
    return out


def _bits(h: int) -> tuple[int, int]:
    mask = MEMORY_BITS - 1
    return h & mask, (h >> 13) & mask


def _in(filters: list[bytes], h: int) -> bool:
    i, j = _bits(h)
    return any(b[i >> 3] >> (i & 7) & 1 and b[j >> 3] >> (j & 7) & 1 for b in filters)


def _unseen(filters: list[bytes], hashes: list[int]) -> list[int]:
    """The hashes no filter holds (`_in`, inlined: this runs on every unit of every result)."""
    if not filters:
        return hashes
    mask = MEMORY_BITS - 1
    out = []
    for h in hashes:
        i, j = h & mask, (h >> 13) & mask
        for b in filters:
            if b[i >> 3] >> (i & 7) & 1 and b[j >> 3] >> (j & 7) & 1:
                break
        else:
            out.append(h)
    return out


def _remember(st: ProgressState, fresh: list[int]) -> tuple[str, str, int]:
    """The filters with `fresh` added: a new generation first when they would fill the current
    one past GENERATION (the current one becomes the older, the older is dropped)."""
    cur, old, n = st.seen, st.seen_old, st.seen_n
    if not fresh:
        return cur, old, n
    if n and n + len(fresh) > GENERATION:
        cur, old, n = "", cur, 0
    bits = bytearray(_DECODED.get(cur) or base64.b64decode(cur) if cur else bytes(MEMORY_BITS // 8))
    mask = MEMORY_BITS - 1
    for h in fresh[:GENERATION]:  # `_bits`, inlined
        i, j = h & mask, (h >> 13) & mask
        bits[i >> 3] |= 1 << (i & 7)
        bits[j >> 3] |= 1 << (j & 7)
    packed = base64.b64encode(bits).decode()
    if len(_DECODED) >= 8:
        _DECODED.pop(next(iter(_DECODED)))
    _DECODED[packed] = bytes(bits)
    return packed, old, n + min(len(fresh), GENERATION)


def _not_run(f: StepFeatures) -> bool:
    """The framework says the call did not run (a busy terminal, a refused reply)."""
    if (f.action or "") in NOT_RUN_ACTIONS:
        return True
    head = f.whole_observation[:NOT_RUN_CHARS]
    low = head.lower()
    return any(w in low for w in NOT_RUN_HINTS) and bool(NOT_RUN.search(head))


def read(st: ProgressState, f: StepFeatures) -> tuple[ProgressState, Reading | None]:
    """This step judged against the memory, and the memory with its result added. None: a step
    that says nothing about progress (a finish, routing or planning, an empty message)."""
    if f.condenses:
        return st, None
    if f.action in RESPOND_ACTIONS and not f.whole_observation:
        return st, None
    filters = _filters(st)
    # the first finish ends the work (a finding there reaches no one); one that did not end
    # it is a step like any other
    first_finish = False
    if f.finishes:
        mark = _hashes(f.agent, [b"\x00finish"])
        first_finish = not _in(filters, mark[0])
        if first_finish:
            st = ProgressState(*_remember(st, mark), st.agents)
            filters = _filters(st)
        if not f.action:
            return st, None
    if f.action:
        units = result_units(f)
    elif f.empty:
        units = []
    else:
        got = message_units(f)
        if got is None:
            return st, None
        units = got
    hashes = _hashes(f.agent, units)
    fresh = _unseen(filters, hashes)
    fresh_units = len(fresh)
    gain = bool(fresh) and len(fresh) >= GAIN_SHARE * len(hashes)
    aims = _unseen(filters, _hashes(f.agent, targets(f))) if f.action else []
    wkey = bool(f.action and WRITE_VERB.match(f.action))
    # a command that changes the workspace and shows something (`rm -rf _build && make`) is
    # judged by what it shows; one that prints nothing (`rm x`) is a change
    change = bool(
        ((f.modifies or wkey) and not f.is_error)
        or (f.command and not hashes and STATE_CHANGE.search(f.command))
    )
    known = not ((f.action and _not_run(f)) or (f.observation_cut and not gain))
    # only a step that would be stale is asked whether it waits
    waits = bool(f.action) and not (gain or change) and waiting.kind(f) in ("pending", "transient")
    if f.modifies:  # what it wrote is known to it from now on
        fresh = list(dict.fromkeys([*fresh, *_unseen(filters, _hashes(f.agent, written_units(f)))]))
    fresh = list(dict.fromkeys([*fresh, *aims]))
    # a test run that passes (a summary with no failure), on a command not run before or after
    # a change: the confirmation it was run for (as the rules, which never name a passing check)
    tests = f.outcome.tests if f.verifies and not f.is_error else None
    passes = tests is not None and tests[0] == 0 and not f.outcome.failed
    checked = _hashes(f.agent, [b"\x00check\x00" + f.sig.encode()]) if passes else []
    new_check = bool(_unseen(filters, checked))
    fresh = [*fresh, *checked] if new_check else fresh
    # the result as a whole: its units whatever their order, and how many
    key = content = 0
    if known and f.action:
        packed = struct.pack(f">{len(hashes)}I", *sorted(hashes))
        content = zlib.crc32(packed, zlib.crc32(f.action.encode("utf-8", "replace"))) or 1
        # and what the call asked (its query, command or path): the same answer to another
        # question is the streak's to judge, not a repeat of one call
        key = zlib.crc32(_salient(f.input).encode("utf-8", "replace"), content) or 1
    # a result seen before as a whole (the same lines in the same set), salted apart from lines
    whole = _unseen(filters, [zlib.crc32(content.to_bytes(4, "big"), 0x5EED)]) if content else []
    fresh = [*fresh, *whole]
    cur, old, n = _remember(st, fresh)
    reading = Reading(
        known,
        len(hashes),
        len(fresh),
        gain,
        change,
        not hashes,
        bool(aims),
        key,
        waits,
        first_finish,
        bool(whole),
        passes,
        new_check,
        fresh_units,
        content,
    )
    return ProgressState(cur, old, n, st.agents), reading


def _agent(agents: list[list[Any]], name: str) -> list[Any] | None:
    return next((a for a in agents if a[0] == name), None)


def _call(f: StepFeatures) -> str:
    if f.action:
        return f"{f.action_label}: {_salient(f.input)}"[:CALL_CHARS]
    return f"message: {' '.join(f.thought.split())}"[:CALL_CHARS]


# An agent's record in `ProgressState.agents`, by index. The counts of a streak's stale steps,
# each true of the steps it counts (the text states them): REPEATED, a result whose lines, as a
# set, are those of one of the agent's last RESULTS_KEPT results (`RECENT`); OLD, a result every
# line of which the filters hold, but not one seen whole; FEW, one with new lines below
# GAIN_SHARE; EMPTY, one with no line at all. (A record written before OLD, FEW and RECENT
# existed is padded: its REPEATED then counted OLD and FEW too.)
NAME, STALE, FIRST, EMPTY, REPEATED, UNKNOWN, LAST, GAINED, CALLS, CHANGES, SAME, SAME_N, TS, CHANGED = range(
    14
)
OLD, FEW, RECENT = range(14, 17)
RESULTS_KEPT = 16  # results of an agent kept (as `Reading.whole` keys) to tell a whole repeat


CHANT_MIN_CHARS = 300  # a response this long is read for repetition inside it ...
CHANT_READ = 20_000  # ... in its first chars
CHANT_TIMES = 10  # one sentence this many times ...
CHANT_SHARE = 0.5  # ... the sentences so repeated making up this share of the text is chanting
CHANT_WORDS = 3  # words a sentence needs (a divider, a bullet or a number is no sentence)
SENTENCE_END = re.compile(r"[.!?\n]+")
SENTENCE_ENDS = (".", "!", "?", "\n")  # the characters SENTENCE_END is made of


def chanting(text: str) -> tuple[str, int] | None:
    """A response that repeats one sentence over and over (a model stuck in its own output):
    the sentence and how often, or None. Code in fences is left out (a loop body repeats by
    design), and so are sentences of fewer than CHANT_WORDS words (dividers, list markers)."""
    if len(text) < CHANT_MIN_CHARS:
        return None
    text = text[:CHANT_READ]
    if "```" in text:
        text = "".join(text.split("```")[0::2])
    # too few sentence ends for CHANT_TIMES sentences
    if sum(map(text.count, SENTENCE_ENDS)) + 1 < CHANT_TIMES:
        return None
    # the sentences (`SENTENCE_END.split`, by replace and split in C: the runs of ends leave
    # empty parts, which hold no words and are passed over below)
    parts = text.replace(".", "\n").replace("!", "\n").replace("?", "\n").split("\n")
    # each sentence's words, lower case, joined by one space and cut (mapped in C)
    keys = [" ".join(ws)[:200] for ws in map(str.split, map(str.lower, parts)) if len(ws) >= CHANT_WORDS]
    counts = Counter(keys)
    total = sum(map(len, keys))  # chars of the sentences read
    if not counts:
        return None
    said, n = max(counts.items(), key=lambda kv: kv[1])
    repeated = sum(len(k) * c for k, c in counts.items() if c >= CHANT_TIMES)
    return (said, n) if n >= CHANT_TIMES and repeated >= CHANT_SHARE * total else None


def observe(st: ProgressState, f: StepFeatures) -> tuple[ProgressState, Finding | None]:
    """The signal for one step: the state after it, and a finding when the step's agent has
    been stale for STALE_FIRE steps in a row (None otherwise).

    A change (an edit, a write) neither counts nor ends a streak: what it returns is the
    agent's own work shown back, and whether it moved anything shows in what the next steps
    bring. Checks that keep printing what they printed before the edits are still stale."""
    st, r = read(st, f)
    chant = chanting(f.thought) if len(f.thought) >= CHANT_MIN_CHARS else None
    if chant is not None:
        who = f"{quoted(f.agent, 40, 'agent name')} has" if f.agent else "You have"
        return st, Finding(
            0.8,
            f"{who} written the same sentence {chant[1]} times in one response "
            f"({quoted(chant[0], 80, 'sentence')}). Repeating it adds nothing: stop, and take the next "
            "concrete action or give your answer.",
        )
    if r is None:
        return st, None
    agents = [_padded(a) for a in st.agents]
    mine = _agent(agents, f.agent)
    if mine is None:
        mine = _padded([f.agent, 0, f.step, 0, 0, 0, 0, 0, [], 0, 0, 0, None, False])
        if len(agents) >= AGENTS_KEPT:  # the agent that acted least recently makes room
            agents.remove(min(agents, key=lambda a: a[LAST]))
        agents.append(mine)
    # a message is judged by its replies: another agent brought something since this one
    # last spoke (a page, an output, a new fact)
    fed = not f.action and any(a[GAINED] > mine[LAST] for a in agents if a is not mine)
    # an answer of "not yet" after time has passed says nothing of progress (`waiting`)
    if r.waits and waiting.spaced(waiting.gap(mine[TS], f.ts), None, ()):
        r = replace(r, known=False, key=0)
    mine[LAST], mine[TS] = f.step, f.ts
    new = ProgressState(st.seen, st.seen_old, st.seen_n, agents)
    # the same tool bringing back the same result, one call after another, nothing between
    same = bool(r.key) and r.key == mine[SAME] and not (r.change or r.aimed)
    mine[SAME], mine[SAME_N] = r.key, (mine[SAME_N] + 1 if same else 1)
    # the result seen whole before (the very set of lines of one of the agent's last results)
    repeat = bool(r.whole) and r.whole in mine[RECENT]
    if r.whole:
        mine[RECENT] = [*(k for k in mine[RECENT] if k != r.whole), r.whole][-RESULTS_KEPT:]
    if r.first_finish:
        mine[CALLS] = [_call(f)]
        return new, None
    if r.change:
        mine[CHANGES] += bool(mine[STALE])
        mine[CHANGED] = True
        return new, None
    # the first look after a change that shows known lines in a new arrangement (the edited
    # region viewed again) is checking the change, not repeating itself
    after_change, mine[CHANGED] = mine[CHANGED] and r.known, mine[CHANGED] and not r.known
    if after_change and r.new_whole and not r.gain:
        return new, None
    # a check that passes after a change, or on a new target, confirms: it is what it was run for
    if r.passes and (after_change or r.new_check):
        return new, None
    if r.gain or fed:
        if r.gain:
            mine[GAINED] = f.step
        mine[STALE:CALLS] = [0, f.step, 0, 0, 0, mine[LAST], mine[GAINED]]
        mine[CALLS], mine[CHANGES], mine[OLD], mine[FEW] = [], 0, 0, 0
        return new, None
    if not r.known or r.aimed:
        mine[UNKNOWN] += bool(mine[STALE]) and not r.known
        return new, None
    if not mine[STALE]:
        mine[FIRST] = f.step
    mine[STALE] += 1
    mine[EMPTY] += r.empty
    mine[REPEATED] += not r.empty and repeat and not r.fresh_units
    mine[OLD] += not r.empty and not repeat and not r.fresh_units
    mine[FEW] += not r.empty and bool(r.fresh_units)
    call = _call(f)
    if call not in mine[CALLS]:
        mine[CALLS] = [*mine[CALLS], call][-CALLS_KEPT:]
    if mine[STALE] < STALE_FIRE and mine[SAME_N] < SAME_FIRE:
        return new, None
    return new, _finding(mine, f)


def _padded(a: list[Any]) -> list[Any]:
    """A copy of an agent's record with OLD, FEW and RECENT (a record written before them has none)."""
    return [*a, *[0, 0, []][len(a) - OLD :]] if len(a) < RECENT + 1 else list(a)


def _listed(parts: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _finding(a: list[Any], f: StepFeatures) -> Finding:
    n, first = a[STALE], a[FIRST]
    who = f"{quoted(f.agent, 40, 'agent name')} has" if f.agent else "You have"
    if n < STALE_FIRE:  # the same tool, the very same result, call after call
        return Finding(
            0.7,
            f"{who} called {quoted(f.action_label, 40, 'tool name')} {a[SAME_N]} times in a row "
            f"({', '.join(quoted(c, 60, 'call') for c in a[CALLS])}) and got back the very same result each "
            "time, with nothing changed in between. Calling it again will bring the same result: "
            "use the one you have, or change approach (another tool, source, file or question).",
        )
    calls = ", ".join(quoted(c, 60, "call") for c in a[CALLS])
    what = "messages" if all(c.startswith("message:") for c in a[CALLS]) else "steps"
    parts = []
    you = "it" if f.agent else "you"
    if what == "messages" and a[REPEATED] + a[OLD]:
        parts.append(f"{a[REPEATED] + a[OLD]} stated no fact and showed no output that was not known already")
    elif a[REPEATED]:
        parts.append(f"{a[REPEATED]} only repeated output {you} had already seen")
    if what != "messages" and a[OLD]:
        parts.append(f"{a[OLD]} showed only lines {you} had already seen")
    if a[FEW]:
        unit = "fact or line" if what == "messages" else "line"
        parts.append(f"{a[FEW]} showed almost nothing new (under 1 {unit} in 20)")
    if a[EMPTY]:
        parts.append(f"{a[EMPTY]} brought back nothing at all")
    changed = (
        f"the {a[CHANGES]} changes made in between (edits, writes) did not change what they showed"
        if a[CHANGES]
        else "none of them changed anything"
    )
    skipped = (
        f" ({a[UNKNOWN]} more, whose result was cut, that did not run or that only said to wait, "
        "are not counted)"
        if a[UNKNOWN]
        else ""
    )
    return Finding(
        0.85 if n >= STALE_STRONG else 0.7,
        f"{who} taken {n} {what} since step {first} ({calls}) that brought "
        f"{'almost ' if a[FEW] else ''}nothing new: "
        f"{_listed(parts)}; {changed}{skipped}. Another step of the same kind will not move "
        "the work on: use what the earlier results already show, or change approach (another "
        "tool, source, file or question) instead of asking again in other words.",
    )
