"""One reading of a step, computed once per step by the engine and read by the difficulty
scorer and by every monitor: one file-path rule (`shell.is_file_path`), one verification rule
(`shell.analyse`), one reading of the result (`observation.read`), one rendering of a tool input
as text (`input_text`). A fix to any of them reaches routing and steering alike.

Agents name their tools in many ways (OpenHands' `execute_bash`, Claude Code's `Bash`/`Edit`,
SWE-agent's `str_replace_editor`, LangChain tools, QA/review agents' `search`/`read_file`). This
module maps a step onto a few kinds (modify, verify, read, finish, condense, shell) and pulls
out the specifics the steering text names: the command, the files touched, the error. Every
text it keeps is cut (the features are bounded whatever the event holds).
"""

from __future__ import annotations

import functools
import hashlib
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson

from .observation import Outcome, cell_unparsed, digest, read, window
from .pycode import CELL_ACTIONS, analyse_cell, is_cell
from .shell import analyse, could_not_run, is_file_path, is_shell_program, normalise_path

TEXT_KEPT = 200  # chars of an action / claim / thought kept in run state
PATH_KEPT = 256  # chars of a file path kept: paths reach the run state (loop, verification, drift)
PATHS_KEPT = 4  # file paths kept per step
NAME_KEPT = 128  # chars of a tool's or an agent's name kept (both reach the run state)
OBS_HASHED = 4000  # chars of an observation that feed its fingerprint
INPUT_KEPT = 4000  # chars of a tool input kept as text (what a call's signature is computed on)
SKETCH_WORDS = 300  # words of it that feed its sketch

FINISH_ACTIONS = frozenset(
    {
        "finish",
        "submit",
        "final_answer",
        "finalanswer",
        "attempt_completion",
        "complete",
        "complete_task",
        "task_complete",
        "done",
        "answer",
        "submit_answer",
        "submit_review",
        "approve",
    }
)
EDIT_ACTIONS = frozenset(
    {
        "edit",
        "edit_file",
        "write",
        "write_file",
        "write_to_file",
        "create",
        "create_file",
        "str_replace",
        "apply_patch",
        "patch",
        "insert",
        "replace",
        "replace_in_file",
        "multiedit",
        "multi_edit",
        "notebookedit",
        "update_file",
        "delete_file",
        "file_write",
        "file_edit",
        "modify_file",
    }
)
READ_ACTIONS = frozenset(
    {"read", "read_file", "view", "view_file", "open", "open_file", "cat", "file_read", "show_file"}
)
SHELL_ACTIONS = frozenset(
    {
        "bash",
        "shell",
        "run",
        "execute",
        "execute_command",
        "execute_bash",
        "terminal",
        "run_command",
        "run_shell_command",
        "cmd",
        "exec",
        "cmdrun",
        "run_terminal_cmd",
        "ipython",
        "python",
        "execute_ipython_cell",
    }
)
CONDENSE_ACTIONS = frozenset(
    {
        "condense",
        "condensation",
        "summarize",
        "summarize_context",
        "compact",
        "compress",
        "compress_context",
        "condense_context",
        "memory_compress",
        "context_summary",
    }
)
EDITOR_ACTIONS = frozenset({"str_replace_editor", "editor", "file_editor", "text_editor"})
EDITOR_MODIFY_COMMANDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "edit"})

PATH_KEYS = ("path", "file", "file_path", "filename", "target_file", "filepath", "notebook_path")
CMD_KEYS = ("command", "cmd", "script", "code", "input")

