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
from dataclasses import dataclass, field
from typing import Any

from .base import NOTHING, Finding, quote
from .features import StepFeatures, obs_sketch, short_hash, sketch_similarity
from .semantics import Semantics

WINDOW = 12
# Cascade band for "the same action, reworded": the static model is sure above FAST_HI and
# sure of a miss below FAST_LO; in between MiniLM decides against REWORDED_SIM.
FAST_HI = 0.86
FAST_LO = 0.45
REWORDED_SIM = 0.62
NO_PROGRESS_OBS = 0.5  # sketch overlap above which two results carry the same information

# Window entry layout (compact lists keep the run state small).
STEP, ACTION, TEXT, SIG, OBS, SKETCH, ERR, ERRLINE, THOUGHT, EMPTY, CONDENSE, OBS_EMPTY, MODIFIES = range(13)
VERIFIES, PATHS, AGENT, MESSAGE, FACTS = 13, 14, 15, 16, 17
MESSAGE_CHARS = 160  # of a message step kept to compare with the same agent's next messages
REWORDED_MESSAGE = 0.85  # static-model cosine of two messages that say the same thing
# What a message adds: numbers, quoted or code strings, links, file names.
FACT = re.compile(r"\b\d[\d,.]*\d\b|\d{2,}|`[^`]{2,40}`|\"[^\"]{3,40}\"|https?://\S+|\b[\w-]+\.[a-z]{2,4}\b")


ENTRY_DEFAULTS: list[Any] = [False, [], "", "", []]  # VERIFIES .. FACTS: added later


