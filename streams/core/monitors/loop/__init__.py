"""semantic_loop: the agent repeats itself instead of making progress.

Covers the stuck shapes a well-known coding-agent stuck detector looks for (same action and
same observation 4x, same action failing with the same error 3x, the same message 3x without a
tool call, A/B alternation over 6 steps, 3 empty responses, 10+ condensations in a row) plus
what it cannot see: the same search or command reworded ("session timeout" / "session
expiry" / "session token expiration"), matched with embeddings; one reworded search after
another with no result opened; a call that already failed with the same error, issued again;
code re-issued (by any agent) after it brought nothing; a cycle of the same few calls re-issued
in order, each with the result it brought before.

What it says must hold of the run. A rerun after an edit is not a retry: the same output after
several edits says the edits do not reach what runs, and that is what the text then says.
Identical commands whose output changes (a test suite failing less each run) are progress.
Results are compared on their content: lines every result of a tool carries (a framework's
footer, a wrapper, the echoed command) are learnt per run and left out.

The package: `signal` keeps what each step did and brought and measures how results compare;
`rules` holds the shapes and their texts; this module runs them on each step, after waiting
(a call repeated on a pending result is not a loop; a long wait gets advice instead). Under the
rules lies the floor (`monitors/progress.py`): what each step's result added to what its agent
had seen, whatever the call's shape or wording. It speaks when no rule does; none of the rules'
exemptions (reads, listings, exploration, empty results, a first retry) reaches it.
"""

from __future__ import annotations

from typing import Any

from ... import routing
from ...reading.features import StepFeatures
from .. import progress, waiting
from ..base import NOTHING, Context, Finding, Monitor
from ..semantics import Semantics
from .rules import RULES, long_wait, unchanged_wait
from .signal import WINDOW, Entry, LoopState, Window, frame_of, learn, page_lines, result_lines

__all__ = ["MONITOR", "LoopState", "evaluate", "monitor"]


def _waiting(
    w: Window, st: LoopState, budget: waiting.WaitBudget, usd: float
) -> tuple[bool, list[list[Any]], waiting.Wait | None, waiting.Wait | None]:
    """Whether this step waits: it repeats a call (same agent, tool and input) spaced out in
    time, on a pending or transient result (`waiting`). Then no rule speaks of it: the same
    "in progress" after waiting says nothing about progress. Also the calls waited on after
    it, the one whose wait just passed another budget of seconds (advice is due), and this
    call's wait (its unchanged results are counted against `budget`: `usd` is this call's)."""
    cur, waits, gaps = w.cur, st.waits, st.gaps
    if not cur.sig or cur.ts is None:
        return False, waits, None, None
    if not cur.wait and not waits:  # a result like any other, and no wait to end or age
        return False, [], None, None
    same = [e for e in w.before if e.sig == cur.sig and e.agent == cur.agent]
    prev = same[-1] if same else None
    dt = waiting.gap(prev.ts, cur.ts) if prev is not None else None
    before = waiting.gap(same[-2].ts, same[-1].ts) if len(same) >= 2 else None
    waits_now = bool(cur.wait) and waiting.spaced(dt, before, gaps)
    started = prev is not None and bool(prev.wait) and prev.ts is not None
    since = prev.ts if started and prev is not None and prev.ts is not None else cur.ts
    first = prev.step if started and prev is not None else cur.step
    k = waiting.key(cur.agent, cur.sig)
    result = waiting.Result(cur.step, waiting.result_key(w.features), usd)
    kept, due, mine = waiting.advance(
        waits, k, since, first, cur.ts, waits_now, not cur.wait, budget.seconds, result
    )
    return waits_now, kept, due, mine


def _tokens(text: str) -> int:
    return -(-len(text) // routing.CHARS_PER_TOKEN)


def _context(st: LoopState, f: StepFeatures, ctx: Context) -> tuple[int, int, int]:
    """The run's context before this step (estimated tokens: what this call read), what the
    step adds to it, and the step's output (the model's thought and call)."""
    before = st.ctx or routing.PRIOR_SYSTEM_TOKENS + _tokens(ctx.task or "")
    out = _tokens(f.thought) + _tokens(f.input) + routing.STEP_OVERHEAD_TOKENS
    added = out + _tokens(f.whole_observation)
    return before, added, out


def evaluate(
    st: LoopState, f: StepFeatures, ctx: Context, sem: Semantics, budget: float = waiting.WAIT_BUDGET_S
) -> tuple[LoopState, Finding]:
    lines = result_lines(f) if f.action else page_lines(f)
    cur = Entry.of(f, frame_of(st.frames, f.action), lines)
    kept = st.window[-(WINDOW - 1) :]
    frames = learn(st.frames, f, cur.obs, lines)
    w = Window([*(Entry.decode(e) for e in kept), cur], f, frames)
    last = w.before[-1] if w.before else None
    gaps = waiting.remember_gap(st.gaps, waiting.gap(last.ts, cur.ts) if last else None, bool(cur.wait))
    plan = ctx.wait_budget or (waiting.DEFAULT_BUDGET if budget == waiting.WAIT_BUDGET_S else None)
    plan = plan or waiting.WaitBudget(seconds=budget)
    before, added, out = _context(st, f, ctx)
    usd = waiting.call_usd(ctx.price, before, added, out)
    waits_now, waits, due, mine = _waiting(w, st, plan, usd)
    # the floor: what this step brought the run, whatever shape it has (`progress`)
    seen, floor = progress.observe(progress.ProgressState.decode(st.progress), f)
    new = LoopState(
        window=[*kept, cur.encode()],
        frames=frames,
        gaps=gaps,
        waits=waits,
        progress=seen.encode(),
        ctx=min(routing.TOKENS_MAX, before + added),
    )
    spent = mine.over(plan) if mine is not None else ""
    if mine is not None and spent:  # the same result past the budget: warned as a loop
        return new, unchanged_wait(w, mine, spent, plan)
    if due is not None:
        return new, long_wait(w, due)
    if waits_now:
        return new, NOTHING
    found = [x for x in (rule(w, sem) for rule in RULES) if x is not None]
    return new, _strongest(found, floor)


def _strongest(found: list[Finding], floor: Finding | None) -> Finding:
    """A rule's finding when one fires (it names the shape it saw); else the floor's when it
    fires (no rule can excuse a step from it); else the strongest score below firing."""
    best = max(found, key=lambda x: x.score, default=NOTHING)
    return floor if floor is not None and floor.fired and not best.fired else best


def monitor(wait_budget_s: float = waiting.WAIT_BUDGET_S) -> Monitor[LoopState]:
    """The loop monitor, advising on a wait once it is `wait_budget_s` long (RB_WAIT_BUDGET_S)."""
    if wait_budget_s == waiting.WAIT_BUDGET_S:
        return Monitor("semantic_loop", "loop", "loop", LoopState, evaluate)

    def with_budget(
        st: LoopState, f: StepFeatures, ctx: Context, sem: Semantics
    ) -> tuple[LoopState, Finding]:
        return evaluate(st, f, ctx, sem, wait_budget_s)

    return Monitor("semantic_loop", "loop", "loop", LoopState, with_budget)


MONITOR = monitor()
