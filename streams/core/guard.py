"""Do no harm: turn steering that makes runs fail more often to observe-only (opt-in, RB_GUARD).

The guard is fed outcome records (`<prefix>.outcomes`) one at a time, in order. For each
(org, experiment) it keeps one paired comparison over all runs, and one per monitor over the
runs where that monitor fired (treatment) or would have fired (control: the would-be first
fire the record keeps). When the anytime-valid test (`core.sequential`, one-sided: treatment
worse) rejects at RB_GUARD_ALPHA with at least RB_GUARD_MIN_RUNS runs in each arm of that
comparison, the steering it covers switches to observe-only: the org's ("*", everything) or
one monitor's. From then on the treatment runs of that org and experiment get control's
masking for it (`mask`): they are still evaluated in full, only what is sent is unsteered.
A switch is for good (until the worker restarts and reads the topic again, which switches
again at the same record).

Pure and deterministic: a function of the ordered records, no clock, no I/O. The worker feeds
it from the outcomes topic; `rb-streams replay --guard` from the records replay produces, so
the same switch happens after the same record. Bounded: at most `MAX_COMPARISONS` (org,
experiment) pairs and `MAX_MONITORS` monitors each (later ones are not tracked, counted), and
the run ids already counted (a re-sent record after a restart is identical: counted once) are
remembered up to `MAX_SEEN`, oldest forgotten first; names are cut at `NAME_CHARS`.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .decision import DecisionRecord
from .render import render_block
from .sequential import PairedStream, threshold

ALL = "*"  # the monitor label of an org-wide switch
TAINT_MONITOR = "data_instruction"  # the decision's taint/sanctioned lists are its steering
MAX_COMPARISONS = 1024
MAX_MONITORS = 64
MAX_SEEN = 65_536
NAME_CHARS = 128  # org, experiment and monitor names kept (the contract's are shorter)
ARMS = ("treatment", "control")


@dataclass(frozen=True)
class GuardSettings:
    """RB_GUARD (on/off), RB_GUARD_ALPHA, RB_GUARD_MIN_RUNS (runs in each arm before a switch)."""

    enabled: bool = False
    alpha: float = 0.05
    min_runs: int = 50


@dataclass(frozen=True)
class Switch:
    """One switch to observe-only, and why (for the log line, the metric and the report)."""

    org: str
    experiment: str
    monitor: str  # ALL: the org's whole steering
    record: int  # 1-based index of the outcome record (the guard's count) that tripped it
    run_id: str
    e_value: float
    treatment: tuple[int, int]  # (successes, runs)
    control: tuple[int, int]

    @property
    def why(self) -> str:
        what = "all steering" if self.monitor == ALL else f"monitor {self.monitor!r}"
        ts, tn = self.treatment
        cs, cn = self.control
        return (
            f"guard: {what} of org {self.org!r}, experiment {self.experiment!r} switched to "
            f"observe-only after outcome record {self.record} (run {self.run_id!r}): treatment "
            f"succeeded {ts}/{tn}, control {cs}/{cn}; sequential test e = {self.e_value:.3g}, "
            "treatment worse than control"
        )


@dataclass
class _Comparison:
    overall: PairedStream = field(default_factory=PairedStream)
    monitors: dict[str, PairedStream] = field(default_factory=dict)
    switched: set[str] = field(default_factory=set)


class Guard:
    """The guard's state: fed with `feed`, asked with `observe_only`."""

    def __init__(self, settings: GuardSettings) -> None:
        self.settings = settings
        self.records = 0  # outcome records fed (the index a Switch names)
        self.ignored = 0  # not counted: no experiment or arm, malformed, duplicate, beyond a cap
        self.switches: list[Switch] = []
        self._by: dict[tuple[str, str], _Comparison] = {}
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._off: dict[tuple[str, str], frozenset[str]] = {}

    def observe_only(self, org: str, experiment: str | None) -> frozenset[str]:
        """The monitors (ALL: everything) switched off for that org's experiment."""
        if experiment is None:
            return frozenset()
        return self._off.get((org, experiment), frozenset())

    def feed(self, record: Mapping[str, Any]) -> list[Switch]:
        """Count one outcome record; the switches it made (usually none)."""
        self.records += 1
        parsed = _parse(record)
        if parsed is None:
            self.ignored += 1
            return []
        org, exp, arm, success, fired, run_id = parsed
        digest = hashlib.sha256(run_id.encode("utf-8")).digest()[:8]
        if digest in self._seen:
            self.ignored += 1
            return []
        self._seen[digest] = None
        if len(self._seen) > MAX_SEEN:
            self._seen.popitem(last=False)
        comp = self._by.get((org, exp))
        if comp is None:
            if len(self._by) >= MAX_COMPARISONS:
                self.ignored += 1
                return []
            comp = self._by[(org, exp)] = _Comparison()
        comp.overall.add(arm, success)
        made: list[Switch] = []
        if self.settings.enabled and ALL not in comp.switched:
            made += self._check(comp, comp.overall, org, exp, ALL, run_id)
        for name in fired:
            stream = comp.monitors.get(name)
            if stream is None:
                if len(comp.monitors) >= MAX_MONITORS:
                    continue
                stream = comp.monitors[name] = PairedStream()
            stream.add(arm, success)
            if self.settings.enabled and ALL not in comp.switched and name not in comp.switched:
                made += self._check(comp, stream, org, exp, name, run_id)
        if made:
            self._off[(org, exp)] = frozenset(comp.switched)
            self.switches += made
        return made

    def _check(
        self, comp: _Comparison, s: PairedStream, org: str, exp: str, monitor: str, run_id: str
    ) -> list[Switch]:
        need = self.settings.min_runs
        if s.runs["treatment"] < need or s.runs["control"] < need:
            return []
        le = s.log_e("worse")
        if le < threshold(self.settings.alpha):
            return []
        comp.switched.add(monitor)
        return [
            Switch(
                org,
                exp,
                monitor,
                self.records,
                run_id,
                math.exp(min(le, 700.0)),
                (s.successes["treatment"], s.runs["treatment"]),
                (s.successes["control"], s.runs["control"]),
            )
        ]