# Normalised away before fingerprinting an observation: what changes on every run of the same
# command without meaning progress (durations, clocks, addresses, pids).
VOLATILE = re.compile(
    # Every match starts with a digit or `p`, taken first as a class so that the scan skips
    # other characters in C (a leading lookahead made the matcher try every position); each
    # branch then checks the character it starts with by a lookbehind. A duration is tried
    # where a digit run starts or right after a clock time (`12:00:00`, which can end inside
    # a run): from a later digit of the run it ends the same way, and retrying there was a
    # rescan per digit (0.33 s for 4,000 digits). The branches, in order: a duration, a clock
    # time, a hex address, a pid, a timestamp.
    r"[\dp](?:(?<=\d)(?:(?<!\d\d)|(?<=:\d\d\d))\d*+(\.\d++)?\s?(ms|s|sec|seconds)\b|"
    r"(?<=\d)\d?:\d{2}:\d{2}(\.\d+)?|(?<=0)x[0-9a-fA-F]+|(?<=p)(?<!\wp)id[ =:]\d+|"
    r"(?<=\d)\d{3}-\d{2}-\d{2}[T ]\d{2}:\d{2})"
)
# Ids that a rerun of the same command prints anew (issue 48): a UUID, a hex id (8 or more hex
# characters of one case, a digit and a letter among them: a commit, a container, a hash), a
# temporary file's name (Python's `tmpk3j2_x9a`, mktemp's `tmp.Ab3dE5fG7h`), an ISO timestamp
# whole (its seconds, fraction and zone too: `VOLATILE` stops at the minutes) and an epoch
# time (seconds or milliseconds, 2014-2033). Masked before `VOLATILE` by `mask_volatile`. As
# there, one class takes the first character (the scan skips the others in C) and each branch
# checks it by a lookbehind; the token starts after no word character (`(?<![\w-].)`: the two
# characters before the current one), so only a word's start is tried further.
IDS = re.compile(
    r"[0-9A-Fa-ft](?<![\w-].)(?:"
    r"(?<=[0-9A-Fa-f])[0-9A-Fa-f]{7}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}(?![\w-])|"
    r"(?<=\d)\d{3}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?(?![\w:])|"
    r"(?<=1)[4-9]\d{8}(?:\d{3}|\.\d{1,9})?(?![\w.])|"
    r"(?:(?<=\d)(?=\d*+[a-f])|(?<=[a-f])(?=[a-f]*+\d))[0-9a-f]{7,}+(?![\w-])|"
    r"(?:(?<=\d)(?=\d*+[A-F])|(?<=[A-F])(?=[A-F]*+\d))[0-9A-F]{7,}+(?![\w-])|"
    r"(?<=t)mp(?:[a-z0-9_]{8}|\.[A-Za-z0-9]{10})(?![\w.])"
    r")"
)
NO_RESULT = re.compile(
    r"^\s*(no (matches|results|files?|output)( found)?|nothing found|0 (results|matches)|not found|\[\]|\{\}|none)\.?\s*$",
    re.IGNORECASE,
)


def short_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