@dataclass
class LoopState:
    window: list[list[Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # A state written before the entry grew (recovered from a changelog) is padded.
        if any(len(e) < AGENT + 1 for e in self.window):
            self.window = [
                [*e, *ENTRY_DEFAULTS[len(e) - VERIFIES :]] if len(e) < AGENT + 1 else e for e in self.window
            ]


def _entry(f: StepFeatures) -> list[Any]:
    return [
        f.step,
        f.action,
        f.act_text,
        f.sig,
        f.obs_hash,
        obs_sketch(f.obs_norm) if f.action else [],
        f.is_error,
        DIGITS.sub("#", f.error_line),  # "line 62230" and "line 62245": the same error
        short_hash(f.thought.strip()) if f.thought.strip() else "",
        f.empty,
        f.condenses,
        f.obs_empty,
        f.modifies,
        f.verifies,
        list(f.paths[:2]),
        f.agent,
        " ".join(f.thought.split())[:MESSAGE_CHARS] if f.message and not f.coordination else "",
        sorted({short_hash(m.lower())[:8] for m in FACT.findall(f.thought[:4000])})[:16] if f.message else [],
    ]


def _trailing(window: list[list[Any]], same: Any) -> int:
    n = 0
    for e in reversed(window):
        if not same(e):
            break
        n += 1
    return n


ID = re.compile(r"[\w#-]*\d[\w#-]*")


def _ids(text: str) -> set[str]:
    """Tokens with digits in an input: ids, numbers, versions. Inputs that differ in them ask
    about different things."""
    return set(ID.findall(text))


def _label(e: list[Any]) -> str:
    text: str = e[TEXT]
    return text.split(":", 1)[0] if text else str(e[ACTION])


DIGITS = re.compile(r"\d+")
SALIENT = re.compile(r'"(?:command|cmd|query|q|pattern|path|file|url)"\s*:\s*"((?:[^"\\]|\\.)*)')


def _input(e: list[Any]) -> str:
    """The input as a person would name it: the command, query or path, not the JSON."""
    text: str = e[TEXT]
    raw = text.split(":", 1)[1].strip() if ":" in text else text
    m = SALIENT.search(raw) if raw.startswith("{") else None
    return quote(m.group(1) if m else raw, 60)


def evaluate(st: LoopState, f: StepFeatures, sem: Semantics) -> tuple[LoopState, Finding]:
    cur = _entry(f)
    window = [*st.window[-(WINDOW - 1) :], cur]
    new = LoopState(window=window)
    found: list[Finding] = []

    # 1. Same action, same observation.
    if cur[SIG]:
        n = _trailing(window, lambda e: e[SIG] == cur[SIG] and e[OBS] == cur[OBS])
        total = sum(1 for e in window if e[SIG] == cur[SIG] and e[OBS] == cur[OBS])
        score = {2: 0.2, 3: 0.5}.get(n, 0.9 if n >= 4 else 0.0)
        score = max(score, 0.75 if total >= 4 else 0.45 if total == 3 else 0.0)
        if score:
            found.append(
                Finding(
                    score,
                    f"You have run `{_label(cur)}` with the same input ({_input(cur)}) {max(n, total)} times "
                    "and got the same result every time. Running it again will not change the outcome: "
                    "use the result you already have, then try a different approach (another command, "
                    "another file, or re-examine your assumption).",
                )
            )

    # 1b. The same edit, input for input, applied again: re-applying a change never moves the
    #     work on (SWE-agent inserting one block over and over, the file growing each time).
    if cur[SIG] and cur[MODIFIES]:
        n = sum(1 for e in window if e[SIG] == cur[SIG])
        if n >= 3:
            found.append(
                Finding(
                    0.9 if n >= 4 else 0.75,
                    f"You have applied the same change (`{_label(cur)}` {_input(cur)}) {n} times in the last "
                    f"{len(window)} steps. Applying it again will not help: look at the file as it is now "
                    "(the earlier attempts may have left duplicates) and decide what is still missing.",
                )
            )

    # 2. The same action failing with the same error (inputs may differ: a syntax error
    #    reported identically after each attempted edit).
    if cur[ERR] and cur[ERRLINE]:
        # Counted over this tool's own calls: edits between the attempts do not break the run.
        # Only edits may sit between the attempts; any other step breaks the run of failures.
        same_tool = [e for e in window if e[ACTION] == cur[ACTION] or not e[MODIFIES]]
        n = _trailing(same_tool, lambda e: e[ACTION] == cur[ACTION] and e[ERR] and e[ERRLINE] == cur[ERRLINE])
        score = 0.95 if n >= 4 else 0.85 if n == 3 else 0.35 if n == 2 else 0.0
        if score:
            found.append(
                Finding(
                    score,
                    f"`{_label(cur)}` ({_input(cur)}) has failed {n} times in a row with the same error: "
                    f'"{quote(f.error_line, 120)}". Stop retrying it as is: read the error, fix its '
                    "cause or change the approach, and only then run it again.",
                )
            )

    # 3. The same message, no tool call between.
    if cur[ACTION] is None and cur[THOUGHT] and (cur[MESSAGE] or not cur[AGENT]):
        mine = [e for e in window if e[AGENT] == cur[AGENT]]  # each agent's own messages
        n = _trailing(mine, lambda e: e[ACTION] is None and e[THOUGHT] == cur[THOUGHT])
        score = 0.85 if n >= 3 else 0.35 if n == 2 else 0.0
        if score:
            found.append(
                Finding(
                    score,
                    (f"{cur[AGENT]} has" if cur[AGENT] else "You have")
                    + f" written the same message {n} times without calling a tool. Take a "
                    "concrete action (run a command, open a file) or, if you are finished, give your "
                    "final answer.",
                )
            )

    # 4. A/B alternation over 6 steps, with the same results each time.
    if len(window) >= 6:
        w = window[-6:]
        a, b = w[-1], w[-2]
        if (
            a[SIG]
            and b[SIG]
            and a[SIG] != b[SIG]
            and all(w[i][SIG] == (a if i % 2 == 1 else b)[SIG] for i in range(6))
            and all(w[i][OBS] == (a if i % 2 == 1 else b)[OBS] for i in range(6))
        ):
            found.append(
                Finding(
                    0.85,
                    f"You are alternating between `{_label(b)}` ({_input(b)}) and `{_label(a)}` "
                    f"({_input(a)}) without progress for 6 steps. Break the cycle: decide what "
                    "information you still need and take one different action.",
                )
            )

    # 5. Empty responses.
    if cur[EMPTY]:
        n = _trailing(window, lambda e: e[EMPTY])
        score = 0.9 if n >= 3 else 0.3 if n == 2 else 0.0
        if score:
            found.append(
                Finding(
                    score,
                    f"Your last {n} responses were empty. Reply with your next concrete action or "
                    "your final answer.",
                )
            )

    # 6. Condensation after condensation.
    if cur[CONDENSE]:
        n = _trailing(window, lambda e: e[CONDENSE])
        score = 0.9 if n >= 10 else 0.5 if n >= 6 else 0.0
        if score:
            found.append(
                Finding(
                    score,
                    f"Your context has been condensed {n} times in a row with no work in between. "
                    "Resume the task: take the next concrete action from your plan.",
                )
            )

    # 7. The same action reworded, returning nothing new. Edits are left out: successive edits
    #    of one file look alike and answer alike ("file edited") yet are progress; an edit loop
    #    shows up as repeated errors or as the same test failing again (rules 1 and 2).
    if cur[TEXT] and not cur[CONDENSE] and not cur[MODIFIES] and not cur[VERIFIES]:
        # Only since the last change to the workspace (re-running tests after an edit is
        # verification, not a loop), and the cheap test first: only peers whose results
        # brought nothing new are embedded.
        since = max((i + 1 for i, e in enumerate(window[:-1]) if e[MODIFIES]), default=0)
        cur_ids = _ids(cur[TEXT])
        peers = [
            e
            for e in window[since:-1]
            if e[ACTION] == cur[ACTION]
            and e[AGENT] == cur[AGENT]
            and e[SIG] != cur[SIG]
            and not e[MODIFIES]
            and not e[VERIFIES]
            # the same query over other files or targets is exploration, not a rewording, and so
            # is the same lookup of another id (order #W4597054, then order #W4836353)
            and (not e[PATHS] or not cur[PATHS] or e[PATHS] == cur[PATHS])
            and _ids(e[TEXT]) == cur_ids
            and (
                (e[OBS_EMPTY] and cur[OBS_EMPTY])
                or (e[ERR] and cur[ERR])
                or sketch_similarity(e[SKETCH], cur[SKETCH]) >= NO_PROGRESS_OBS
            )
        ]
        if peers:
            sims = sem.matches(cur[TEXT], [e[TEXT] for e in peers], FAST_HI, FAST_LO)
            members = [e for e, s in zip(peers, sims, strict=True) if s >= REWORDED_SIM]
            repeats = [e for e in window[:-1] if e[SIG] == cur[SIG] and e[OBS] == cur[OBS]]
            n = 1 + len(members) + len(repeats)
            if members:
                score = 0.95 if n >= 5 else 0.85 if n == 4 else 0.7 if n == 3 else 0.3
                inputs = ", ".join(f'"{_input(e)}"' for e in [*members[-3:], cur])
                found.append(
                    Finding(
                        score,
                        f"You have issued `{_label(cur)}` {n} times with reworded inputs ({inputs}) and "
                        "it keeps returning the same or no results. That avenue is exhausted: change "
                        "strategy (a different term or tool, read the code directly, or reconsider "
                        "where the problem lives).",
                    )
                )

    # 9. The same agent re-issuing a reworded message that brings nothing new (multi-agent
    #    chats: an orchestrator re-sending the instruction that keeps failing).
    if cur[MESSAGE]:
        peers = [e for e in window[:-1] if e[MESSAGE] and e[AGENT] == cur[AGENT]]
        if len(peers) >= 2:
            # the static model only: chat messages are long and frequent, MiniLM on each would
            # cost more than the rest of the step; what they add is judged by facts below
            sims = sem.fast_sims(cur[MESSAGE], [e[MESSAGE] for e in peers])
            members = [e for e, s in zip(peers, sims, strict=True) if s >= REWORDED_MESSAGE]
            seen = {h for e in members for h in e[FACTS]}
            new_facts = [h for h in cur[FACTS] if h not in seen]
            n = 1 + len(members)
            if n >= 3 and not new_facts:
                who = f"{cur[AGENT]} has" if cur[AGENT] else "You have"
                quoted = ", ".join(f'"{quote(e[MESSAGE], 60)}"' for e in [*members[-2:], cur])
                found.append(
                    Finding(
                        0.85 if n >= 4 else 0.7,
                        f"{who} sent essentially the same message {n} times ({quoted}) and nothing new "
                        "has come of it. Repeating it will not change the answer: change the request "
                        "(another source, tool or agent, or a narrower question) or say what is blocking.",
                    )
                )

    if not found:
        return new, NOTHING
    return new, max(found, key=lambda x: x.score)
