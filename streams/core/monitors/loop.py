"""semantic_loop: the agent repeats itself instead of making progress.

Covers the stuck shapes a well-known coding-agent stuck detector looks for (same action and
same observation 4x, same action failing with the same error 3x, the same message 3x without a
tool call, A/B alternation over 6 steps, 3 empty responses, 10+ condensations in a row) plus
the one it cannot see: the same search or command reworded ("session timeout" / "session
expiry" / "session token expiration"), matched with embeddings. Identical commands whose output
changes (a test suite failing less each run) are progress, not a loop.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..scan import leftmost, names
from .base import NOTHING, Context, Finding, Monitor, quote
from .features import StepFeatures, obs_sketch, short_hash, sketch_similarity
from .semantics import Semantics

WINDOW = 12
# Cascade band for "the same action, reworded": the static model is sure above FAST_HI and
# sure of a miss below FAST_LO; in between MiniLM decides against REWORDED_SIM.
FAST_HI = 0.86
FAST_LO = 0.45
REWORDED_SIM = 0.62
NO_PROGRESS_OBS = 0.5  # sketch overlap above which two results carry the same information

MESSAGE_CHARS = 160  # of a message step kept to compare with the same agent's next messages
REWORDED_MESSAGE = 0.85  # static-model cosine of two messages that say the same thing
# What a message adds: numbers, quoted or code strings, links, file names (`\b[\w-]+\.[a-z]{2,4}\b`,
# which `scan.leftmost` finds in linear time: as one more alternative it was quadratic in a run).
FACT = re.compile(r"\b\d[\d,.]*\d\b|\d{2,}|`[^`]{2,40}`|\"[^\"]{3,40}\"|https?://\S+")
FACT_NAME = re.compile(names(r"\.[a-z]{2,4}\b"))
DIGITS = re.compile(r"\d+")
# Starts only where a run of id characters starts: a later start in the same run ends the same
# way, so retrying there (a rescan of the run per character) could not find anything new.
ID = re.compile(r"(?<![\w#-])[\w#-]*\d[\w#-]*")
SALIENT = re.compile(r'"(?:command|cmd|query|q|pattern|path|file|url)"\s*:\s*"((?:[^"\\]|\\.)*)')


@dataclass(slots=True)
class Entry:
    """What the loop rules remember of one step. Stored flattened (`encode`: a list in this
    field order, which keeps the run state small); states written before the later fields
    existed decode with their defaults."""

    step: int
    action: str | None
    text: str  # "tool: input"
    sig: str  # hash of action + input
    obs: str  # hash of the observation
    sketch: list[Any]  # observation sketch, for "nothing new"
    err: bool
    errline: str  # the error line, digits masked
    thought: str  # hash of the thought
    empty: bool
    condense: bool
    obs_empty: bool
    modifies: bool
    verifies: bool = False
    paths: list[str] = field(default_factory=list)
    agent: str = ""
    message: str = ""  # a message step's text (first MESSAGE_CHARS)
    facts: list[str] = field(default_factory=list)  # hashes of what a message states

    def encode(self) -> list[Any]:
        return [
            self.step,
            self.action,
            self.text,
            self.sig,
            self.obs,
            self.sketch,
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
        ]

    @classmethod
    def decode(cls, e: list[Any]) -> Entry:
        return cls(*e)

    @classmethod
    def of(cls, f: StepFeatures) -> Entry:
        return cls(
            step=f.step,
            action=f.action,
            text=f.act_text,
            sig=f.sig,
            obs=f.obs_hash,
            sketch=obs_sketch(f.obs_norm) if f.action else [],
            err=f.is_error,
            errline=DIGITS.sub("#", f.error_line),  # "line 62230" and "line 62245": the same error
            thought=short_hash(f.thought.strip()) if f.thought.strip() else "",
            empty=f.empty,
            condense=f.condenses,
            obs_empty=f.obs_empty,
            modifies=f.modifies,
            verifies=f.verifies,
            paths=list(f.paths[:2]),
            agent=f.agent,
            message=" ".join(f.thought.split())[:MESSAGE_CHARS] if f.message and not f.coordination else "",
            facts=sorted({short_hash(m.lower())[:8] for m in message_facts(f.thought[:4000])})[:16]
            if f.message
            else [],
        )


@dataclass(frozen=True)
class LoopState:
    """The last WINDOW steps, flattened (see `Entry`)."""

    window: list[list[Any]] = field(default_factory=list)


@dataclass(slots=True)
class Window:
    """What every rule sees: the entries up to and including the current step."""

    entries: list[Entry]
    features: StepFeatures

    @property
    def cur(self) -> Entry:
        return self.entries[-1]

    @property
    def before(self) -> list[Entry]:
        return self.entries[:-1]


Rule = Callable[[Window, Semantics], Finding | None]


def _trailing(entries: list[Entry], same: Callable[[Entry], bool]) -> int:
    n = 0
    for e in reversed(entries):
        if not same(e):
            break
        n += 1
    return n


def message_facts(text: str) -> list[str]:
    """What `FACT` or a file/host name matches in `text`, in order."""
    return [m[0] if m else text[s:e] for s, e, m in leftmost(FACT, FACT_NAME, text)]


def _ids(text: str) -> set[str]:
    """Tokens with digits in an input: ids, numbers, versions. Inputs that differ in them ask
    about different things."""
    return set(ID.findall(text))


def _label(e: Entry) -> str:
    return e.text.split(":", 1)[0] if e.text else str(e.action)


def _input(e: Entry) -> str:
    """The input as a person would name it: the command, query or path, not the JSON."""
    raw = e.text.split(":", 1)[1].strip() if ":" in e.text else e.text
    m = SALIENT.search(raw) if raw.startswith("{") else None
    return quote(m.group(1) if m else raw, 60)


def same_result(w: Window, sem: Semantics) -> Finding | None:
    """1. Same action, same observation."""
    cur = w.cur
    if not cur.sig:
        return None
    n = _trailing(w.entries, lambda e: e.sig == cur.sig and e.obs == cur.obs)
    total = sum(1 for e in w.entries if e.sig == cur.sig and e.obs == cur.obs)
    score = {2: 0.2, 3: 0.5}.get(n, 0.9 if n >= 4 else 0.0)
    score = max(score, 0.75 if total >= 4 else 0.45 if total == 3 else 0.0)
    if not score:
        return None
    return Finding(
        score,
        f"You have run `{_label(cur)}` with the same input ({_input(cur)}) {max(n, total)} times "
        "and got the same result every time. Running it again will not change the outcome: "
        "use the result you already have, then try a different approach (another command, "
        "another file, or re-examine your assumption).",
    )


def same_edit(w: Window, sem: Semantics) -> Finding | None:
    """1b. The same edit, input for input, applied again: re-applying a change never moves the
    work on (SWE-agent inserting one block over and over, the file growing each time)."""
    cur = w.cur
    if not (cur.sig and cur.modifies):
        return None
    n = sum(1 for e in w.entries if e.sig == cur.sig)
    if n < 3:
        return None
    return Finding(
        0.9 if n >= 4 else 0.75,
        f"You have applied the same change (`{_label(cur)}` {_input(cur)}) {n} times in the last "
        f"{len(w.entries)} steps. Applying it again will not help: look at the file as it is now "
        "(the earlier attempts may have left duplicates) and decide what is still missing.",
    )


def same_error(w: Window, sem: Semantics) -> Finding | None:
    """2. The same action failing with the same error (inputs may differ: a syntax error
    reported identically after each attempted edit)."""
    cur = w.cur
    if not (cur.err and cur.errline):
        return None
    # Counted over this tool's own calls: edits between the attempts do not break the run.
    # Only edits may sit between the attempts; any other step breaks the run of failures.
    same_tool = [e for e in w.entries if e.action == cur.action or not e.modifies]
    n = _trailing(same_tool, lambda e: e.action == cur.action and e.err and e.errline == cur.errline)
    score = 0.95 if n >= 4 else 0.85 if n == 3 else 0.35 if n == 2 else 0.0
    if not score:
        return None
    return Finding(
        score,
        f"`{_label(cur)}` ({_input(cur)}) has failed {n} times in a row with the same error: "
        f'"{quote(w.features.error_line, 120)}". Stop retrying it as is: read the error, fix its '
        "cause or change the approach, and only then run it again.",
    )


def same_message(w: Window, sem: Semantics) -> Finding | None:
    """3. The same message, no tool call between."""
    cur = w.cur
    if not (cur.action is None and cur.thought and (cur.message or not cur.agent)):
        return None
    mine = [e for e in w.entries if e.agent == cur.agent]  # each agent's own messages
    n = _trailing(mine, lambda e: e.action is None and e.thought == cur.thought)
    score = 0.85 if n >= 3 else 0.35 if n == 2 else 0.0
    if not score:
        return None
    return Finding(
        score,
        (f"{cur.agent} has" if cur.agent else "You have")
        + f" written the same message {n} times without calling a tool. Take a "
        "concrete action (run a command, open a file) or, if you are finished, give your "
        "final answer.",
    )


def alternation(w: Window, sem: Semantics) -> Finding | None:
    """4. A/B alternation over 6 steps, with the same results each time."""
    if len(w.entries) < 6:
        return None
    last = w.entries[-6:]
    a, b = last[-1], last[-2]
    if not (
        a.sig
        and b.sig
        and a.sig != b.sig
        and all(last[i].sig == (a if i % 2 == 1 else b).sig for i in range(6))
        and all(last[i].obs == (a if i % 2 == 1 else b).obs for i in range(6))
    ):
        return None
    return Finding(
        0.85,
        f"You are alternating between `{_label(b)}` ({_input(b)}) and `{_label(a)}` "
        f"({_input(a)}) without progress for 6 steps. Break the cycle: decide what "
        "information you still need and take one different action.",
    )


def empty_responses(w: Window, sem: Semantics) -> Finding | None:
    """5. Empty responses."""
    if not w.cur.empty:
        return None
    n = _trailing(w.entries, lambda e: e.empty)
    score = 0.9 if n >= 3 else 0.3 if n == 2 else 0.0
    if not score:
        return None
    return Finding(
        score,
        f"Your last {n} responses were empty. Reply with your next concrete action or your final answer.",
    )


def condensations(w: Window, sem: Semantics) -> Finding | None:
    """6. Condensation after condensation."""
    if not w.cur.condense:
        return None
    n = _trailing(w.entries, lambda e: e.condense)
    score = 0.9 if n >= 10 else 0.5 if n >= 6 else 0.0
    if not score:
        return None
    return Finding(
        score,
        f"Your context has been condensed {n} times in a row with no work in between. "
        "Resume the task: take the next concrete action from your plan.",
    )


def reworded_action(w: Window, sem: Semantics) -> Finding | None:
    """7. The same action reworded, returning nothing new. Edits are left out: successive edits
    of one file look alike and answer alike ("file edited") yet are progress; an edit loop
    shows up as repeated errors or as the same test failing again (rules 1 and 2)."""
    cur = w.cur
    if not cur.text or cur.condense or cur.modifies or cur.verifies:
        return None
    # Only since the last change to the workspace (re-running tests after an edit is
    # verification, not a loop), and the cheap test first: only peers whose results
    # brought nothing new are embedded.
    since = max((i + 1 for i, e in enumerate(w.before) if e.modifies), default=0)
    cur_ids = _ids(cur.text)
    peers = [
        e
        for e in w.before[since:]
        if e.action == cur.action
        and e.agent == cur.agent
        and e.sig != cur.sig
        and not e.modifies
        and not e.verifies
        # the same query over other files or targets is exploration, not a rewording, and so
        # is the same lookup of another id (order #W4597054, then order #W4836353)
        and (not e.paths or not cur.paths or e.paths == cur.paths)
        and _ids(e.text) == cur_ids
        and (
            (e.obs_empty and cur.obs_empty)
            or (e.err and cur.err)
            or sketch_similarity(e.sketch, cur.sketch) >= NO_PROGRESS_OBS
        )
    ]
    if not peers:
        return None
    sims = sem.matches(cur.text, [e.text for e in peers], FAST_HI, FAST_LO)
    members = [e for e, s in zip(peers, sims, strict=True) if s >= REWORDED_SIM]
    if not members:
        return None
    repeats = [e for e in w.before if e.sig == cur.sig and e.obs == cur.obs]
    n = 1 + len(members) + len(repeats)
    score = 0.95 if n >= 5 else 0.85 if n == 4 else 0.7 if n == 3 else 0.3
    inputs = ", ".join(f'"{_input(e)}"' for e in [*members[-3:], cur])
    return Finding(
        score,
        f"You have issued `{_label(cur)}` {n} times with reworded inputs ({inputs}) and "
        "it keeps returning the same or no results. That avenue is exhausted: change "
        "strategy (a different term or tool, read the code directly, or reconsider "
        "where the problem lives).",
    )


def reworded_message(w: Window, sem: Semantics) -> Finding | None:
    """9. The same agent re-issuing a reworded message that brings nothing new (multi-agent
    chats: an orchestrator re-sending the instruction that keeps failing)."""
    cur = w.cur
    if not cur.message:
        return None
    peers = [e for e in w.before if e.message and e.agent == cur.agent]
    if len(peers) < 2:
        return None
    # the static model only: chat messages are long and frequent, MiniLM on each would
    # cost more than the rest of the step; what they add is judged by facts below
    sims = sem.fast_sims(cur.message, [e.message for e in peers])
    members = [e for e, s in zip(peers, sims, strict=True) if s >= REWORDED_MESSAGE]
    seen = {h for e in members for h in e.facts}
    new_facts = [h for h in cur.facts if h not in seen]
    n = 1 + len(members)
    if n < 3 or new_facts:
        return None
    who = f"{cur.agent} has" if cur.agent else "You have"
    quoted = ", ".join(f'"{quote(e.message, 60)}"' for e in [*members[-2:], cur])
    return Finding(
        0.85 if n >= 4 else 0.7,
        f"{who} sent essentially the same message {n} times ({quoted}) and nothing new "
        "has come of it. Repeating it will not change the answer: change the request "
        "(another source, tool or agent, or a narrower question) or say what is blocking.",
    )


# In this order: on equal scores the earlier rule's finding is the one reported.
RULES: tuple[Rule, ...] = (
    same_result,
    same_edit,
    same_error,
    same_message,
    alternation,
    empty_responses,
    condensations,
    reworded_action,
    reworded_message,
)


def evaluate(st: LoopState, f: StepFeatures, ctx: Context, sem: Semantics) -> tuple[LoopState, Finding]:
    cur = Entry.of(f)
    kept = st.window[-(WINDOW - 1) :]
    w = Window([*(Entry.decode(e) for e in kept), cur], f)
    new = LoopState(window=[*kept, cur.encode()])
    found = [x for x in (rule(w, sem) for rule in RULES) if x is not None]
    if not found:
        return new, NOTHING
    return new, max(found, key=lambda x: x.score)


MONITOR = Monitor("semantic_loop", "loop", "loop", LoopState, evaluate)
