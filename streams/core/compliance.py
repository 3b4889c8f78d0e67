"""Did the agent do what it was told? (issue 50 item 3.) Pure, bounded.

Each monitor intervention a decision carries (a control run's would-be one: the same test, on
the shadow decision) opens a check: within the next WATCH_STEPS steps, did the behaviour the
monitor flagged stop? A check is decided `complied` or `ignored`; one still open when the run
ends stays `pending`. The test is the monitor's own failure, seen from the steps that follow:

- semantic_loop: the flagged step's call is made again, or the loop monitor finds the loop again (a
  reworded search, an A/B alternation: its own rules) -> ignored; WATCH_STEPS steps without
  either -> complied.
- verification_skip: a check runs (a test, a build, the changed script; an
  attempt that could not run checks nothing) -> complied; a finish before it, or WATCH_STEPS
  steps without one -> ignored.
- data_instruction: a call carries a value from a result that held
  instructions (the hijacked call the gate refuses) -> ignored; WATCH_STEPS steps without one
  -> complied.
- silent_topic_drift: a step acknowledges the change of direction (drift's own ACK
  phrases), names what the task names, or checks the work -> complied; WATCH_STEPS steps
  without -> ignored.
- claim_contradiction, cyclic_compression, late_sprawl, and plugin monitors: no natural test of "stopped" (a
  contradiction is not repeated on demand; a summary or a new front is not a call to avoid):
  nothing is counted for them.

A run that finishes (run_finish) with a check open decides it as the window's end would, when
the agent made at least one step after the text (it stopped the call, or never ran the check,
before it finished); a check opened on the run's last step stays `pending` (the agent never
answered it), and so do the open checks of a run evicted unfinished.

A new intervention of a monitor whose check is still open closes that check as its window's
end would (the steps so far are all there is), then opens its own: at most one open check per
monitor. Counts are kept per monitor and per served model (the model of the decision that
carried the text; a control run's: its own model), at most MODELS_KEPT models per monitor
(others count as "other").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .ladder import call_key
from .monitors import data_instruction, drift, loop, verification
from .monitors.drift import ACK, names_task
from .monitors.sprawl import touches_tests
from .reading.features import StepFeatures

if TYPE_CHECKING:
    from .decision import DecisionRecord
    from .state import TraceState

WATCH_STEPS = 3  # steps after the intervention within which the behaviour must have stopped
MODELS_KEPT = 8  # served models counted apart, per monitor
MODEL_CHARS = 64
OTHER = "other"
UNKNOWN = "unknown"  # a decision that named no model, of a run that declared none
THOUGHT_CHARS = 2000  # of a thought the drift test reads (ACK is linear; names_task cuts too)

LOOP, VERIFICATION, DRIFT = loop.MONITOR.name, verification.MONITOR.name, drift.MONITOR.name
TESTED = (LOOP, VERIFICATION, data_instruction.NAME, DRIFT)
UNTESTED = ("claim_contradiction", "cyclic_compression", "late_sprawl")
# What a window's end decides, per monitor: nothing flagged happened again (complied), or the
# asked-for step never came (ignored).
_AT_END = {LOOP: True, data_instruction.NAME: True, VERIFICATION: False, DRIFT: False}

# An open check: [monitor, step warned, steps seen since, model, call keys it is about]
Pending = list[Any]


def _verdict(p: Pending, f: StepFeatures, fired: list[str], st: TraceState) -> bool | None:
    """True: complied; False: ignored; None: not yet decided by this step."""
    name = p[0]
    if name == LOOP:
        if LOOP in fired or (f.action and call_key(f.sig) in p[4]):
            return False
    elif name == VERIFICATION:
        if f.verifies and not f.could_not_run:
            return True
        if f.finishes:
            return False
    elif name == data_instruction.NAME:
        if data_instruction.hijack(st.monitors.get(data_instruction.KEY), f.step) is not None:
            return False
    elif name == DRIFT:
        thought = f.thought[:THOUGHT_CHARS]
        if (
            ACK.search(thought)
            or touches_tests(f)
            or names_task(f"{thought} {' '.join(f.paths)}", st.config.task)
        ):
            return True
    return None if p[2] + 1 < WATCH_STEPS else _AT_END[name]


def _model(d: DecisionRecord, st: TraceState) -> str:
    """The model the intervention's next call goes to: the decision's, else the run's own (a
    control run's decisions always name its own)."""
    model = st.config.model if st.config.arm == "control" else d["model"] or st.config.model
    return (model or UNKNOWN)[:MODEL_CHARS]


