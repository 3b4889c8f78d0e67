"""rb_cost_*: calls by routed model and reason, and the core's cost estimate, per org (issue 39)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from streams.core.policy import Policy
from streams.core.prices import parse_prices
from streams.core.state import TraceState
from streams.worker.metrics import LABELS_CAP, Metrics
from tests.driving import sealed
from tests.factories import b, run_start, step

PRICES = parse_prices(
    {"models": {"big": {"input": 3.0, "output": 15.0}, "small": {"input": 1.0, "output": 5.0}}}
)
OFF = {"monitors_enabled": False, "e_traces_enabled": False}


def _value(m: Metrics, name: str, **labels: str) -> float:
    v = m.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


def test_routed_calls_and_their_estimated_cost_are_counted_per_org() -> None:
    m = Metrics(CollectorRegistry(), process=False)
    policy = Policy().with_prices(PRICES)
    states: dict[str, TraceState] = {}
    events = [run_start("r", org_id="acme", model="big", model_routing={"FAST": "small"}, ts=0.0, **OFF)]
    events += [step("r", n, difficulty=0.05, ts=float(n), thought="x" * 6000) for n in range(1, 10)]
    for ev in events:
        s = sealed(b(ev), states.get, policy=policy)
        assert s.state is not None
        states["r"] = s.state
        m.observe(s, 0.001, 100.0)
    calls = sum(
        _value(m, "rb_cost_routed_calls_total", org="acme", model=model, reason=reason)
        for model in ("home", "small")
        for reason in ("none", "same", "downgrade", "declined")
    )
    assert calls == 10
    assert _value(m, "rb_cost_routed_calls_total", org="acme", model="small", reason="downgrade") == 1
    routed = _value(m, "rb_cost_usd_total", org="acme", kind="routed")
    never = _value(m, "rb_cost_usd_total", org="acme", kind="never_switching")
    assert 0 < routed < never  # the cheap model's calls cost less, cache writes counted


def test_a_run_without_routing_counts_nothing() -> None:
    m = Metrics(CollectorRegistry(), process=False)
    states: dict[str, TraceState] = {}
    for ev in [run_start("r", org_id="acme", **OFF), step("r", 1)]:
        s = sealed(b(ev), states.get)
        assert s.state is not None
        states["r"] = s.state
        m.observe(s, 0.001, 100.0)
    assert m.registry.get_sample_value("rb_cost_usd_total", {"org": "acme", "kind": "routed"}) is None


def test_label_values_are_capped() -> None:
    m = Metrics(CollectorRegistry(), process=False)
    got = {m._bounded("org", f"o{i}") for i in range(LABELS_CAP + 50)}
    assert len(got) == LABELS_CAP + 1 and "other" in got
