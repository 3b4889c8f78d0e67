from __future__ import annotations

from typing import Any

from streams.worker.metrics import RENDER_MAX_AGE_S, STAGES, Metrics


def test_metrics_render_at_most_once_per_interval_however_often_scraped():
    m = Metrics()
    first, ctype = m.render(now=10.0)
    assert ctype.startswith("text/plain") and b"rb_internal_errors_total" in first
    m.internal_error("send")
    assert m.render(now=10.0 + RENDER_MAX_AGE_S / 2)[0] is first  # cached: not rendered again
    fresh = m.render(now=10.0 + RENDER_MAX_AGE_S)[0]
    assert b'rb_internal_errors_total{stage="send"} 1.0' in fresh


def test_internal_errors_count_by_stage_from_zero():
    m = Metrics()
    body = m.render(now=0.0)[0].decode()
    for stage in STAGES:
        assert f'rb_internal_errors_total{{stage="{stage}"}} 0.0' in body
    m.internal_error("no-such-stage")  # an unknown stage is counted, as dispatch
    assert 'rb_internal_errors_total{stage="dispatch"} 1.0' in m.render(now=5.0)[0].decode()


def test_the_registry_reports_the_process_memory_and_cpu() -> None:
    from streams.worker.metrics import Metrics

    m = Metrics()
    assert (m.registry.get_sample_value("process_resident_memory_bytes") or 0) > 10_000_000
    assert m.registry.get_sample_value("process_cpu_seconds_total") is not None
    body, _ = m.render()
    assert b"python_info" in body


def test_the_event_to_decision_lag_observes_only_plausible_event_times(sem) -> None:
    """Issue 32: one run_start with ts=-1e300 made rb_event_to_decision_seconds_sum 1e300."""
    import asyncio

    from streams.worker.metrics import LAG_AHEAD_MAX_S, LAG_MAX_S
    from tests.factories import run_start
    from tests.unit.worker.harness import GatedStore, rig

    async def go() -> dict[str, float]:
        r = rig(sem, GatedStore())
        now = r.now[0]
        for i, ts in enumerate(
            (-1e300, now - 0.5, now + 30, now + LAG_AHEAD_MAX_S + 1, now - LAG_MAX_S - 1, 1e300)
        ):
            await r.feed(run_start(f"r{i}", ts=ts))
        await r.drain()
        assert len(r.decisions) == 6 and r.deadletters == []  # every run is answered all the same
        get = r.metrics.registry.get_sample_value
        names = ("rb_event_to_decision_seconds_count", "rb_event_to_decision_seconds_sum")
        values = {n: get(n) or 0.0 for n in names}
        values["implausible"] = get("rb_event_ts_implausible_total") or 0.0
        return values

    v = asyncio.run(go())
    assert v["rb_event_to_decision_seconds_count"] == 2  # 0.5 s behind, and 30 s ahead (as 0)
    assert v["rb_event_to_decision_seconds_sum"] == 0.5
    assert v["implausible"] == 4


def test_the_worker_climbs_the_same_ladder_as_replay_and_counts_each_rung_once(sem) -> None:
    """Issue 30: an org default given to the worker and to replay gives the same decisions; the
    worker counts rb_escalations_total{action,monitor} once per rung reached; /runs shows it."""
    import asyncio

    from streams.core.ladder import Defaults
    from streams.core.policy import Policy
    from streams.replay import Replayer
    from tests.factories import b, run_start, step
    from tests.unit.worker.harness import GatedStore, rig

    policy = Policy().with_escalation(Defaults.parse({"escalate_model_after": 1, "stop_after": 2}))
    events = [run_start("r", model_routing={"SLOW": "big"})] + [
        step(
            "r",
            k,
            action="bash",
            action_input={"command": "pytest tests/test_x.py"},
            observation="FAILED tests/test_x.py::test_x - AssertionError",
            observation_is_error=True,
        )
        for k in range(1, 9)
    ]

    async def go() -> tuple[list[dict[str, object]], object]:
        r = rig(sem, GatedStore(), policy=policy)
        for ev in events:
            await r.feed(ev)
            await r.drain()
        return r.decisions, r

    live, r = asyncio.run(go())
    rp = Replayer(sem=sem, policy=policy, clock=lambda: 1000.0)
    replayed = [d for d, _ in rp.run([b(ev) for ev in events]) if d is not None]
    # the ladder's fields (the E-trace reasons differ: the rig has a pattern store, replay none)
    keys = ("step", "action", "action_reason", "model", "monitors", "suppressed")
    assert [[d[k] for k in keys] for d in live] == [[d[k] for k in keys] for d in replayed]
    monitor_texts = lambda ds: [[i["text"] for i in d["injections"] if i["source"] == "monitor"] for d in ds]  # noqa: E731
    assert monitor_texts(live) == monitor_texts(replayed)
    assert [d["action"] for d in live][-1] == "stop" and "escalate" in [d["action"] for d in live]
    get = r.metrics.registry.get_sample_value  # type: ignore[attr-defined]
    assert get("rb_escalations_total", {"action": "escalate", "monitor": "semantic_loop"}) == 1
    assert get("rb_escalations_total", {"action": "stop", "monitor": "semantic_loop"}) == 1
    assert get("rb_escalations_total", {"action": "stop", "monitor": "late_sprawl"}) == 0
    summary = r.runs.lookup("r").summary()  # type: ignore[attr-defined]
    assert summary["rung"] == "stop" and summary["ignored_warnings"] == 2