def _count(
    counts: dict[str, list[int]], by_model: dict[str, dict[str, list[int]]], p: Pending, ok: bool
) -> None:
    i = 0 if ok else 1
    name, model = str(p[0]), str(p[3])
    c = counts.setdefault(name, [0, 0])
    c[i] += 1
    models = by_model.setdefault(name, {})
    if model not in models and len(models) >= MODELS_KEPT:
        model = OTHER
    m = models.setdefault(model, [0, 0])
    m[i] += 1


def observe(st: TraceState, f: StepFeatures, d: DecisionRecord, told: bool) -> TraceState:
    """The state after this step: its open checks judged on it, and a check opened for each
    tested monitor that fired on this step when the step's decision (`d`, the shadow on a
    control run) carried a new monitor text (`told`: not a stop's repeated text, not a
    held-back one). Cheap when there is nothing to judge or open (most steps)."""
    fired = d["monitors"]["fired"]
    told = told and bool(fired)
    if not st.compliance_pending and not told:
        return st
    counts = {k: list(v) for k, v in st.compliance.items()}
    by_model = {k: {m: list(c) for m, c in v.items()} for k, v in st.compliance_by_model.items()}
    opened = [n for n in fired if n in _AT_END] if told else []
    pending: list[Pending] = []
    for p in st.compliance_pending:
        ok = _verdict(p, f, fired, st)
        if ok is None and p[0] in opened:
            ok = _AT_END[str(p[0])]  # superseded: decided on the steps it had
        if ok is None:
            pending.append([p[0], p[1], p[2] + 1, p[3], p[4]])
        else:
            _count(counts, by_model, p, ok)
    if opened:
        model = _model(d, st)
        about = [call_key(f.sig)] if LOOP in opened and f.action else []
        pending += [[n, f.step, 0, model, about if n == LOOP else []] for n in opened]
    return st.evolve(compliance=counts, compliance_by_model=by_model, compliance_pending=pending)


def finish(st: TraceState) -> TraceState:
    """The state at run_finish: each open check the agent answered with a step or more is
    decided as its window's end would; one opened on the last step stays pending."""
    if not any(p[2] for p in st.compliance_pending):
        return st
    counts = {k: list(v) for k, v in st.compliance.items()}
    by_model = {k: {m: list(c) for m, c in v.items()} for k, v in st.compliance_by_model.items()}
    pending = []
    for p in st.compliance_pending:
        if p[2]:
            _count(counts, by_model, p, _AT_END[str(p[0])])
        else:
            pending.append(p)
    return st.evolve(compliance=counts, compliance_by_model=by_model, compliance_pending=pending)


def summary(st: TraceState) -> dict[str, dict[str, int]]:
    """{monitor: {"complied": n, "ignored": n, "pending": n}} of the run's interventions (a
    control run's would-be ones), for the tested monitors that intervened."""
    out = {n: {"complied": c[0], "ignored": c[1], "pending": 0} for n, c in st.compliance.items()}
    for p in st.compliance_pending:
        out.setdefault(str(p[0]), {"complied": 0, "ignored": 0, "pending": 0})["pending"] += 1
    return dict(sorted(out.items()))


def by_model(st: TraceState) -> dict[str, dict[str, dict[str, int]]]:
    """{monitor: {served model: {"complied": n, "ignored": n}}} (at most MODELS_KEPT models
    per monitor, then "other")."""
    return {
        n: {m: {"complied": c[0], "ignored": c[1]} for m, c in sorted(models.items())}
        for n, models in sorted(st.compliance_by_model.items())
    }


def merge(
    total: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, int]]:
    """Two summaries added up (a fleet's, for a report or a bench)."""
    out = {n: dict(v) for n, v in total.items()}
    for n, v in run.items():
        t = out.setdefault(n, {"complied": 0, "ignored": 0, "pending": 0})
        for k, x in v.items():
            t[k] = t.get(k, 0) + x
    return out