def input_text(action_input: Any) -> str:
    if action_input is None:
        return ""
    if isinstance(action_input, str):
        return action_input
    try:
        return orjson.dumps(action_input, option=orjson.OPT_SORT_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        # orjson refuses nesting deeper than 254 levels; str() would recurse past Python's
        # limit on deeper input. A flat, bounded rendering is enough to compare steps.
        return _flat_text(action_input)


def _flat_text(value: Any, limit: int = 4000) -> str:
    """Leaf values of any nesting depth, iteratively (no recursion), up to `limit` chars."""
    out: list[str] = []
    size = 0
    stack: list[Any] = [value]
    while stack and size < limit:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(reversed([x for kv in sorted(v.items(), key=lambda kv: str(kv[0])) for x in kv]))
        elif isinstance(v, list | tuple):
            stack.extend(reversed(v))
        else:
            t = str(v)[:limit]
            out.append(t)
            size += len(t) + 1
    return " ".join(out)[:limit]


def _command(action_input: Any) -> str:
    if isinstance(action_input, str):
        return action_input
    if isinstance(action_input, dict):
        for k in CMD_KEYS:
            v = action_input.get(k)
            if isinstance(v, str):
                return v
    return ""


def _paths(action_input: Any, first_line_only: bool) -> list[str]:
    """Files a tool call names: its path arguments, or file-shaped tokens of a string input
    (only its first line for edit tools, whose body is code, not file names)."""
    found: list[str] = []
    if isinstance(action_input, dict):
        for k in PATH_KEYS:
            v = action_input.get(k)
            if isinstance(v, str) and v:
                found.append(v)
            elif isinstance(v, list):
                found.extend(x for x in v if isinstance(x, str))
    elif isinstance(action_input, str) and action_input:
        text = action_input[:1000]
        if first_line_only:
            text = text.split("\n", 1)[0]
        found = [t for t in text.split() if is_file_path(t)][:4]
    seen: list[str] = []
    for p in found:
        p = normalise_path(p.strip())
        if p and p not in seen:
            seen.append(p)
    return seen[:4]


def _cut_paths(paths: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """At most PATHS_KEPT paths of at most PATH_KEPT chars each, in order, without repeats."""
    return tuple(dict.fromkeys(p[:PATH_KEPT] for p in paths[:PATHS_KEPT]))


def normalise_obs(obs: str) -> str:
    return " ".join(mask_volatile(obs[:OBS_HASHED]).split())


def mask_volatile(text: str) -> str:
    """`VOLATILE.sub("#", IDS.sub("#", text))`, one place for every reader of a result (the
    observation's fingerprint, the floor's units): nine outputs in ten hold nothing to mask,
    and a check in C says so without the scan (a short one is scanned: the check would cost
    more)."""
    text = mask_ids(text)
    if len(text) > VARYING_FROM and VOLATILE is _VARYING_IN and text.isascii() and not _may_vary(text):
        return text
    return VOLATILE.sub("#", text)


@functools.lru_cache(maxsize=32)
def mask_ids(text: str) -> str:
    """`IDS.sub("#", text)`. In an ASCII text only the lines that hold a candidate (`_ID_HINTS`,
    found by C substring searches) are scanned: no match spans lines, and the pattern's first
    class is common enough (a digit, a-f, t) that a whole scan cost ~0.2 us a character.
    Remembered for the last texts: a step's result is read by the fingerprint, the floor and
    the loop signal, and a loop sends the same result again."""
    if IDS is not _IDS_IN or not text.isascii():
        return IDS.sub("#", text)
    read = text.encode("ascii").translate(_HEX_READ)
    at = _next_hint(read, 0)
    if at < 0:
        return text
    out: list[str] = []
    done = 0
    while at >= 0:
        start = text.rfind("\n", done, at) + 1 or done
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        out.append(text[done:start])
        out.append(IDS.sub("#", text[start:end]))
        done = end
        at = _next_hint(read, end)
    out.append(text[done:])
    return "".join(out)


# An ASCII text read with every hex digit (either case) as "h": every `IDS` match but a
# temporary name leaves eight of them in a row or a date's "hhhh-hh-hh" in it; every temporary
# name holds "tmp" (none of its letters is a hex digit).
_HEX_READ = bytes(0x68 if chr(c) in "0123456789abcdefABCDEF" else c for c in range(128)) + bytes(
    range(128, 256)
)
_ID_HINTS = (b"hhhhhhhh", b"hhhh-hh-hh", b"tmp")
_IDS_IN = IDS  # the pattern `_ID_HINTS` were read from (one put in its place is always run whole)


def _next_hint(read: bytes, pos: int) -> int:
    """Where the first `_ID_HINTS` occurs in `read` from `pos` on; -1: nowhere."""
    found = [i for i in (read.find(h, pos) for h in _ID_HINTS) if i >= 0]
    return min(found) if found else -1


# An ASCII text read with every digit as "0", every whitespace character as a space, "x" as
# "s", "-" as ":" and the letter "m" dropped: every `VOLATILE` match leaves one of these in it
# (a duration "0s" or "0 s" (ms, sec and seconds start with "m" or "s"), a hex address "0x",
# a clock time or a timestamp's date "0000-00-00", a pid). A text with none is not scanned:
# `VOLATILE` tries each digit of it, ~25 us for an output of 1,000 characters; these four
# searches run in C.
_VARYING = (b"0s", b"0 s", b"0:00:00", b"pid")
_VARYING_READ = bytes(
    0x30
    if chr(c).isdigit()
    else 0x20
    if chr(c).isspace()
    else ord("s")
    if chr(c) == "x"
    else ord(":")
    if chr(c) == "-"
    else c
    for c in range(128)
) + bytes(range(128, 256))


VARYING_FROM = 200  # chars of an output from which `_may_vary` is asked first
# The pattern `_VARYING` was read from: a pattern put in its place (`bench.regex_cost` puts the
# old one back) runs on every text.
_VARYING_IN = VOLATILE


def _may_vary(ascii_text: str) -> bool:
    """`VOLATILE` may match in this ASCII text (False: it finds nothing)."""
    read = ascii_text.encode("ascii").translate(_VARYING_READ, b"m")
    return any(k in read for k in _VARYING)


def obs_sketch(norm_obs: str, k: int = 8) -> list[int]:
    """Bottom-k sketch of word 3-shingles of a normalised observation: a k-int summary whose
    overlap estimates Jaccard similarity. crc32 keeps it cheap and the same in every process."""
    words = norm_obs.lower().split()[:SKETCH_WORDS]
    if len(words) < 3:
        shingles = {" ".join(words)} if words else set()
    else:
        shingles = {" ".join(words[i : i + 3]) for i in range(len(words) - 2)}
    return sorted(zlib.crc32(s.encode()) for s in shingles)[:k]


def sketch_similarity(a: list[int], b: list[int]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    k = max(len(a), len(b))
    union = sorted(set(a) | set(b))[:k]
    both = set(a) & set(b)
    return sum(1 for h in union if h in both) / len(union)


T = TypeVar("T")


class lazy(Generic[T]):
    """`functools.cached_property` without its lock (Python 3.11 takes an RLock on every first
    access, six times a step): computed once, then read from the instance dict. The features
    are a frozen value used by one thread, so a race could only compute the same value twice."""

    def __init__(self, fn: Callable[[Any], T]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> T:
        value = self.fn(obj)
        obj.__dict__[self.name] = value  # a non-data descriptor: the instance dict wins from now on
        return value


@dataclass(frozen=True)
class StepFeatures:
    """One step, reduced to what the scorer and the monitors compare.

    What only the monitors read (the observation masked and fingerprinted, its error line,
    whether a message coordinates) is computed on first use: a run without monitors, or with
    a scorer that reads the thought alone, does not pay for it. Values stay pure functions of
    the fields, so the features are still a value."""

    step: int
    thought: str
    action: str | None  # lower-cased tool name
    action_label: str  # the tool name as the agent spelled it, for steering text
    act_text: str  # "tool: input", truncated: what loops are matched on
    sig: str  # exact action signature (tool + full input)
    command: str
    paths: tuple[str, ...]
    observation: str
    is_error: bool
    modifies: bool
    verifies: bool
    reads: bool
    finishes: bool
    condenses: bool
    empty: bool  # no thought and no action: an empty model response
    agent: str = ""  # who spoke or acted (multi-agent systems); "" for a single agent
    takes_lead: bool = False  # the step says its agent leads the run from now on (a hand-off)
    by_user: bool = False  # the speaker is the user or its proxy (who set the task): never the lead
    # the observation is the user's reply (the action asked the user: `ASKS_USER`, or the step's
    # `observation_source` is "user"), not a tool's result: the user's words, never data
    obs_by_user: bool = False
    cell: bool = False  # the input is a Python cell (`pycode`)
    note: bool = False  # the speaker's label marks an internal note ("Orchestrator (thought)")
    message: bool = False  # no tool ran: a message to the user or to other agents
    changed: tuple[str, ...] = ()  # files this step modified
    could_not_run: bool = False  # a verification attempt whose program or script was missing
    current_file_edit: bool = False  # an edit that names no file: it changes the open file
    # A command's segments in order (`shell.Op`: check, change, cp/mv): verification reads them.
    ops: tuple[tuple[str, ...], ...] = ()
    # The tool input as text (JSON with sorted keys when structured), first INPUT_KEPT chars.
    input: str = ""
    difficulty: float | None = None  # what the agent supplied (it wins over any scorer's)
    # The input, or a text in it, ends where a producer (or `max_chars`) cut it: two equal
    # inputs may then hide different content (two rewrites of one file, cut at 4,000 chars).
    input_cut: bool = False
    # The observation ends where its producer cut it (a round length): its tail, where a test
    # summary or a traceback's error sits, is unseen.
    observation_cut: bool = False
    # The observation uncut (`observation` is cut to the thought limit): its head and tail are
    # what `outcome` and `obs_digest` read.
    whole_observation: str = field(default="", repr=False)
    # The event's `ts` (the agent's clock, seconds): what tells waiting from looping
    # (`waiting`); never the worker's clock, so replay reads the same times.
    ts: float | None = None

    @lazy
    def outcome(self) -> Outcome:
        """The whole observation read (head and tail, `observation.read`): failed, how badly,
        tests. A test summary sits at the end of a long output."""
        return read(self.whole_observation, self.is_error)

    @lazy
    def obs_digest(self) -> int:
        """The observation's digest (digits masked, head and tail): two results the same but
        for numbers compare equal. 0: no observation."""
        return digest(window(self.whole_observation)) if self.whole_observation else 0

    @lazy
    def obs_norm(self) -> str:
        """The observation with volatile parts masked: what fingerprints and sketches use."""
        return normalise_obs(self.observation)

    @lazy
    def obs_hash(self) -> str:
        return short_hash(self.obs_norm)

    @property
    def obs_empty(self) -> bool:
        """No output, or an explicit "no results"."""
        norm = self.obs_norm
        return not norm or bool(NO_RESULT.match(norm))

    @lazy
    def error_line(self) -> str:
        """The observation's most telling line when it is an error."""
        return _error_line(self.observation) if self.is_error else ""

    @lazy
    def topic(self) -> str:
        """`topic_text`: drift and sprawl both read it."""
        about = (
            self.command or " ".join(self.paths) or (self.act_text.split(":", 1)[-1] if self.act_text else "")
        )
        return _squeezed_head(" ".join(p for p in (self.thought.strip(), about) if p), TOPIC_CHARS)

    @lazy
    def coordination(self) -> bool:
        """Speaker routing, ledger/status updates, fact surveys and plans, "TERMINATE", an
        agent's internal note."""
        return self.message and (self.note or is_coordination(self.thought) or is_planning(self.thought))


EXCEPTION_LINE = re.compile(r"\b\w*(Error|Exception|Fault)\b:?|^E\s|\berror:", re.IGNORECASE)
ERROR_WORDS = re.compile(r"(error|exception|failed|traceback|cannot|denied|not found)", re.IGNORECASE)
# `Name(Error|Exception): message`, where it starts: the last one of a line is the innermost
# error of a chain ("AgentExecutionError: ... : TypeError: f() got an unexpected keyword").
RAISED = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?=: \S)")
# Noise a tool prints around an error: warnings and traceback frames say where, not what.
ERROR_NOISE = re.compile(
    r"warning:|\bW\d{3}\b|^File \"[^\"\n]*\", line \d|^[~^\s]+$|^Traceback \(most recent call last\):?$",
    re.IGNORECASE,
)
FRAME = re.compile(r'File "[^"\n]*", line \d')
# A label that says only that something failed ("ERROR:", "Error:", "FAILED:"): its message
# is on the next line.
ERROR_LABEL = re.compile(r"^[\W_]*(error|exception|failed|failure|fatal)[\W_]*$", re.IGNORECASE)
ERROR_LINES = 30
ERROR_KEPT = 160


def _error_line(obs: str) -> str:
    """The line that says what went wrong, with durations, times and addresses masked so reruns
    compare equal: the last raised `Name(Error|Exception): message` (its innermost error, when
    one wraps another), else the last line with an error word; never a warning or a traceback
    frame, and a bare label ("ERROR:") together with the message on the line after it."""
    lines: list[str] = []  # the last ERROR_LINES non-blank lines, read from the end
    indents: list[int] = []  # ... and how far each was indented
    for ln in reversed(obs.strip().splitlines()):
        if stripped := ln.strip():
            lines.append(stripped)
            indents.append(len(ln) - len(ln.lstrip()))
            if len(lines) == ERROR_LINES:
                break
    lines.reverse()
    indents.reverse()
    # a frame's next line is the source it points at, not an error, unless there is no source
    # (`python -c`, a REPL, a frozen module): then the error itself follows the frame, no
    # deeper than it and raised (`ValueError: ...`)
    useful = [
        i
        for i, ln in enumerate(lines)
        if not (
            _noise(ln)
            or (i and FRAME.match(lines[i - 1]) and not (indents[i] <= indents[i - 1] and RAISED.match(ln)))
        )
    ]
    for i in reversed(useful):
        head = lines[i][:2000]
        # every match is followed by "Error: " or "Exception: ": a line without is not scanned
        raised = "Error: " in head or "Exception: " in head
        starts = [m.start() for m in RAISED.finditer(head)] if raised else []
        if starts:
            return normalise_obs(lines[i][starts[-1] :])[:ERROR_KEPT]
    for says in (_exception_line, _error_words):
        for i in reversed(useful):
            if says(lines[i]):
                return _with_message(lines, useful, i)
    # no error words: a framework's complaint leads with what went wrong; not a traceback cut
    # before its error, nor a heading ("Operations to perform:") that announces a log
    if not useful or any(FRAME.match(ln) for ln in lines):
        return ""
    first = lines[useful[0]]
    return (
        ""
        if first.endswith(":") and not ERROR_LABEL.match(first)
        else _with_message(lines, useful, useful[0])
    )


_W_DIGIT = re.compile(r"[wW][0-9]")


def _noise(line: str) -> bool:
    r"""`ERROR_NOISE.search(line)`. Past the line's start only "warning:" and `W\d{3}` can
    match, both at a "w": an ASCII line with neither is matched at its start alone (the
    case-insensitive search tried every character of lines that can be thousands long)."""
    if line.isascii() and "warning:" not in line.lower() and not _W_DIGIT.search(line):
        return ERROR_NOISE.match(line) is not None
    return ERROR_NOISE.search(line) is not None


def _exception_line(line: str) -> bool:
    r"""`EXCEPTION_LINE.search(line)`: an ASCII line without "error", "exception" or "fault" in
    any case can match only `^E\s`, at its start."""
    if line.isascii():
        low = line.lower()
        if "error" not in low and "exception" not in low and "fault" not in low:
            return EXCEPTION_LINE.match(line) is not None
    return EXCEPTION_LINE.search(line) is not None


_ERROR_WORDS_LOWER = ("error", "exception", "failed", "traceback", "cannot", "denied", "not found")


def _error_words(line: str) -> bool:
    """`ERROR_WORDS.search(line)`: in an ASCII line, one of its words in lower case."""
    if line.isascii():
        low = line.lower()
        return any(w in low for w in _ERROR_WORDS_LOWER)
    return ERROR_WORDS.search(line) is not None


def _with_message(lines: list[str], useful: list[int], i: int) -> str:
    """Line `i`, joined with the next useful line when it is only a label."""
    line = lines[i]
    if ERROR_LABEL.match(line):
        nxt = next((j for j in useful if j > i), None)
        if nxt is not None:
            line = f"{line} {lines[nxt]}"
    return normalise_obs(line)[:ERROR_KEPT]


COORDINATION = re.compile(
    # `\W*+`: leading punctuation read once (backtracking it against `\s*` was quadratic)
    r"^\W*+(next speaker\b|terminate\W*$|\{?\s*\"?(is_request_satisfied|next_speaker|instruction_or_question|"
    r"is_in_loop|is_progress_being_made)\b|(updated |initial )?(ledger|plan|fact sheet)\s*:|"
    r"(please )?(continue|proceed|go ahead)\W*$)|group chat manager|let other participants?\b",
    re.IGNORECASE,
)
# A scheduled survey of the facts and the plan, which planning agents write every few steps
# (sometimes in the shape of a final answer): its sections are named after the facts.
FACT_SURVEY = re.compile(
    r"\bfacts (?:given in the task|that we have learned|(?:still )?to (?:look up|derive))\b"
    r"|\b(?:updated|new) list of facts\b",
    re.IGNORECASE,
)
PLANNING_CHARS = 1500  # of a message searched for the survey's headings
FINAL_ANSWER = re.compile(r"^\W*(final answer|final_answer)\b", re.IGNORECASE)
# A group chat ends on a message whose last word is TERMINATE (not a quoted "TERMINATE": an
# executor's "reply me only with \"TERMINATE\"" routes the chat, it does not end it).
TERMINATES = re.compile(r"(?<![\"'\u201c\u2018\w])TERMINATE\W{0,8}$")


# A planning message: a fact survey or (re)plan that a framework schedules (smolagents' "1. Facts
# given in the task" and "Here is the updated list of facts", Magentic-One's "We are working to
# address the following user request" and fact sheets): it restates the task, it does no work.
PLANNING = re.compile(
    r"^\W*+(?:final_answer\W*+)?(?:1\.\s*+facts (?:given|survey)|here(?: is|['\u2019]s) (?:the |an )?"
    r"(?:updated |initial )?(?:list of )?(?:facts|fact sheet|plan)\b|we are working to address the following|"
    r"(?:updated |initial )?facts? survey\b)",
    re.IGNORECASE,
)


def is_planning(text: str) -> bool:
    """A fact survey or plan update (see PLANNING)."""
    return bool(PLANNING.search(text[:200]))


def is_coordination(text: str) -> bool:
    """A message that routes the conversation or re-plans instead of doing work: "Next
    speaker: Coder", "TERMINATE", an orchestrator ledger, the executor's "no code to run, let
    others continue", a scheduled facts-and-plan update."""
    t = text.strip()
    return bool(t) and (
        _coordinates(t[:400])
        or (len(t) <= 40 and t.upper() == t and "TERMINATE" in t)
        or _surveys_facts(t[:PLANNING_CHARS])
    )


_COORDINATION_READ = COORDINATION  # the pattern `_coordinates` was read from


def _coordinates(head: str) -> bool:
    """`COORDINATION.search(head)`. Past the start only its two phrases can match: an ASCII head
    without either is matched at its start alone (the case-insensitive search tried every
    character, ~10 us of a chat message)."""
    if COORDINATION is _COORDINATION_READ and head.isascii():
        low = head.lower()
        if "group chat manager" in low:
            return True
        if "let other participant" not in low:
            return COORDINATION.match(head) is not None
    return COORDINATION.search(head) is not None


def _surveys_facts(head: str) -> bool:
    """`FACT_SURVEY.search(head)`: every match holds "facts" in some case, which an ASCII head
    without it is not scanned for (~25 us of a chat message)."""
    if head.isascii() and "facts" not in head.lower():
        return False
    return FACT_SURVEY.search(head) is not None


# A speaker's label may qualify the agent: "Orchestrator (thought)", "Orchestrator (-> WebSurfer)",
# "Orchestrator (final answer)" (Magentic-One's roles). The agent is the name before it; the
# qualifier may say the message is an internal note or the run's final answer.
QUALIFIED = re.compile(r"^([^()]*?\S)\s*\(([^()]{1,60})\)$")
NOTE_ROLE = re.compile(r"^(thought|thinking|inner|internal|reasoning|plan|planning|ledger)\b", re.IGNORECASE)
FINAL_ROLE = re.compile(r"^final[ _-]?answer$", re.IGNORECASE)
# The user, or the agent that stands in for it: it set the task, it never leads the work.
USER_SPEAKER = re.compile(
    r"^(human|user|users?[ _-]?proxy(?:[ _-]?agent)?|admin|initializer)$", re.IGNORECASE
)


# Actions whose observation is the user's reply: the agent asked the user (tau-bench's `respond`,
# an `ask_user` tool, a chat reply answered by the user's next turn). The call decides, never the
# reply's wording: a tool result cannot pass for the user by what it says.
ASKS_USER = frozenset(
    {
        "respond",
        "reply_to_user",
        "respond_to_user",
        "message_user",
        "send_message_to_user",
        "ask_user",
        "ask_human",
        "ask_the_user",
        "ask_user_question",
        "ask_followup_question",
        "ask_for_clarification",
        "request_clarification",
        "request_user_input",
        "get_user_input",
        "human_input",
        "user_input",
    }
)


def obs_source_is_user(ev: dict[str, Any], action: str | None) -> bool:
    """Whether a step's observation is the user's words: its `observation_source` says so, or,
    without one, its action asks the user (`ASKS_USER`)."""
    src = ev.get("observation_source")
    if src is not None:
        return bool(src == "user")
    return action in ASKS_USER


def speaker(label: str) -> tuple[str, str]:
    """(agent, role) of a speaker's label: role "note", "final" or ""."""
    m = QUALIFIED.match(label[: NAME_KEPT * 2]) if label.endswith(")") else None
    if m is None:
        return label, ""
    role = m[2].strip()
    return m[1], "note" if NOTE_ROLE.match(role) else "final" if FINAL_ROLE.match(role) else ""


def extract(ev: dict[str, Any], max_chars: int) -> StepFeatures:
    thought = ev.get("thought") or ""
    if not isinstance(thought, str):
        thought = str(thought)
    thought = thought[:max_chars]
    raw_agent = ev.get("agent")
    agent = raw_agent.strip() if isinstance(raw_agent, str) else ""
    raw_action = ev.get("action")
    label = raw_action.strip()[:NAME_KEPT] if isinstance(raw_action, str) and raw_action.strip() else None
    action = label.lower().replace("-", "_") if label else None
    raw_input = ev.get("action_input")
    raw_obs = ev.get("observation")
    if (
        label is not None
        and not agent
        and raw_input is None
        and raw_obs is None
        and action not in FINISH_ACTIONS
        and not is_shell_program(label)
    ):
        # A multi-agent transcript without the `agent` field: the speaker's name in `action`,
        # no input, no result. It is a message, not a tool call.
        agent, label, action = label, None, None
    agent, role = speaker(agent)
    whole_input = input_text(raw_input)
    itext = whole_input[:max_chars]
    whole_obs = raw_obs or ""
    if not isinstance(whole_obs, str):
        whole_obs = input_text(whole_obs)
    obs = whole_obs[:max_chars]
    is_error = bool(ev.get("observation_is_error"))

    command = shown = ""
    cell = _command(raw_input) if action in CELL_ACTIONS or action in ("python", "python3") else ""
    cell = cell if is_cell(action, cell) else ""
    is_error = is_error or bool(cell and cell_unparsed(obs))  # a SyntaxError for the cell itself
    if cell:
        pass  # a Python cell: read below, by `pycode`, not as a command line
    elif action in SHELL_ACTIONS:
        command = _command(raw_input)
        if is_shell_program(label or "") and is_file_path(command.split(" ", 1)[0]) and "\n" not in command:
            command = f"{label} {command}"  # `python` with input `fix.py`: the program's arguments
    elif label is not None and is_shell_program(label) and isinstance(raw_input, str | None):
        command = f"{label} {raw_input or ''}".strip()  # SWE-agent: program in action, rest in input
    editor_cmd = raw_input.get("command") if isinstance(raw_input, dict) else None
    modifies = verifies = reads = submits = False
    changed: tuple[str, ...] = ()
    ops: tuple[tuple[str, ...], ...] = ()
    if command or cell:
        facts = analyse(command) if command else analyse_cell(cell)
        if cell and facts.runs:  # a cell is named by the commands it runs, as a person would
            command = shown = " && ".join(facts.runs)
        verifies, modifies, reads, submits = facts.verifies, facts.modifies, facts.reads, facts.submits
        submits = submits and not (cell and is_error)  # a cell that failed stopped before its end
        ops = tuple(tuple(x[:PATH_KEPT] for x in op) for op in facts.ops[:20])
        paths = tuple(dict.fromkeys([*facts.modify_paths, *facts.verify_paths, *facts.read_paths]))[:4]
        changed = facts.modify_paths
    else:
        first = raw_input.split(None, 1)[0] if isinstance(raw_input, str) and raw_input.strip() else ""
        if isinstance(raw_input, str) and first and is_shell_program(first):  # a command line: its files
            f0 = analyse(raw_input)
            paths = tuple(dict.fromkeys([*f0.modify_paths, *f0.verify_paths, *f0.read_paths]))[:4]
        else:
            paths = tuple(_paths(raw_input, first_line_only=action in EDIT_ACTIONS))
        if action in EDIT_ACTIONS:
            modifies = True
        elif action in EDITOR_ACTIONS:
            modifies = editor_cmd in EDITOR_MODIFY_COMMANDS
            reads = not modifies
        elif action in READ_ACTIONS:
            reads = True
        elif action is not None and re.search(r"(test|lint|check|verify|validate|typecheck)", action):
            verifies = True
        changed = paths if modifies else ()
    not_run = verifies and could_not_run(obs)
    if not_run:
        verifies = False
    message = action is None
    # a planning update written as a final answer ("final_answer: {facts ...}") ends nothing
    finishes = (
        action in FINISH_ACTIONS
        or submits
        or (
            message
            and (
                role == "final"
                or (bool(FINAL_ANSWER.match(thought)) and not is_coordination(thought))
                or bool(TERMINATES.search(thought[-40:]))
            )
        )
    )
    condenses = action in CONDENSE_ACTIONS
    act_text = f"{label}: {shown or itext}"[:TEXT_KEPT] if label else ""
    # Every path is cut here, once: the monitors keep them in the run state, and a producer's
    # 250 KB "path" must not make a state the changelog cannot hold.
    paths = _cut_paths(paths)
    changed = _cut_paths(changed)
    return StepFeatures(
        step=int(ev.get("step") or 0),
        thought=thought,
        action=action,
        action_label=label or "",
        act_text=act_text,
        sig=short_hash(f"{action}\x00{itext}") if action else "",
        command=command[:TEXT_KEPT],
        paths=paths,
        observation=obs,
        is_error=is_error,
        modifies=modifies,
        verifies=verifies,
        reads=reads,
        finishes=finishes,
        condenses=condenses,
        empty=not thought.strip() and action is None,
        agent=agent[:NAME_KEPT],
        takes_lead=bool(agent) and ev.get("lead") is True,
        by_user=bool(USER_SPEAKER.match(agent)),
        obs_by_user=bool(obs) and obs_source_is_user(ev, action),
        cell=bool(cell),
        note=role == "note",
        message=message,
        changed=changed,
        could_not_run=not_run,
        current_file_edit=modifies and not changed and action in EDIT_ACTIONS,
        ops=ops,
        input=itext[:INPUT_KEPT],
        difficulty=_number(ev.get("difficulty")),
        input_cut=_looks_cut(raw_input, len(whole_input), max_chars),
        observation_cut=_round_length(whole_obs),
        whole_observation=whole_obs,
        ts=_number(ev.get("ts")),
    )


CUT_MIN = 1000  # a text this long whose length is a round number was cut by its producer
CUT_UNITS = (500, 512)


def _looks_cut(raw_input: Any, whole: int, max_chars: int) -> bool:
    """The input was cut: longer than we keep, or a text of it at a round length ≥ CUT_MIN."""
    if whole > max_chars:
        return True
    if whole < CUT_MIN:
        return False  # every text in the input is shorter than its whole (JSON) form
    texts = (
        [raw_input]
        if isinstance(raw_input, str)
        else list(raw_input.values())[:16]
        if isinstance(raw_input, dict)
        else []
    )
    return any(isinstance(t, str) and _round_length(t) for t in texts)


def _round_length(text: str) -> bool:
    return len(text) >= CUT_MIN and any(len(text) % u == 0 for u in CUT_UNITS)


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


TOPIC_CHARS = 160


def topic_text(f: StepFeatures) -> str:
    """What a step is about: the thought plus the command or files it touched (the action's
    raw JSON input would add the same tool vocabulary to every step and blur the topic).
    Drift and sprawl embed this same text, so each step costs one fast embedding (and one
    reading: the features keep it)."""
    return f.topic


def _squeezed_head(text: str, n: int) -> str:
    """`" ".join(text.split())[:n]` without splitting all of a 20,000-character thought: the
    first n characters of the squeezed text depend only on a head of the text that squeezes
    to at least n characters (a word cut at the head's end is cut after character n)."""
    head = 4 * n
    while head < len(text):
        squeezed = " ".join(text[:head].split())
        if len(squeezed) > n:
            return squeezed[:n]
        head *= 4
    return " ".join(text.split())[:n]
