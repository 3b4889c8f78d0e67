"""Runs the six monitors on one step and combines them: scores, fired, composite, failure type,
steering text. Pure: (monitor state, step) -> (new monitor state, result)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..decision import MonitorsWire
from . import compression, contradiction, drift, loop, sprawl, verification
from .base import FIRE_AT, Finding
from .features import StepFeatures
from .profiles import FAILURE_TYPES, MONITORS, composite
from .semantics import Semantics


@dataclass
class MonitorState:
    """Every monitor's bounded memory of the run."""

    loop: loop.LoopState = field(default_factory=loop.LoopState)
    verification: verification.VerificationState = field(default_factory=verification.VerificationState)
    contradiction: contradiction.ContradictionState = field(default_factory=contradiction.ContradictionState)
    compression: compression.CompressionState = field(default_factory=compression.CompressionState)
    sprawl: sprawl.SprawlState = field(default_factory=sprawl.SprawlState)
    drift: drift.DriftState = field(default_factory=drift.DriftState)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MonitorState:
        return cls(
            loop=loop.LoopState(**d["loop"]),
            verification=verification.VerificationState(**d["verification"]),
            contradiction=contradiction.ContradictionState(**d["contradiction"]),
            compression=compression.CompressionState(**d["compression"]),
            sprawl=sprawl.SprawlState(**d["sprawl"]),
            drift=drift.DriftState(**d["drift"]),
        )


@dataclass(frozen=True, slots=True)
class MonitorResult:
    scores: dict[str, float]
    fired: list[str]
    composite: float
    failure_type: str | None
    text: str | None  # steering text of every fired monitor, strongest first
    final: bool = False  # the step finished the run: nothing reads an injection

    def as_wire(self) -> MonitorsWire:
        return {
            "scores": self.scores,
            "fired": self.fired,
            "composite": self.composite,
            "failure_type": self.failure_type,
        }


def to_embed(ms: MonitorState) -> list[str]:
    """Texts the run's next step will embed with the full model: the adapter may embed them in
    the background meanwhile, so the decision path finds them cached."""
    return drift.to_embed(ms.drift)


def evaluate(
    ms: MonitorState, f: StepFeatures, weights: dict[str, float], task: str | None, sem: Semantics
) -> tuple[MonitorState, MonitorResult]:
    loop_st, loop_f = loop.evaluate(ms.loop, f, sem)
    ver_st, ver_f = verification.evaluate(ms.verification, f)
    con_st, con_f = contradiction.evaluate(ms.contradiction, f, sem)
    spr_st, spr_f, new_files = sprawl.evaluate(ms.sprawl, f, sem, task)
    com_st, com_f = compression.evaluate(ms.compression, f, f.modifies or new_files > 0, sem)
    dri_st, dri_f = drift.evaluate(ms.drift, f, sem, task)
    findings: dict[str, Finding] = {
        "claim_contradiction": con_f,
        "semantic_loop": loop_f,
        "verification_skip": ver_f,
        "cyclic_compression": com_f,
        "late_sprawl": spr_f,
        "silent_topic_drift": dri_f,
    }
    scores = {name: round(min(max(findings[name].score, 0.0), 1.0), 4) for name in MONITORS}
    fired = sorted(
        (n for n in MONITORS if scores[n] >= FIRE_AT),
        key=lambda n: (-scores[n], -weights.get(n, 0.0), MONITORS.index(n)),
    )
    texts = [t for n in fired if (t := findings[n].text)]
    result = MonitorResult(
        scores=scores,
        fired=fired,
        composite=composite(scores, weights),
        failure_type=FAILURE_TYPES[fired[0]] if fired else None,
        text="\n\n".join(texts) if texts else None,
        final=f.finishes,
    )
    return MonitorState(loop_st, ver_st, con_st, com_st, spr_st, dri_st), result
