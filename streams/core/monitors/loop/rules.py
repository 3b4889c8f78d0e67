"""The loop rules: each a shape of repetition without progress, and the text that says it.

A rule reads the window of entries (`signal.Window`) and returns a finding whose text states
only what the entries show, or None. On equal scores the earlier rule in RULES is reported.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ....shared.taint import scan
from ....shared.untrusted import cut
from ... import instructions
from ...quoting import DO_NOT_ACT, holds_instructions, quoted
from ...reading import grounding
from .. import waiting
from ..base import Finding
from ..semantics import Semantics
from .signal import CONTENT_LINES, WORD, Entry, Window, frame_of, one_off, salient

# Cascade band for "the same action, reworded", on the query or command alone (`_asked`): the
# static model is sure above FAST_HI and sure of a miss below FAST_LO; in between MiniLM
# decides against REWORDED_SIM ("session timeout" / "session token expiration": 0.50).
FAST_HI = 0.86
FAST_LO = 0.45
REWORDED_SIM = 0.5
NO_PROGRESS_OBS = 0.5  # share of content lines above which two results carry the same information
NEAR_SAME = 0.75  # ... above which a failing rerun's result is nearly the one before
CUT_LINES_MOVED = 2  # sketch lines in which two cut results' sent parts may differ and be "nearly" equal
EDITS_SAID = 3  # edits between unchanged reruns before the text is about the edits
RERUNS_SAID = 4  # ... and runs of the check with that one result (3 rounds of edits, no change)
PAGE_LINES_MIN = 3  # content lines of a page before two pages can be called the same
REWORDED_MESSAGE = 0.85  # static-model cosine of two messages that say the same thing
SHARED_WORDS = 0.3  # ... and the share of the shorter one's words the other has too
# Starts only where a run of id characters starts: a later start in the same run ends the same
# way, so retrying there (a rescan of the run per character) could not find anything new.
ID = re.compile(r"(?<![\w#-])[\w#-]*\d[\w#-]*")
# Name-like words of an input: snake_case, camelCase, Class::member (not dotted names: a
# web query's site:host.org is no code name). Two inputs that differ in one
# look for different things (`grep "class ASTBase"` then `grep "class Symbol"`), not reworded.
CODE_NAME = re.compile(r"[^\W_]_[^\W_]|[a-z][A-Z]|::")
SPLIT = re.compile(r"[^\w.:]+")
# A call that failed for a reason of the moment: running it again may work.
TRANSIENT = re.compile(
    r"time[d ]?out|rate.?limit|too many requests|\b(429|502|503|504)\b|temporar|unavailable|"
    r"connection (reset|refused|aborted)|try again",
    re.IGNORECASE,
)
# A call with an argument the tool does not take (Python's TypeError, as tool frameworks relay
# it): the fix is to drop that argument, whatever else is varied.
UNEXPECTED_ARG = re.compile(r"unexpected keyword argument '([^'\n]{0,40})'")
MISSING_PROGRAM = re.compile(r"command not found|is not recognized as|: not found$")
LEADS = 3  # content lines of a search result that make it a list of leads
CYCLE_MIN = 3  # calls re-issued in order, each with its earlier result, that make a cycle
GROWN_MIN = 3  # content lines of an earlier result found again before a grown result counts as it


def _elsewhere(a: Entry, b: Entry) -> bool:
    """Two calls that acted on different pages: the same input asks something else there."""
    return bool(a.place and b.place and a.place != b.place)


Rule = Callable[[Window, Semantics], Finding | None]


def _trailing(entries: list[Entry], same: Callable[[Entry], bool]) -> int:
    n = 0
    for e in reversed(entries):
        if not same(e):
            break
        n += 1
    return n


def _ids(text: str) -> set[str]:
    """Tokens with digits in an input: ids, numbers, versions. Inputs that differ in them ask
    about different things."""
    return set(ID.findall(text))


def _code_names(text: str) -> set[str]:
    return {t.strip(".:") for t in SPLIT.split(text[:400]) if CODE_NAME.search(t.strip(".:"))}


def _other_target(a: Entry, b: Entry) -> bool:
    """One command template aimed at different names: exploration, not a rewording. (In a
    block of code, names are the author's variables: there the meaning decides.)"""
    ia, ib = salient(_raw_input(a)), salient(_raw_input(b))
    if "\n" in ia or "\n" in ib or "\\n" in ia or "\\n" in ib:
        return False
    return bool(_code_names(ia) ^ _code_names(ib))


def _label(e: Entry) -> str:
    return e.text.split(":", 1)[0] if e.text else str(e.action)


def _raw_input(e: Entry) -> str:
    return e.text.split(":", 1)[1].strip() if ":" in e.text else e.text


def _asked(e: Entry) -> str:
    """What a call asks, for the embedding: the query or command alone (a JSON wrapper or the
    tool's name, the same in every call, would make any two calls alike; so would a long path
    they share: calls on other files are told apart by `paths` already)."""
    asked = salient(_raw_input(e)) or e.text
    kept = [t for t in asked.split(" ") if "/" not in t and t not in e.paths]
    return " ".join(kept) if any(kept) else asked


def _input(e: Entry) -> str:
    """The input as a person would name it: the command, query or path, not the JSON (fenced:
    it is the event's text)."""
    return quoted(salient(_raw_input(e)), 60, "input")


def _name(e: Entry) -> str:
    """The tool's name, fenced."""
    return quoted(_label(e), 40, "tool name")


def _agent(name: str) -> str:
    """An agent's name, fenced (it is the event's text)."""
    return quoted(name, 40, "agent name")


def _inputs(entries: list[Entry], k: int = 4) -> str:
    """The last k distinct inputs, quoted, in order."""
    said = list(dict.fromkeys(_input(e) for e in entries))[-k:]
    return ", ".join(said)


def _who(entries: list[Entry], cur: Entry) -> str:
    """Who did it, as the text's subject: "You have", "`search_agent` has", "`A` and `B` have"."""
    agents = list(dict.fromkeys(_agent(e.agent) for e in entries if e.agent))
    if len(agents) > 1:
        return " and ".join([", ".join(agents[:-1]), agents[-1]]) + " have"
    return f"{_agent(cur.agent)} has" if cur.agent else "You have"


def _edits(w: Window, after: int, sig: str) -> list[Entry]:
    """Successful edits between step `after` and the current step (the command itself aside)."""
    return [e for e in w.before if e.step > after and e.modifies and not e.err and e.sig != sig]


def _changed(w: Window, after: int, sig: str) -> bool:
    return any(e.step > after and e.changes and e.sig != sig for e in w.before)


def _files(edits: list[Entry]) -> str:
    names = list(dict.fromkeys(_base(p) for e in edits for p in e.paths[:1]))
    return ", ".join(quoted(n, 60, "file name") for n in names[:3]) + (", …" if len(names) > 3 else "")


def _error_quote(w: Window) -> str:
    """The error line, fenced (the tool's output is data, never our words), or named when it
    holds instructions (`quoting.quoted`)."""
    return quoted(w.features.error_line, 100, "error line")


def _error_held(w: Window) -> bool:
    """The error names no fix of ours to make: its line holds instructions addressed to the
    agent (it is not quoted), or its output does (`instructions.read`, as for any result).
    A text about it then never says "fix what it names"."""
    f = w.features
    if holds_instructions(f.error_line):
        return True
    obs = f.observation
    if not obs:
        return False
    values = scan(obs)
    return instructions.may_flag(obs, values) and instructions.read(obs, values).flagged


def _fix(w: Window, then: str) -> str:
    """`then` (an order to act on what the error says), or, when the error holds instructions,
    the order not to (`quoting.DO_NOT_ACT`) and to change the approach."""
    return (
        then if not _error_held(w) else f"{DO_NOT_ACT}. Change the approach (another command, file or tool)"
    )


def _argument_fix(w: Window) -> str:
    """What to change when the error is an argument the tool does not take; "" otherwise. The
    argument must be one the call gave the tool (a key of its input): a script's own TypeError
    about its own function is no fault of the call."""
    m = UNEXPECTED_ARG.search(w.features.error_line)
    if not m or f'"{m[1]}":' not in w.features.input:
        return ""
    name = f"named {quoted(m[1], 40, 'argument name')}" if m[1].strip() else "with an empty name ('')"
    return (
        f"{_name(w.cur)} does not take the argument {name} it was given: call it with only the "
        "inputs the tool lists (none, if it lists none)"
    )


def _steps(entries: list[Entry]) -> str:
    ks = [str(e.step) for e in entries]
    return ks[0] if len(ks) == 1 else ", ".join(ks[:-1]) + " and " + ks[-1]


def _unchanged_by_edits(
    w: Window,
    runs: list[Entry],
    edits: list[Entry],
    exact: bool = True,
    error_only: bool = False,
    grown: bool = False,
) -> Finding | None:
    """The same check gave the same result after each of several edits: the edits are not
    reaching what runs (another copy is imported, a cache) or the diagnosis is wrong. Not a
    retry, and not news when the check passes (a regression run after each edit). A result
    its producer cut is unknown past the cut: equal heads (a test runner's header) say nothing
    of what the edits changed, and the text says only that (`_cut_reruns`).
    `grown`: the earliest runs printed less, every line of it printed again by the later ones."""
    cur = w.cur
    if len(edits) < EDITS_SAID or len(runs) < RERUNS_SAID or cur.verdict == "pass":
        return None
    if not error_only and any(e.obs_cut for e in runs):
        return _cut_reruns(w, runs, edits, exact, grown)
    same = "the same" if exact else "nearly the same"
    look = "or re-read its output"
    if grown:
        return Finding(
            0.85 if len(runs) > RERUNS_SAID else 0.7,
            f"Your last {len(edits)} edits ({_files(edits)}) changed nothing that {_input(cur)} "
            f"printed at step {runs[0].step}: its {len(runs)} runs from then on all printed those "
            "lines again, later ones only adding lines. Check that the edits reach the code "
            "that runs (the import path, an installed copy, a cache) or re-read its output before "
            "the next edit.",
        )
    if error_only:  # checks that differ (other test cases) but fail with one error
        return Finding(
            0.85 if len(runs) > RERUNS_SAID else 0.7,
            f"Your last {len(edits)} edits ({_files(edits)}) left every check run since step "
            f"{runs[0].step} failing with the same error ({_error_quote(w)}): {len(runs)} runs of "
            f"{_name(cur)} ({_inputs(runs, 2)}). Check that the edits reach the code that runs "
            "(the import path, an installed copy, a cache) "
            + (
                "before the next edit; " + DO_NOT_ACT + "."
                if _error_held(w)
                else "or re-read the error before the next edit."
            ),
        )
    if cur.verdict == "fail" and w.features.error_line:
        outcome = f"failing with {same} error ({_error_quote(w)})"
        look = "" if _error_held(w) else "or re-read the error"
    elif cur.verdict == "fail":
        outcome = f"failing with {same} output"
    else:
        outcome = f"printing {same} output"
    return Finding(
        0.85 if len(runs) > RERUNS_SAID else 0.7,
        f"Your last {len(edits)} edits ({_files(edits)}) left {_input(cur)} {outcome}: it has "
        f"given {same} result {len(runs)} times since step {runs[0].step}. Check that the "
        "edits reach the code that runs (the import path, an installed copy, a cache) "
        + (f"{look} before the next edit." if look else f"before the next edit; {DO_NOT_ACT}."),
    )


def _cut_reruns(w: Window, runs: list[Entry], edits: list[Entry], exact: bool, grown: bool) -> Finding:
    """Reruns of a check after edits whose outputs were cut where they were sent: only their
    heads are known, and equal heads (a test runner's header, a script's first prints) show
    no effect of the edits either way. Said as that, and as advice: a look at the end of the
    output is due, not a verdict that the edits changed nothing."""
    cur = w.cur
    at = f" at {len(w.features.whole_observation):,} characters" if cur.obs_cut else ""
    if grown:
        part = f"that part of each held every line the run at step {runs[0].step} printed"
    else:
        part = "that part identical every time"
    shows = "That part shows no effect of the edits either way: what changed"
    if not exact and not grown:  # a line or two moved (often the agent's own prints)
        part = "that part nearly identical every time"
        shows = "The lines that differ aside, that part shows no effect of the edits: what else changed"
    return Finding(
        0.85 if len(runs) > RERUNS_SAID else 0.7,
        f"Your last {len(edits)} edits ({_files(edits)}) came between {len(runs)} runs of "
        f"{_input(cur)} since step {runs[0].step}, each output cut where it was sent{at}, "
        f"{part}. {shows}, "
        "if anything, is past the cut (a summary or an error at the end). Read the end of the "
        "output (e.g. `| tail -n 40`) before the next edit; if it is unchanged too, check that "
        "the edits reach the code that runs (the import path, an installed copy, a cache).",
        advice=True,
    )


def same_result(w: Window, sem: Semantics) -> Finding | None:
    """1. Same action, same result. Repeats with edits between are reruns of a check, which
    `_unchanged_by_edits` speaks about (there a result that differs only in a line or two
    counts too: the edits did not move it); without, they are retries.

    A retry fires at 4 runs with nothing changed between (3 score below firing). A result that
    differs from the current one in one short line only, replaced by a line of the same label
    (`seed: banana`, `seed: falcon`; `signal.one_off`), all else equal (length, long lines,
    failure, test counts, error), counts as the same, and the text then says "but for one short
    line that differed between runs"; a count that moves, a new error or another sentence is
    another result. A result cut by its producer is unknown past the cut: reruns after edits
    whose outputs were cut are said as advice to read the end (`_cut_reruns`), never as "the
    same output"."""
    cur = w.cur
    if not (cur.sig and cur.obs) or (cur.modifies and not cur.verifies) or cur.condense:
        return None
    runs = [e for e in w.entries if e.sig == cur.sig]
    n = _trailing(runs, lambda e: e.obs == cur.obs)
    # nearly the same counts while the check itself is the same: not across an edit of a
    # file the command names (the script run, extended with a new case)
    near = n + _trailing(runs[:-n], lambda e: _near(w, e, cur) and not _rewritten(w, e.step, cur.step, cur))
    if _edits(w, runs[-near].step, cur.sig):
        # and before those, runs whose every line this one prints again (it only added lines)
        older = [e for e in w.entries if e.shape == cur.shape and e.step < runs[-near].step]
        grown = _trailing(older, lambda e: _grown(w, e, cur))
        chain = [*older[len(older) - grown :], *runs[-near:]]
        edits = _edits(w, chain[0].step, cur.sig)
        return _unchanged_by_edits(w, chain, edits, exact=near == n, grown=grown > 0)
    # a retry: the same but for one short line (a value printed anew each run) is the same too
    exact = n
    n = _trailing(runs, lambda e: e.obs == cur.obs or one_off(e, cur))
    if n < 2 or cur.modifies or _changed(w, runs[-n].step, cur.sig):
        return None
    runs = runs[-n:]
    adjacent = _trailing(w.entries, lambda e: e.sig == cur.sig and (e.obs == cur.obs or one_off(e, cur)))
    score = 0.9 if adjacent >= 4 else 0.75 if n >= 4 else 0.5 if n == 3 else 0.2
    who = _who(runs, cur)
    if any(e.obs_cut for e in runs):  # the output past the cut is unseen: no "same result"
        return Finding(
            score,
            f"{who} run {_name(cur)} with the same input ({_input(cur)}) {n} times with nothing "
            "changed in between (its output was cut where it was sent, so what it printed past the cut "
            "was not seen). Running it again in the same state will not change the outcome: read "
            "the rest of its output once if you need it, then try a different approach (another "
            "command, another file, or re-examine your assumption).",
            kind="repeat",
        )
    return Finding(
        score,
        f"{who} run {_name(cur)} with the same input ({_input(cur)}) {n} times with nothing "
        "changed in between, and got the same result every time"
        + (", but for one short line that differed between runs" if n > exact else "")
        + ". Running it again will not change the outcome: use the result you already have, "
        "then try a different approach (another command, another file, or re-examine your assumption).",
        kind="repeat",
    )


def _grown(w: Window, a: Entry, b: Entry) -> bool:
    """Check `b` printed every line check `a` printed, and more, and something besides the
    code explains the more: the script the command names was rewritten (cases added) or the
    command differs in a number (`grep -A 20`, then `-A 30`). Whatever the edits between did,
    they changed nothing `a` showed. (More lines from the same command and script may be the
    edit's effect: a fix that lets the script get further.)"""
    if not (a.verifies and b.verifies) or a.err != b.err:
        return False
    if a.sig == b.sig and not _rewritten(w, a.step, b.step, b):
        return False
    frame = frame_of(w.frames, b.action)
    # b's sketch keeps its smallest line hashes: a's lines below its largest must be among them
    bound = max(b.lines) if len(b.lines) >= CONTENT_LINES else None
    seen = {h for h in b.lines if h not in frame}
    tested = [h for h in a.lines if h not in frame and (bound is None or h <= bound)]
    return len(tested) >= GROWN_MIN and all(h in seen for h in tested)


def _near(w: Window, a: Entry, b: Entry) -> bool:
    """Nearly the same failure: failed both, the same test counts, the same error line but for
    the order of its words ("{x, y}" or "{y, x}"), most lines shared. (Not for output that did
    not fail: there the line or two that moved is often what the edit changed.) Or two outputs
    cut where they were sent, neither failing, whose sent parts share nearly every line (their
    sketches differ in at most CUT_LINES_MOVED): what the edits changed there is a line or two
    (often their own prints), the result is past the cut, and the text on them is advice to read
    it (`_cut_reruns`)."""
    if a.obs_cut and b.obs_cut and a.verdict == b.verdict != "fail":
        return a.obs[8:] == b.obs[8:] and 0 <= _moved(a.lines, b.lines) <= CUT_LINES_MOVED
    return (
        a.verdict == b.verdict == "fail"
        and a.obs[8:] == b.obs[8:]
        and sorted(WORD.findall(a.errline)) == sorted(WORD.findall(b.errline))
        and w.overlap(a, b) >= NEAR_SAME
    )


def same_edit(w: Window, sem: Semantics) -> Finding | None:
    """1b. The same edit, input for input and result for result, applied again: re-applying
    a change never moves the work on (SWE-agent inserting one block over and over). A cut
    input cannot show two edits equal, and a move or copy of a file written since is a new
    change."""
    cur = w.cur
    if not (cur.sig and cur.modifies) or cur.cut:
        return None
    members = [cur]
    for e in reversed(w.before):
        if e.sig != cur.sig or e.obs != cur.obs or e.unrun:
            continue
        if _rewritten(w, e.step, members[-1].step, cur):
            break
        members.append(e)
    n = len(members)
    if n < 3:
        return None
    # a result cut where it was sent is unknown past the cut: only the inputs are known equal
    result = "" if any(e.obs_cut for e in members) else ", with the same result each time"
    return Finding(
        0.9 if n >= 4 else 0.75,
        f"You have applied the same change ({_name(cur)} {_input(cur)}) {n} times in the last "
        f"{len(w.entries)} steps{result}. Applying it again will not help: "
        "look at the file as it is now (the earlier attempts may have left duplicates) and "
        "decide what is still missing.",
        kind="repeat",
    )


def _moved(a: list[int], b: list[int]) -> int:
    """Lines of the sketches (`Entry.lines`, CONTENT_LINES of each result's line hashes) one
    result has that the other has not, the larger count; -1 when either has none. At most 2 of
    16: about seven lines in eight shared."""
    sa, sb = set(a), set(b)
    return max(len(sa - sb), len(sb - sa)) if sa and sb else -1


def _rewritten(w: Window, lo: int, hi: int, cur: Entry) -> bool:
    """A file the command names was written by another step between steps lo and hi."""
    raw = _raw_input(cur)
    return any(
        lo < e.step < hi and e.modifies and e.sig != cur.sig and any(_base(p) in raw for p in e.paths)
        for e in w.before
    )


def _base(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def same_error(w: Window, sem: Semantics) -> Finding | None:
    """2. The same action failing with the same error: in a row (inputs may differ: a syntax
    error reported identically after each attempted fix), or the very same call failing again
    with other steps between (it will fail the same way: n = 2 is enough)."""
    cur = w.cur
    if not (cur.err and cur.errline):
        return None
    # Counted over this tool's own calls: edits by other tools and messages (a re-plan, a
    # word from another agent) do not break the run.
    same_tool = [e for e in w.entries if e.action == cur.action or not (e.modifies or e.action is None)]
    n = _trailing(same_tool, lambda e: e.action == cur.action and e.err and e.errline == cur.errline)
    failures = same_tool[-n:]
    # edits cannot bring back a missing program: its reruns stay retries; other reruns after
    # edits are checks: one command is `same_result`'s (it compares whole results), differing
    # ones that fail with one error are said here
    edits = [] if MISSING_PROGRAM.search(cur.errline) else _edits(w, failures[0].step, cur.sig)
    if edits:
        if all(e.sig == cur.sig for e in failures) or not w.features.error_line:
            return None
        return _unchanged_by_edits(w, failures, edits, error_only=True)
    found = _failed_again(w)
    if n < 3 and found:
        return found
    score = 0.95 if n >= 4 else 0.85 if n == 3 else 0.35 if n == 2 else 0.0
    if not score:
        return None
    who = _who(failures, cur)
    if all(e.unrun for e in failures):  # refused before running: none of them was tried
        return Finding(
            score,
            f"{who} sent {n} calls in a row that never ran ({_inputs(failures)}): each was refused "
            f"with the same error, {_error_quote(w)}. Nothing in them was executed: "
            + _fix(w, "fix what the error names")
            + " before the next call.",
            kind="not_run",
        )
    if all(e.sig == cur.sig for e in failures):
        return Finding(
            score,
            f"{_name(cur)} ({_input(cur)}) has failed {n} times in a row with the same input "
            f"and the same error: {_error_quote(w)}. Running it again as is will fail the same "
            + (
                f"way: {_argument_fix(w)}."
                if _argument_fix(w)
                else "way: "
                + _fix(w, "read the error, fix what it names or change the approach")
                + ", and only then run it again."
            ),
            kind="repeat",
        )
    return Finding(
        score,
        f"{who} tried {_name(cur)} {n} times in a row ({_inputs(failures)}) and got the same "
        f"error each time: {_error_quote(w)}. What changed between the attempts does not touch "
        + (
            f"its cause: {_argument_fix(w)}."
            if _argument_fix(w)
            else "its cause: " + _fix(w, "read the error and fix what it names") + " before the next attempt."
        ),
    )


def _failed_again(w: Window) -> Finding | None:
    """The very call (agent, tool, input) that already failed with this error in the window,
    with nothing changed since: it fails the same way whatever steps lie between."""
    cur = w.cur
    if TRANSIENT.search(cur.errline) or cur.cut:
        return None
    since = max((e.step for e in w.before if e.changes and e.sig != cur.sig), default=0)
    before = [
        e
        for e in w.before
        if e.step > since and e.sig == cur.sig and e.agent == cur.agent and e.err and e.errline == cur.errline
    ]
    if not before:
        return None
    n = 1 + len(before)
    if n == 2 and before[-1] is w.before[-1]:
        return None  # one immediate retry is common (a flaky tool); coming back to it is not
    return Finding(
        0.85 if n >= 3 else 0.65,
        f"{_name(cur)} ({_input(cur)}) failed with this same error at step {_steps(before)} and "
        f"again now: {_error_quote(w)}. The same call fails the same way: "
        + (
            f"{_argument_fix(w)}."
            if _argument_fix(w)
            else _fix(w, "change what the error names (the input, the tool)") + " before calling it again."
        ),
        kind="repeat",
    )


def reissued(w: Window, sem: Semantics) -> Finding | None:
    """2b. Code or a call re-issued as it was, by the same agent or another, after it brought
    nothing (no result, or only its own text printed back), and bringing nothing again."""
    cur = w.cur
    # a call that never ran brought nothing known; a command whose silence is its success (rm,
    # mv, git checkout: it changes what a rerun sees) brought no "nothing"
    if not cur.sig or cur.changes or cur.unrun or cur.condense or not (cur.obs_empty or cur.err):
        return None
    # a page-local call on another page than before is a new call
    prev = next((e for e in reversed(w.before) if e.sig == cur.sig and not _elsewhere(e, cur)), None)
    if prev is None or not prev.obs_empty or prev.err or prev.unrun or _changed(w, prev.step, cur.sig):
        return None
    if prev is w.before[-1] and prev.agent == cur.agent:
        return None  # one immediate retry of one's own call is common; repeats are `same_result`'s
    then = "only printed back its own text" if prev.echo else "brought no result"
    if prev.agent and prev.agent != cur.agent:
        who = f"{_agent(cur.agent) if cur.agent else 'This step'} re-issued {_agent(prev.agent)}'s"
    else:
        who = f"{_agent(cur.agent)} re-issued the" if cur.agent else "You re-issued the"
    now = "failed" if cur.err else "only printed back its own text" if cur.echo else "brought nothing"
    return Finding(
        0.65,
        f"{who} {_name(cur)} call from step {prev.step} unchanged ({_input(cur)}); it {then} "
        f"there and {now} here. Change it so that it computes or fetches what is missing "
        "(another source, tool or agent), or say what is blocking.",
        kind="repeat",
    )


def _reports(e: Entry) -> bool:
    """A message that shows a tool's output (a page, a terminal's exit code): a report, whose
    repetition is the same result again whatever was asked, not a request."""
    return bool(e.lines) or grounding.renders_output(e.message)


def _answers(w: Window, agent: str, since: int) -> set[Any]:
    """What the other agents of a chat got after step `since` (their tool results, the pages
    and outputs they showed), one key per distinct result: a message repeated while those
    change (paging through a document) is progress, not a loop. Their prose does not count:
    agents re-discussing a step in new words is the repetition itself."""
    return {
        e.obs if e.action else (tuple(e.lines) or e.thought)
        for e in w.entries
        if e.step > since and e.agent != agent and (e.action or _reports(e))
    }


def _words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def _shared(a: set[str], b: set[str]) -> float:
    """Share of the shorter message's words the other one has too."""
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def _brought_new(w: Window, agent: str, since: int) -> bool:
    """The agent's own latest call after step `since` brought a result no earlier step of the
    window had brought: its message repeated around it is not "nothing new has come of it"
    (a command's new output between two "I'm doing well"). A result seen before (the same call
    answering the same again) is no news."""
    own = [
        e
        for e in w.entries
        if e.step > since and e.agent == agent and e.action and e.obs and not (e.obs_empty or e.unrun)
    ]
    if not own:
        return False
    last = own[-1]
    return all(e.obs != last.obs for e in w.entries if e.action and e.step < last.step)


def same_message(w: Window, sem: Semantics) -> Finding | None:
    """3. The same message, no tool call between, 3 times by one agent. In a chat, not while
    the other agents' results in between change ("scroll down" sent again while each answer
    shows a new part of the page is paging): their tool results and the pages or outputs they
    show count, their prose does not (agents re-discussing a step in new words is the
    repetition itself)."""
    cur = w.cur
    if not (cur.action is None and cur.thought and (cur.message or not cur.agent)):
        return None
    mine = [e for e in w.entries if e.agent == cur.agent]  # each agent's own messages
    n = _trailing(mine, lambda e: e.action is None and e.thought == cur.thought)
    score = 0.85 if n >= 3 else 0.35 if n == 2 else 0.0
    if not score:
        return None
    # In a chat, what the other agents answered in between: "scroll down" sent again while
    # each answer shows a new part of the page is paging, not a loop.
    answers = _answers(w, cur.agent, mine[-n].step) if not _reports(cur) else set()
    if len(answers) >= 2:
        return None
    if answers:
        return Finding(
            score,
            f"{_agent(cur.agent)} has sent the same message {n} times and got the same answer each time. "
            "Sending it again will bring that answer again: use it, or ask for something else.",
        )
    return Finding(
        score,
        (f"{_agent(cur.agent)} has" if cur.agent else "You have")
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
        # results known in full: a call that never ran or a cut result shows no "same"
        and not any(e.unrun or e.obs_cut for e in last)
    ):
        return None
    return Finding(
        0.85,
        f"You are alternating between {_name(b)} ({_input(b)}) and {_name(a)} "
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


def _same_kind(w: Window, a: Entry, b: Entry) -> str:
    """How two results of reworded inputs bring nothing new: "echo", "empty", "error" (the
    same error), "same" (the same content), or "" (b brought something a did not)."""
    if a.echo and b.echo:
        return "echo"
    if a.obs_empty and b.obs_empty:
        return "empty"
    if a.err or b.err:
        return "error" if a.err and b.err and a.errline and a.errline == b.errline else ""
    if a.obs_empty or b.obs_empty or a.obs_cut or b.obs_cut:  # cut: unknown past the cut
        return ""
    return "same" if w.content(a) and w.content(b) and w.overlap(a, b) >= NO_PROGRESS_OBS else ""


def reworded_action(w: Window, sem: Semantics) -> Finding | None:
    """7. The same action reworded, returning nothing new. Edits are left out: successive edits
    of one file look alike and answer alike ("file edited") yet are progress; an edit loop
    shows up as repeated errors or as the same test failing again (rules 1 and 2).

    The query or command alone is compared (`_asked`, without a path the calls share), through
    the cascade band FAST_HI / FAST_LO / REWORDED_SIM, 3 times since the last edit, and the
    text says what holds: no results, the same results (content sketches overlapping at least
    NO_PROGRESS_OBS), the same error, or only the input's own text printed back. Test runs, the
    same query over other files, other ids (`_ids`) and one command template aimed at other
    names (`_other_target`: `grep "class ASTBase"`, then `grep "class Symbol"`) are
    exploration."""
    cur = w.cur
    if not cur.text or cur.condense or cur.modifies or cur.verifies:
        return None
    # Only since the last change to the workspace (re-running tests after an edit is
    # verification, not a loop), and the cheap test first: only peers whose results
    # brought nothing new are embedded.
    since = max((i + 1 for i, e in enumerate(w.before) if e.modifies), default=0)
    cur_ids: set[str] | None = None  # read at the first peer (most steps have none)
    kinds: dict[int, tuple[Entry, str]] = {}
    for e in w.before[since:]:
        if not (e.action == cur.action and e.agent == cur.agent and e.sig != cur.sig):
            continue
        if cur_ids is None:
            cur_ids = _ids(cur.text)
        if (
            not e.modifies
            and not e.verifies
            # the same query over other files or targets is exploration, not a rewording, and so
            # is the same lookup of another id (order #W4597054, then order #W4836353)
            and (not e.paths or not cur.paths or e.paths == cur.paths)
            and _ids(e.text) == cur_ids
            and not _other_target(e, cur)
            and not _elsewhere(e, cur)  # a search on another page looks at other text
        ):
            kind = _same_kind(w, e, cur)
            if kind:
                kinds[e.step] = (e, kind)
    if not kinds:
        return None
    peers = [e for e, _ in kinds.values()]
    sims = sem.matches(_asked(cur), [_asked(e) for e in peers], FAST_HI, FAST_LO)
    members = [e for e, s in zip(peers, sims, strict=True) if s >= REWORDED_SIM]
    if not members:
        return None
    repeats = [e for e in w.before if e.sig == cur.sig and e.obs == cur.obs]
    n = 1 + len(members) + len(repeats)
    score = 0.95 if n >= 5 else 0.85 if n == 4 else 0.7 if n == 3 else 0.3
    inputs = _inputs([*members, cur])
    said = {kinds[e.step][1] for e in members}
    kind = said.pop() if len(said) == 1 else "mixed"
    result, then = {
        "echo": (
            "every result only printed back the text of its own input: nothing was looked up or computed",
            "Send the request to the tool or agent that can answer it (printing it reaches no one).",
        ),
        "empty": ("none of them returned any result", ""),
        "error": (
            f"every one failed with the same error ({_error_quote(w)})",
            f"{_argument_fix(w)}."
            if _argument_fix(w)
            else "The error says what is wrong with the call: fix that, or use another tool."
            if not _error_held(w)
            else f"{DO_NOT_ACT[:1].upper()}{DO_NOT_ACT[1:]}: change strategy (another tool, or read the source directly).",
        ),
        "same": ("they keep returning the same results", ""),
    }.get(kind, ("none of them brought a new result", ""))
    how = "varied" if kind == "error" else "reworded"
    return Finding(
        score,
        f"{_who([*members, cur], cur)} issued {_name(cur)} {n} times with {how} inputs "
        f"({inputs}) and {result}. "
        + (
            then
            or "That avenue is exhausted: change strategy (a different term or tool, read the "
            "source directly, or reconsider where the answer lives)."
        ),
    )


def search_streak(w: Window, sem: Semantics) -> Finding | None:
    """8. Reworded searches one after another with no result opened between: each search
    finds leads, none is followed."""
    cur = w.cur
    if not (cur.action and "search" in cur.action) or cur.modifies or cur.verifies:
        return None
    calls = [e for e in w.entries if e.agent == cur.agent and e.action]
    streak = calls[-_trailing(calls, lambda e: e.action == cur.action) :]
    # leads to open: results of a few lines each (a search whose hits are the answer is not this)
    if (
        len(streak) < 3
        or not all(e.err or len(e.lines) >= LEADS for e in streak)
        or all(e.err for e in streak)
    ):
        return None
    peers = [e for e in streak[:-1] if e.sig != cur.sig and not _other_target(e, cur)]
    if len(peers) < 2:
        return None
    sims = sem.matches(_asked(cur), [_asked(e) for e in peers], FAST_HI, FAST_LO)
    members = [e for e, s in zip(peers, sims, strict=True) if s >= REWORDED_SIM]
    n = 1 + len(members)
    if n < 3:
        return None
    inputs = _inputs([*members, cur], 3)
    return Finding(
        0.9 if n >= 5 else 0.8 if n == 4 else 0.7,
        f"{_who([cur], cur)} run {_name(cur)} {n} times in a row with reworded queries ({inputs}) "
        "without opening any of the results. Open the most promising result (visit the page, "
        "read the file) and look for the answer there before searching again.",
    )


def same_page(w: Window, sem: Semantics) -> Finding | None:
    """11. A browsing agent showing the same page content again (chats of messages: the
    orchestrator re-words its request, the agent searches again and the same results come
    back, or it lands on the same page). Pages it scrolls through or new results are progress.
    A page is its lines after the first, without the screenshot's title and link, the viewport
    line and the OCR heading (`signal.page_lines`): at least PAGE_LINES_MIN lines, 3 times,
    each overlapping the current page at least NEAR_SAME, whatever the agent was asked."""
    cur = w.cur
    if cur.action or not (cur.message and len(cur.lines) >= PAGE_LINES_MIN):
        return None
    peers = [e for e in w.before if e.agent == cur.agent and not e.action and e.message and e.lines]
    same = [e for e in peers if w.overlap(e, cur) >= NEAR_SAME]
    n = 1 + len(same)
    if n < 3:
        return None
    steps = ", ".join(str(e.step) for e in same[-3:])
    return Finding(
        0.85 if n >= 4 else 0.7,
        f"{_agent(cur.agent)} has shown the same page content {n} times (steps {steps} and now: "
        f"{quoted(cur.message, 60, 'page')}): another visit or search of that kind brings the same text. "
        "Use what the page shows, move on to its next page or a result it lists, or try a "
        "different source instead of another rewording.",
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
    # the static model alone calls distinct strings of rare tokens alike (random ids: 0.9):
    # a rewording also shares words with the message it rewords
    words = _words(cur.message)
    members = [
        e
        for e, s in zip(peers, sims, strict=True)
        if s >= REWORDED_MESSAGE and _shared(words, _words(e.message)) >= SHARED_WORDS
    ]
    seen = {h for e in members for h in e.facts}
    new_facts = [h for h in cur.facts if h not in seen]
    n = 1 + len(members)
    if n < 3 or new_facts or (not _reports(cur) and len(_answers(w, cur.agent, members[0].step)) >= 2):
        return None
    if _brought_new(w, cur.agent, members[0].step):
        return None
    who = f"{_agent(cur.agent)} has" if cur.agent else "You have"
    said = ", ".join(quoted(e.message, 60, "message") for e in [*members[-2:], cur])
    return Finding(
        0.85 if n >= 4 else 0.7,
        f"{who} sent essentially the same message {n} times ({said}) and nothing new "
        "has come of it. Repeating it will not change the answer: change the request "
        "(another source, tool or agent, or a narrower question) or say what is blocking.",
    )


def cycle(w: Window, sem: Semantics) -> Finding | None:
    """10. A cycle of the same few calls: the last CYCLE_MIN or more calls re-issue, in the
    same order, calls made earlier in the window, each bringing the result it brought then,
    and nothing changed in the workspace since. (One call repeated is `same_result`'s; two
    alternating are `alternation`'s.)"""
    cur = w.cur
    ents = w.entries
    if not (cur.sig and cur.obs) or cur.modifies or cur.condense:
        return None
    k = len(ents) - 1

    def same(a: Entry, b: Entry) -> bool:
        # a result cut where it was sent is unknown past the cut: never "the same result"
        known = bool(a.sig and a.obs) and not (a.obs_cut or b.obs_cut)
        return known and a.sig == b.sig and a.obs == b.obs and a.agent == b.agent

    for j in range(k - CYCLE_MIN, CYCLE_MIN - 2, -1):  # the latest earlier round first
        if not same(ents[j], cur):
            continue
        size = 0  # the rounds may not overlap, nor reach before the window
        while size < min(k - j, j + 1) and same(ents[j - size], ents[k - size]):
            size += 1
        block = ents[k - size + 1 :]
        if size < CYCLE_MIN or len({e.sig for e in block}) < 2:
            continue
        if any(e.changes or e.modifies for e in ents[j - size + 1 : k]):
            return None
        first = ents[j - size + 1].step
        calls = "; ".join(dict.fromkeys(f"{_name(e)} {_input(e)}" for e in block))
        got = "the same results and errors" if any(e.err for e in block) else "the same results"
        return Finding(
            0.85 if size > CYCLE_MIN else 0.7,
            f"{_who(block, cur)} re-issued {size} calls in the same order as at steps "
            f"{first}-{ents[j].step} ({cut(calls, 240)}) and got {got} again; nothing changed in "
            "between. Another round will bring the same: use what those results already show, or "
            "look somewhere new (another file, term or tool).",
        )
    return None


# In this order: on equal scores the earlier rule's finding is the one reported.
RULES: tuple[Rule, ...] = (
    same_result,
    same_edit,
    same_error,
    reissued,
    same_message,
    alternation,
    empty_responses,
    condensations,
    reworded_action,
    search_streak,
    same_page,
    reworded_message,
    cycle,
)


def long_wait(w: Window, wait: waiting.Wait) -> Finding:
    """Advice on a wait past its budget: not a loop (the ladder does not judge it), a check."""
    cur = w.cur
    minutes = int((waiting.gap(wait.since, cur.ts) or 0.0) // 60)
    answer = {
        "pending": "that the work is not done yet",
        "transient": "with an error of the moment (a busy or unavailable service)",
    }.get(cur.wait, "")
    return Finding(
        0.7,
        f"{_who([cur], cur)} waited {minutes} minutes on {_name(cur)} ({_input(cur)}): "
        f"{wait.calls} calls since step {wait.first}"
        + (f", each answering {answer}" if answer else "")
        + ". Waiting is right while the work runs, but this is long: check that it is still "
        "making progress (its log or status page), or go on with other work and come back to it.",
        advice=True,
    )


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{int(seconds)} seconds"
    return f"{int(seconds // 60)} minutes"


def unchanged_wait(w: Window, wait: waiting.Wait, spent: str, budget: waiting.WaitBudget) -> Finding:
    """A wait whose result has not changed past its budget (`Wait.over`): the same answer
    again says the work does not move, and each call resends the context. A loop warning
    (kind "wait"): the ladder judges the next call like any loop's."""
    cur = w.cur
    took = waiting.gap(wait.same_since, cur.ts) or 0.0
    answer = {
        "pending": "that the work is not done yet",
        "transient": "with the same error of the moment (a busy or unavailable service)",
    }.get(cur.wait, "")
    still = "unavailable" if cur.wait == "transient" else "not done"
    limit = {
        "calls": f"{budget.calls} calls with no change",
        "usd": f"an estimated ${budget.usd:.2f} of model calls with no change",
        "seconds": f"{_span(budget.seconds)} with no change",
    }[spent]
    return Finding(
        0.9,
        f"{_who([cur], cur)} called {_name(cur)} ({_input(cur)}) {wait.same} times since step "
        f"{wait.same_first}, over {_span(took)}, and every result was the same, times aside"
        + (f", answering {answer}" if answer else "")
        + ": "
        f"an estimated ${wait.usd:.2f} of model calls (at least: each call resends the whole "
        f"context) with nothing new. The wait is past its budget of {limit}. Do not call it again "
        "as is: check something that shows whether the work moves (its log, its status page), "
        "wait much longer before the next check, or report that it is still "
        f"{still} and go on with other work.",
        kind="wait",
    )