def _parse(r: Mapping[str, Any]) -> tuple[str, str, str, bool, list[str], str] | None:
    """(org, experiment, arm, success, monitors that fired, run_id), or None: not countable."""
    org, exp, arm, run_id = r.get("org_id"), r.get("experiment"), r.get("arm"), r.get("run_id")
    if not (isinstance(org, str) and isinstance(exp, str) and isinstance(run_id, str)):
        return None
    if arm not in ARMS or not isinstance(r.get("outcome"), str):
        return None
    fired = r.get("first_fire")
    names: list[str] = []
    if isinstance(fired, dict):  # a record from anyone who can write the topic: cut, capped
        names = sorted({k[:NAME_CHARS] for k in list(fired)[:MAX_MONITORS] if isinstance(k, str)})
    return org[:NAME_CHARS], exp[:NAME_CHARS], str(arm), r["outcome"] == "success", names, run_id


def mask(decision: DecisionRecord, switched: frozenset[str], own_model: str | None) -> DecisionRecord:
    """The decision a treatment run gets once `switched` steering is observe-only.

    ALL: control's masking (the run's own model, no text, no taint, continue). One monitor:
    the monitors' texts go when that monitor fired on this step (a monitor text is composed
    from every monitor that fired, so it cannot be split: do no harm keeps none of it), an
    escalation or stop it caused becomes continue on the run's own model, and for
    data_instruction the taint and sanctioned lists go too. E-trace texts stay. The state is
    untouched (the caller masks what is sent only), so observe-only runs evolve as steered."""
    if not switched:
        return decision
    d: DecisionRecord = {**decision}
    everything = ALL in switched
    reason = d.get("action_reason")
    if everything or (reason is not None and reason.get("monitor") in switched):
        d["action"] = "continue"
        d["action_reason"] = None
        d["model"] = own_model
    fired = d["monitors"]["fired"]
    if everything:
        d["injections"] = []
    elif any(name in switched for name in fired) or (
        reason is not None and reason.get("monitor") in switched
    ):
        d["injections"] = [i for i in d["injections"] if i["source"] != "monitor"]
    if everything or TAINT_MONITOR in switched:
        d.pop("taint", None)
        d.pop("sanctioned", None)
    if len(d["injections"]) != len(decision["injections"]):
        d["injection_text"] = render_block(d["injections"]) if d["injections"] else None
        d["inject"] = bool(d["injections"])
        if d["action"] == "nudge" and not any(i["source"] == "monitor" for i in d["injections"]):
            d["action"] = "continue"
    return d