def test_a_rung_that_comes_down_on_progress_is_not_counted_as_an_escalation(sem) -> None:
    """Issue 38: rb_escalations_total counts climbs; a stop lifted to escalate by progress
    (docs/escalation.md#when-the-rung-comes-down) is no new escalation."""
    from streams.core.state import TraceState
    from tests.driving import sealed
    from tests.factories import b, run_start, step

    m = Metrics(process=False)
    table: dict[str, TraceState] = {}

    def feed(ev: dict[str, object]) -> str:
        res = sealed(b(ev), table.get, None, 1.0, sem)
        assert res.state is not None and res.decision is not None
        table["r"] = res.state
        m.observe(res, 0.001, 2.0)
        return str(res.decision["action"])

    feed(run_start("r", escalation={"escalate_model_after": 1, "stop_after": 2}))
    test = {"command": "pytest tests/test_x.py"}
    failed = "FAILED tests/test_x.py::test_x - AssertionError: 1 != 2"
    for k in range(1, 7):
        feed(step("r", k, action="bash", action_input=test, observation=failed, observation_is_error=True))
    assert feed(step("r", 7, action="bash", action_input=test, observation="1 passed")) == "escalate"
    get = m.registry.get_sample_value
    assert get("rb_escalations_total", {"action": "escalate", "monitor": "semantic_loop"}) == 1
    assert get("rb_escalations_total", {"action": "stop", "monitor": "semantic_loop"}) == 1


def _outcome(org: str, **kw: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "org_id": org,
        "experiment": "pilot",
        "arm": "control",
        "outcome": "failure: stopped_by_steering",
        "steps": 12,
        "cost_usd": 0.3,
        "model_calls": {"small": 3, "big": 9},
        "compliance": {},
    }
    return {**rec, **kw}


def test_ended_runs_are_counted_by_org_experiment_arm_and_outcome_with_bounded_labels() -> None:
    from streams.worker.metrics import LABELS_CAP

    m = Metrics(process=False)
    m.outcome(_outcome("acme", compliance={"semantic_loop": {"complied": 2, "ignored": 1, "pending": 4}}))
    m.outcome(_outcome("acme", experiment=None, arm=None, outcome="success", compliance={}))
    for i in range(LABELS_CAP + 5):
        m.outcome(_outcome(f"org-{i}", experiment=f"exp-{i}"))
    body = m.render()[0].decode()
    assert (
        'rb_runs_finished_total{arm="control",experiment="pilot",org="acme",outcome="stopped_by_steering"} 1.0'
        in body
    )
    assert 'rb_runs_finished_total{arm="none",experiment="none",org="acme",outcome="success"} 1.0' in body
    assert (
        'rb_compliance_total{arm="control",model="big",monitor="semantic_loop",verdict="complied"} 2.0'
        in body
    )
    assert 'verdict="ignored"} 1.0' in body and 'verdict="pending"' not in body
    assert 'rb_run_cost_usd_bucket{arm="control",experiment="pilot",le="0.5",org="acme"} 1.0' in body
    orgs = {
        line.split('org="')[1].split('"')[0]
        for line in body.splitlines()
        if "rb_runs_finished_total{" in line
    }
    assert len(orgs) <= LABELS_CAP + 1 and "other" in orgs


def test_compliance_is_counted_on_the_model_that_served_each_answered_step() -> None:
    m = Metrics(process=False)
    by_model = {
        "semantic_loop": {"small": {"complied": 1, "ignored": 0}, "big": {"complied": 0, "ignored": 3}}
    }
    m.outcome(
        _outcome(
            "acme",
            compliance={"semantic_loop": {"complied": 1, "ignored": 3, "pending": 0}},
            compliance_by_model=by_model,
        )
    )
    get = m.registry.get_sample_value

    def n(model: str, verdict: str) -> float | None:
        labels = {"arm": "control", "model": model, "monitor": "semantic_loop", "verdict": verdict}
        return get("rb_compliance_total", labels)

    assert (n("small", "complied"), n("big", "ignored")) == (1, 3)
    assert n("big", "complied") is None and n("small", "ignored") is None  # not the run's top model's


def test_each_stored_state_and_sent_decision_is_counted_in_bytes(sem) -> None:
    """rb_state_bytes observes every state the worker writes (the changelog's record before
    compression), rb_decision_written_bytes every decision it sends: what sizing starts from."""
    import asyncio

    import orjson

    from tests.factories import run_start, step
    from tests.unit.worker.harness import GatedStore, rig

    async def go() -> tuple[float, float, float, int]:
        r = rig(sem, GatedStore())
        await r.feed(run_start("b1"))
        for i in range(1, 6):
            await r.feed(step("b1", i))
        await r.drain()
        get = r.metrics.registry.get_sample_value
        sent = sum(len(orjson.dumps(d)) for d in r.decisions)  # as sent (orjson, same order)
        return (
            get("rb_state_bytes_count") or 0.0,
            get("rb_state_bytes_sum") or 0.0,
            get("rb_decision_written_bytes_total") or 0.0,
            sent,
        )

    count, total, decided, sent = asyncio.run(go())
    assert count == 6 and total > 6 * 500  # one write per event, each a real state
    assert decided == sent > 6 * 100
