"""verification_skip: finishing after changes that nothing has checked.

Tracks, incrementally, which files changed since the last verification: a run of a test, a
build, a compiler or the changed script (what real agents run: `pytest`, `./tests/runtests.py`,
`python reproduce.py`, `mvn test`, `javac`/`java`, `go test`, ...). An attempt that could not
run ("command not found") verifies nothing. Reading a file back is not a verification, and
neither are changes to documentation or housekeeping (`rm reproduce.py`).

It fires at a finish (a finish/submit tool, a submit command, a final answer) while changes
are unverified, and when the agent says the tests pass although none has run since its last
change. A finding on a finishing step reaches no model call (the run ends there): it is
reported, and it is said again on the next step if the run goes on after all. Hedged or
mid-run words ("this should work", "fixed") are plans, not claims, and never fire it.

A command line is read in order: a check after its changes covers them (`sed -i ... f.py &&
python repro.py`), a change after its check does not. A copy set aside (`f.py.bak`,
`f.orig`) holds what the file held when it was made: moving or copying it back restores
checked code when nothing was pending then (not a new change), and its name never appears in
the text.

A run that changes no file and has more than one agent or exchanges messages (a group chat, a
manager with workers) gets a run-level check instead (`grounding.py`): when it ends (a final
answer of its first agent, a chat's TERMINATE) on an answer whose facts no tool output of the
run produced or confirmed, it fires with the facts that nothing checked. A chat of two agents or
more that ends while no tool run in it succeeded (none ran, or each one failed) fires even on an
answer with no fact to search (MAST's "no verification"): agents agreeing is no check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from ..evolve import evolve
from ..quoting import quoted
from ..reading import grounding
from ..reading.features import TERMINATES, StepFeatures
from ..reading.pycode import final_argument
from ..reading.shell import is_backup
from .base import NOTHING, Context, Finding, Monitor, quote
from .semantics import Semantics

MAX_FILES = 8
UNNAMED = "(unnamed change)"

TESTS_CLAIM = re.compile(
    r"\b((all|the) (\w+ )?tests? (now |still )?(pass|passed|are passing|succeed(ed)?)|tests (now )?pass(ed)?|"
    r"tests are (now )?(passing|green)|verified (the fix|that it works)|confirmed (the fix|that it works))\b",
    re.IGNORECASE,
)
GUARD = re.compile(
    r"\b(not|n't|once|when|after|until|before|if|whether|almost|nearly|yet|be|get|gets|getting|can|will|"
    r"to|make|ensure|verify|check|sure|should|would|expect|hope|hopefully)\W+(\w+\W+){0,2}$",
    re.IGNORECASE,
)
FINAL_PREFIX = re.compile(r"^\W*final[ _]answer\W*", re.IGNORECASE)
# An executor's rendered output that says its run failed (`exitcode: 1 (execution failed)`, a
# traceback): the attempt checked nothing. Searched in the message's head only (linear).
RUN_FAILED = re.compile(
    r"exit ?code:\s*-?[1-9]|execution failed|^Traceback \(most recent call last\)",
    re.IGNORECASE | re.MULTILINE,
)
DOC_FILE = re.compile(
    r"(\.(md|rst|txt|adoc|rdoc)$|(^|/)docs?/|(^|/)(changelog|changes|news|readme|authors)[^/]*$)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class VerificationState:
    pending: list[str] = field(default_factory=list)  # files changed since the last check
    tested_since_change: bool = True
    current_file: str = ""  # the file an editor has open: SWE-agent's `edit` names no file
    change_step: int | None = None  # step of the first change not verified since
    finish_step: int | None = None  # a finish came while changes were unverified
    not_run: str = ""  # the last verification attempt that could not run
    # Copies set aside (`f.py.bak`) made while their source had unchecked changes: moved back,
    # the file they restore is changed again; any other copy restores checked code.
    unchecked_copies: list[str] = field(default_factory=list)
    # The run-level answer check (`grounding`): who speaks, whether the run ever changed a file,
    # what its tool outputs produced, and the answer (claim) the run would end on.
    agents: list[str] = field(default_factory=list)  # the first two distinct agents
    messages: bool = False  # a step without a tool call came before
    edited: bool = False  # a file changed: the file check applies, not the answer check
    blind: bool = False  # a tool output came before the memory began: the check cannot judge
    tools: int = 0  # tool outputs seen
    produced: int = 0  # tool outputs that held more than their call's own literals
    echoed: bool = False  # a tool output printed back literals of its own call
    evidence: str = ""  # Bloom filter (hex) of the tokens tool outputs produced
    evidence_old: str = ""  # the generation before it
    evidence_n: int = 0
    claim: list[str] = field(default_factory=list)  # the facts of the answer the run stands on
    claim_checked: list[str] = field(default_factory=list)  # those a tool output contains
    claim_quote: str = ""
    claim_step: int | None = None
    claim_agent: str = ""
    answer_step: int | None = None  # the run tried to end on an unchecked answer there
    # The code blocks of the last message (a chat without tool steps: the next speaker, an
    # executor, replies with their output), and who sent them.
    asked_code: str = ""
    asked_by: str = ""
    reported: list[str] = field(default_factory=list)  # unchecked facts already said
    # The latest message with code that no step has run since (no tool output after it): the
    # step and the code's first line. A chat that ends there ends on code nothing executed.
    code_step: int | None = None
    code_head: str = ""
    code_pending: list[str] = field(default_factory=list)  # its blocks' `code_key`s
    ran_code: list[str] = field(default_factory=list)  # keys of code that output came after
    # MAST's "no verification" in a chat: whether any tool run succeeded (a check that ran), the
    # last attempt that failed, and whether the chat was told at its end.
    ok_runs: int = 0
    failed_runs: int = 0
    failed_step: int | None = None
    unchecked_said: bool = False

    def evolve(self, **changes: Any) -> VerificationState:
        """This state with `changes` (`core.evolve`: ~1 us, not `dataclasses.replace`'s ~20 us)."""
        return evolve(self, _FIELDS, changes)


_FIELDS = frozenset(f.name for f in fields(VerificationState))


def _claims_tests(thought: str) -> str:
    for m in TESTS_CLAIM.finditer(thought):
        if not GUARD.search(thought[max(0, m.start() - 30) : m.start()]):
            return m.group(0)
    return ""


def _changed(st: VerificationState, f: StepFeatures) -> list[str]:
    if not f.modifies:
        return []
    named = list(f.changed)
    if not named and f.current_file_edit and st.current_file:
        named = [st.current_file]
    kept = [p for p in named if not DOC_FILE.search(p)]
    if named and not kept:
        return []  # documentation only
    return kept or [UNNAMED]


def _apply(
    pending: list[str], copies: list[str], ops: tuple[tuple[str, ...], ...]
) -> tuple[list[str], list[str], bool, bool]:
    """A command's segments in order: (pending, unchecked copies, whether a check ran, whether
    a change came after the last check)."""
    pending, copies = list(pending), list(copies)
    checked = changed = False

    def touch(p: str) -> None:
        nonlocal changed
        pending[:] = [x for x in pending if x != p] + [p]
        changed = True

    for op in ops:
        kind = op[0]
        if kind == "check":  # a copy set aside keeps what it held: the check may not have seen it
            pending, checked, changed = [], True, False
        elif kind in ("cp", "mv") and len(op) == 3:
            src, dst = op[1], op[2]
            unchecked = src in pending or src in copies
            if kind == "mv" and src in copies:
                copies.remove(src)
            if is_backup(dst):  # set aside: what it holds is unchecked only if the source was
                copies = [c for c in copies if c != dst] + ([dst] if unchecked else [])
            elif unchecked or not is_backup(src):
                if not DOC_FILE.search(dst):
                    touch(dst)
            elif dst in pending:
                pending.remove(dst)  # a clean copy put back: the code is as it was when checked
        else:
            named = [p for p in op[1:] if not DOC_FILE.search(p)]
            for p in named:
                if is_backup(p):
                    copies = [c for c in copies if c != p] + [p]  # written anew: unchecked
                else:
                    touch(p)
            if not op[1:]:
                touch(UNNAMED)
    return pending[-MAX_FILES:], copies[-MAX_FILES:], checked, changed


def _what(pending: list[str], step: int | None) -> str:
    named = [p for p in pending if p != UNNAMED]
    if named:
        return ", ".join(quoted(p, 80, "file name") for p in named[-3:])
    return f"the code (your edit at step {step})" if step is not None else "the code"


def evaluate(
    st: VerificationState, f: StepFeatures, ctx: Context, sem: Semantics
) -> tuple[VerificationState, Finding]:
    pending_before = st.pending
    pending, copies = list(pending_before), st.unchecked_copies
    tested = st.tested_since_change
    change_step = st.change_step
    not_run = st.not_run
    if f.could_not_run:
        not_run = quote(f.command or f.action_label, 50)
    if f.ops:
        pending, copies, checked, changed = _apply(
            pending, copies, f.ops if f.verifies else _no_checks(f.ops)
        )
        if checked:
            tested, change_step, not_run = True, None, ""
    else:
        named = _changed(st, f)
        changed = bool(named)
        if f.verifies:
            pending, tested, change_step, not_run = [], True, None, ""
        for p in named:
            if p in pending:
                pending.remove(p)
            pending.append(p)
        pending = pending[-MAX_FILES:]
    if changed and pending:
        tested = False
        change_step = change_step if change_step is not None else f.step
    if not pending:
        change_step = None
    current = st.current_file
    if len(f.paths) == 1 and (f.reads or f.modifies):
        current = f.paths[0]
    new = st.evolve(
        pending=pending,
        tested_since_change=tested,
        current_file=current,
        change_step=change_step,
        finish_step=None,
        not_run=not_run,
        unchecked_copies=copies,
    )
    new, answer = _answer(new, f, ctx.task)

    if (f.verifies and not pending) or not pending:
        return new, answer
    # what the texts below say is worked out only for the branch that speaks (most steps none)
    blocked = (
        f" Your last attempt ({quoted(not_run, 50, 'command')}) could not run here: if no test can run, say so in your final answer and re-read the diff."
        if not_run
        else ""
    )
    if f.finishes:
        what = _what(pending, change_step)
        tests_words = _claims_tests(f.thought)
        new = new.evolve(finish_step=f.step)
        lead = (
            f"You say the tests pass ({quoted(tests_words, 60, 'claim')}) but no test has run since you changed {what}."
            if tests_words and not st.tested_since_change
            else f"You are finishing ({quoted(f.action_label, 40, 'tool name') if f.action_label else 'final answer'}) but {what} changed and nothing has run "
            "since to check it."
        )
        return new, Finding(
            1.0 if tests_words else 0.9,
            f"{lead} Run the relevant tests or the reproduction script before finishing.{blocked}",
        )
    if st.finish_step is not None:
        what = _what(pending, change_step)
        return new, Finding(
            0.85,
            f"You tried to finish at step {st.finish_step} although {what} changed and nothing had checked "
            f"it; the run goes on, so run the relevant tests or the reproduction script now.{blocked}",
        )
    tests_words = _claims_tests(f.thought) if pending_before and not st.tested_since_change else ""
    if tests_words:
        return new, Finding(
            0.9,
            f"You say the tests pass ({quoted(tests_words, 60, 'claim')}) but no test has run since you changed "
            f"{_what(pending_before, st.change_step)}. Run them before you rely on that.{blocked}",
        )
    return new, answer


def _no_checks(ops: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
    """A line whose check could not run (`javac: command not found`) checked nothing."""
    return tuple(op for op in ops if op[0] != "check")


def _answer(st: VerificationState, f: StepFeatures, task: str | None) -> tuple[VerificationState, Finding]:
    """The run-level check of a chat's or a manager's answer (`grounding`)."""
    if st.edited or st.blind:
        return st, NOTHING  # off for the rest of the run
    watching = bool(st.agents) or st.messages or f.message or bool(f.agent)
    if not watching or f.modifies:  # not a chat (yet), or a run that changes files
        tool_seen = f.action is not None and bool(f.observation)
        return (st.evolve(edited=True) if f.modifies else st.evolve(blind=True) if tool_seen else st), NOTHING
    agents = st.agents
    if f.agent and not f.by_user and f.agent not in agents and len(agents) < 2:
        agents = [*agents, f.agent]
    chat = len(agents) > 1 or st.messages
    # a finishing step's output is no evidence, but for a cell that computed what it answers
    tool_output = f.action is not None and bool(f.observation) and (not f.finishes or f.cell)
    # A message answering another agent's code (an executor's reply) is that code's output.
    reply = (
        f.message
        and bool(st.asked_code)
        and bool(f.agent)
        and f.agent != st.asked_by
        and not f.coordination
        and "```" not in f.thought  # an agent answering with code of its own is not the executor
        # an executor prints output (`exitcode: 0`, "Its output was:"); a reviewer's comment
        # on the code is no run of it
        and grounding.renders_output(f.thought)
    )
    # Another agent's message that shows a tool's output (a browsing agent's page): tool output.
    rendered = (
        f.message
        and not reply
        and bool(f.agent)
        and f.agent != (agents[0] if agents else "")
        and grounding.renders_output(f.thought)
    )
    output, call = (
        (f.thought, st.asked_code) if reply else (f.thought, "") if rendered else (f.observation, f.input)
    )
    asked = grounding.code_of(f.thought) if f.message and not reply else ""
    new = st.evolve(
        agents=agents,
        messages=st.messages or f.message,
        asked_code=asked,
        asked_by=f.agent if asked else "",
    )
    tool_output = tool_output or reply or rendered
    if tool_output and (new.code_step is not None or f.action):
        # what ran: the code asked for before, or the code this tool step was given
        keys = list(new.code_pending)
        if f.action and f.input:
            keys += [grounding.code_key(b) for _p, b in grounding.code_blocks(f.input)] or [
                grounding.code_key(f.input)
            ]
        ran = [*new.ran_code, *(k for k in dict.fromkeys(keys) if k not in new.ran_code)][-RAN_KEPT:]
        new = new.evolve(code_step=None, code_head="", code_pending=[], ran_code=ran)
    if asked:
        # code shown again as it already ran (a final listing of the tested script) is not new
        fresh = [
            (grounding.code_key(body), body) for _p, body in grounding.code_blocks(f.thought, tagged=True)
        ]
        fresh = [(k, body) for k, body in fresh if k not in new.ran_code]
        if fresh:
            new = new.evolve(
                code_step=f.step, code_head=_first_line(fresh[0][1]), code_pending=[k for k, _ in fresh]
            )
    top = not f.agent or (bool(agents) and f.agent == agents[0])
    ends = f.finishes and (top or (f.message and bool(TERMINATES.search(f.thought[-40:]))))
    # what the step states: its explicit answer when it ends the run, else a result message
    stated: str | None = None
    explicit = False
    if ends:
        stated, explicit = _explicit_answer(f), True
    if (
        stated is None
        and not (reply or rendered)
        and f.thought.strip()
        and not f.coordination
        and not grounding.quotes_task(f.thought, task)
    ):
        stated, explicit = f.thought, False
    if stated is not None:
        # a short answer is one fact; a sentence ("X was first found in 2018.") is read for its facts
        short = (
            explicit
            and len(stated.strip()) <= grounding.SHORT_ANSWER
            and len(stated.split()) <= grounding.SHORT_ANSWER_WORDS
        )
        found_facts = grounding.facts(stated, task, short)
        if found_facts or (explicit and stated.strip()):
            checked = [x for x in found_facts if grounding.confirmed(x, None, new.evidence, new.evidence_old)]
            new = new.evolve(
                claim=found_facts,
                claim_checked=checked,
                claim_quote=quote(stated, 120),
                claim_step=f.step,
                claim_agent=f.agent,
                answer_step=None,
            )
    if tool_output:
        failed = f.is_error if not (reply or rendered) else bool(RUN_FAILED.search(f.thought[:FAILED_HEAD]))
        new = (
            new.evolve(failed_runs=new.failed_runs + 1, failed_step=f.step)
            if failed
            else new.evolve(ok_runs=new.ok_runs + 1)
        )
        kept, echoed = grounding.produced(output, call)
        out = grounding.tokens(kept)
        new = new.evolve(tools=new.tools + 1, echoed=new.echoed or echoed)
        if out:
            remembered = grounding.kept_hashes(out)
            cur, old, n = grounding.rotate(new.evidence, new.evidence_old, new.evidence_n, len(remembered))
            cur, n = grounding.remember(cur, n, remembered)
            confirmed = [x for x in new.claim if x in new.claim_checked or grounding.confirmed(x, out)]
            new = new.evolve(
                evidence=cur,
                evidence_old=old,
                evidence_n=n,
                produced=new.produced + 1,
                claim_checked=confirmed,
            )
    unchecked = _unchecked(new)
    if ends and chat and new.code_step is not None and not unchecked:
        who = "the code you wrote" if new.code_step == f.step else f"the code written at step {new.code_step}"
        return new, Finding(
            0.9,
            f"You are ending the run, but {who} ({quoted(new.code_head, 60, 'code')}) never ran: no step executed or "
            "tested it. Run it (or its tests) and check the output before finishing, or say in the "
            "answer that it is untested.",
        )
    # a team's answer (two agents or more): one agent's reply from what it knows is not a chat
    if ends and len(agents) > 1 and not unchecked and new.ok_runs == 0 and not new.unchecked_said:
        return new.evolve(unchecked_said=True), _no_check(new)
    if not chat or not unchecked:
        return new.evolve(answer_step=None) if new.answer_step is not None else new, NOTHING
    facts_text = ", ".join(quoted(grounding.plain(x), 60, "fact") for x in unchecked[:4])
    if ends and not set(unchecked) <= set(new.reported):
        short = len(new.claim_quote) <= grounding.SHORT_ANSWER
        subject = (
            quoted(new.claim_quote, 120, "claim")
            if short
            else f"the result {quoted(new.claim_agent, 40, 'agent name') if new.claim_agent else 'you'} gave at step {new.claim_step}"
        )
        why = (
            " No tool produced any output in this run: the answer rests on what was said."
            if new.tools == 0
            else " Every tool output so far only printed back its own call's text."
            if new.produced == 0
            else " (An output that prints back values typed into its own call does not count.)"
            if new.echoed
            else ""
        )
        reported = [*new.reported, *(x for x in unchecked if x not in new.reported)][-grounding.MAX_FACTS :]
        return new.evolve(answer_step=f.step, reported=reported), Finding(
            0.9,
            f"You are ending the run on {subject}, but no tool output in this run produced or confirmed "
            f"{facts_text}.{why} Check that against a source (run the computation on the real data, open the "
            "page that states it) before finishing, or say in the answer that it is unverified.",
        )
    if new.answer_step is not None and not ends:
        return new.evolve(answer_step=None), Finding(
            0.85,
            f"The run was to end at step {new.answer_step} on {facts_text}, which no tool output produced or "
            "confirmed; it goes on, so check that against a source now.",
        )
    return new, NOTHING


RAN_KEPT = 16  # keys of code that ran, kept
FAILED_HEAD = 600  # chars of an executor's message read for its exit status


def _no_check(st: VerificationState) -> Finding:
    """A chat ending while no run of any tool succeeded in it: whatever the agents agreed on,
    nothing checked it (MAST's "no verification"). Names the steps, never the agents' words."""
    result = (
        f"the result {quoted(st.claim_agent, 40, 'agent name') if st.claim_agent else 'the chat'} gave at step {st.claim_step}"
        if st.claim_step is not None
        else "its result"
    )
    if st.failed_runs:
        runs = "the only tool run" if st.failed_runs == 1 else f"all {st.failed_runs} tool runs"
        how = f"{runs} in this chat failed (the last at step {st.failed_step})"
    else:
        how = "no tool ran in this chat"
    return Finding(
        0.9,
        f"You are ending the run on {result}, but nothing checked it: {how}, and messages that agree "
        "with it or restate it are no check. Run a check that works (the computation on the real data, "
        "the page that states the answer) before finishing, or say in the answer that it is unverified.",
    )


def _first_line(code: str) -> str:
    """The code's first line that is not a comment, cut: what names it in the text."""
    for ln in code.splitlines():
        t = ln.strip()
        if t and not t.startswith(("#", "//")):
            return quote(t, 60)
    return quote(code.strip(), 60)


def _explicit_answer(f: StepFeatures) -> str | None:
    """The answer a finishing step gives: its input (`final_answer`, `finish`), the text after
    "FINAL ANSWER:", or a terminating message's own text; None when it gives none."""
    if f.cell:  # `final_answer(x)`: the literal, else the value the cell printed last
        given = final_argument(f.input)
        if given is not None:
            return given
        tail = f.observation.strip().rsplit("Last output from code snippet:", 1)[-1].strip()
        return tail.splitlines()[-1] if tail else None
    if not f.message and f.input and f.input not in ("{}", "null"):
        return f.input
    text = TERMINATES.sub("", f.thought.strip())
    m = FINAL_PREFIX.match(text)
    if m:
        return text[m.end() :]
    return text if len(text.strip()) > 20 else None


def _unchecked(st: VerificationState) -> list[str]:
    """The facts of the answer nothing confirmed, when that leaves it unchecked: none of its
    facts confirmed, or a value it highlights not confirmed itself."""
    if not st.claim:
        return []
    missing = [x for x in st.claim if x not in st.claim_checked]
    highlighted = [x for x in missing if x.startswith(grounding.MARK)]
    if not st.claim_checked:
        return missing
    return highlighted


MONITOR = Monitor("verification_skip", "verification_skip", "verification", VerificationState, evaluate)
