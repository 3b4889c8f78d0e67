"""core/reading is the floor the monitors and the scorer stand on: they read a step through it
and never through each other, and it imports neither."""

from __future__ import annotations

from tests.unit.test_imports import graph


def _under(prefix: str, deps: set[str]) -> list[str]:
    return sorted(d for d in deps if d == prefix or d.startswith(prefix + "."))


def test_reading_imports_neither_the_monitors_nor_the_scorer() -> None:
    g = graph()
    reading = {m: d for m, d in g.items() if m.startswith("streams.core.reading")}
    assert reading, "no streams.core.reading modules found"
    bad = {
        m: _under("streams.core.monitors", d)
        + _under("streams.core.scoring", d)
        + _under("streams.core.difficulty", d)
        for m, d in reading.items()
    }
    assert {m: d for m, d in bad.items() if d} == {}


def test_the_monitors_and_the_scorer_do_not_import_each_other() -> None:
    g = graph()
    monitors_to_scoring = {
        m: _under("streams.core.scoring", d) for m, d in g.items() if m.startswith("streams.core.monitors")
    }
    scoring_to_monitors = {
        m: _under("streams.core.monitors", d) for m, d in g.items() if m.startswith("streams.core.scoring")
    }
    assert {m: d for m, d in monitors_to_scoring.items() if d} == {}
    assert {m: d for m, d in scoring_to_monitors.items() if d} == {}


def test_the_loop_signal_does_not_import_its_rules() -> None:
    """The signal measures; the rules judge: rules read the signal, never the reverse."""
    assert _under("streams.core.monitors.loop.rules", graph()["streams.core.monitors.loop.signal"]) == []
