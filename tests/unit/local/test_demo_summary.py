"""The demo ends with what each simulated agent got from steering (issue 31: the live lines
scroll away, and the demo ended without a per-agent summary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams.agent.client import StepLogEntry
from streams.local import demo
from streams.local.demo import (
    DEFAULT_MODEL,
    ROUTING,
    SUMMARY_COLUMNS,
    AgentSummary,
    cost_line,
    summarize,
    summary_table,
)
from streams.local.simulate import trajectory


def entry(step: int, **kw: Any) -> StepLogEntry:
    fields: dict[str, Any] = {
        "fsm_state": "NORMAL",
        "difficulty": 0.4,
        "model_id": None,
        "injections": 0,
        "injection_sources": [],
        "intervention_texts": [],
        "monitors_fired": [],
        "failure_type": None,
        "skipped_reason": None,
        "tokens": 10,
        "latency_ms": 5.0,
    }
    fields.update(kw)
    return StepLogEntry(step=step, **fields)


LOOPING = [
    entry(0, fsm_state="INIT", injections=3, injection_sources=["e3", "e3", "e3"]),
    entry(1, fsm_state="FAST", model_id="claude-haiku-4-5"),
    entry(2, monitors_fired=["semantic_loop"], injections=1, injection_sources=["monitor"], action="nudge"),
    entry(3, monitors_fired=["semantic_loop", "late_sprawl"], injections=1, injection_sources=["monitor"]),
    entry(4, fsm_state=None, steered=False, late=True),
    entry(5, fsm_state="SLOW", model_id="claude-opus-4-5", action="escalate"),
]


def test_an_agents_summary_counts_states_routing_fires_and_the_calls_each_source_steered() -> None:
    s = summarize("looping-agent", "demo-looping-1", LOOPING, "claude-sonnet-4-6")
    assert (s.calls, s.late) == (6, 1)
    assert s.states == {"INIT": 1, "FAST": 1, "NORMAL": 2, "SLOW": 1}
    assert s.models == {"claude-sonnet-4-6": 3, "claude-haiku-4-5": 1, "claude-opus-4-5": 1}
    assert s.fired == {"semantic_loop": 2, "late_sprawl": 1}
    assert s.injections == {"e3": 1, "monitor": 2}  # three E3 rules on the first call: one call
    assert s.actions == {"escalate": 1}


def test_the_table_has_a_header_and_one_aligned_line_per_agent() -> None:
    rows = [
        summarize("looping-agent", "r1", LOOPING, "claude-sonnet-4-6"),
        summarize("healthy-agent", "r2", [entry(0, fsm_state="INIT"), entry(1, fsm_state="FAST")], "m"),
    ]
    lines = summary_table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    assert lines[0].split("  ")[0] == "agent" and all(c in lines[0] for c in SUMMARY_COLUMNS)
    assert set(lines[1]) <= {"-", " "}
    looping, healthy = lines[2], lines[3]
    assert looping.startswith("looping-agent ") and healthy.startswith("healthy-agent ")
    assert "sonnet-4-6 3, haiku-4-5 1, opus-4-5 1" in looping  # most first, vendor prefix cut
    assert "semantic_loop 2, late_sprawl 1" in looping and "monitor 2, e3 1; escalate 1" in looping
    for col in SUMMARY_COLUMNS[1:]:  # every column starts at the same place on every line
        at = lines[0].index(col)
        assert lines[2][at - 2 : at] == "  " and lines[3][at - 2 : at] == "  ", col
    assert healthy.split()[1:3] == ["2", "0"] and healthy.rstrip().endswith("-")  # nothing fired


def test_the_demo_reports_latency_and_late_decisions_against_the_clients_default_deadline() -> None:
    """Issue 40: the demo waited up to 2 s per decision and showed "late 0"; it now runs with
    the client's default deadline and says how many decisions missed it."""
    import inspect

    from streams.kafka.client_settings import ClientSettings
    from streams.local.demo import fleet, latency_line

    assert inspect.signature(fleet).parameters["deadline_ms"].default is None  # the client's own
    rows = [
        summarize("looping-agent", "r1", LOOPING, "m"),
        summarize("healthy-agent", "r2", [entry(0, latency_ms=40.0), entry(1, latency_ms=300.0)], "m"),
    ]
    line = latency_line(rows, ClientSettings.model_fields["client_deadline_ms"].default)
    assert "250 ms deadline" in line and "7 of 8 in time" in line and "late 1" in line
    assert "median 5 ms" in line and "max 300 ms" in line


def _row(behaviour: str, model: str) -> AgentSummary:
    task, script = trajectory(behaviour, 12, 0)
    steps = list(script)
    routed = [DEFAULT_MODEL] * 6 + [model] * (len(steps) - 6)
    return AgentSummary(behaviour, "r", task=task, steps=steps, routed=routed, texts=[None] * len(steps))


def test_the_demo_prints_routings_cost_effect_with_upgrades_apart() -> None:
    cheap = cost_line([_row("healthy", ROUTING["FAST"])])
    assert "routing's downgrades -" in cheap  # a long FAST stint on the cheap model saves
    assert "steering's own cache cost +0.0%" in cheap
    strong = cost_line([_row("flailing", ROUTING["SLOW"])])
    assert "routing's downgrades +0.0%" in strong  # no downgrade: nothing saved, nothing lost
    assert f"with upgrades to {ROUTING['SLOW']} +" in strong  # spending by design, shown apart


def test_without_the_example_price_table_the_cost_is_in_the_default_ratios(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(demo, "EXAMPLE_PRICES", tmp_path / "missing.toml")
    line = cost_line([_row("healthy", ROUTING["FAST"])])
    assert "units: the agents' model's input token = 1" in line
    assert "routing's downgrades -" in line
