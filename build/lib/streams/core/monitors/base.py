"""Shared shapes for the six monitors."""

from __future__ import annotations

from dataclasses import dataclass

FIRE_AT = 0.6


@dataclass(frozen=True, slots=True)
class Finding:
    """One monitor's verdict on one step: a score in [0, 1] and, when it fires, what to say."""

    score: float
    text: str | None = None

    @property
    def fired(self) -> bool:
        return self.score >= FIRE_AT


NOTHING = Finding(0.0)


def clip01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def quote(text: str, n: int = 80) -> str:
    """A short, single-line quotation for steering text."""
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1] + "…"
