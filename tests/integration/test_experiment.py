"""A held-out arm through the real broker and worker (issue 50 item 1): a control run that
loops as a treatment run is stopped for gets no steering at all, every decision names its arm,
and the worker assigns the arm replay computes."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from streams.agent.client import Decision, SyncSteeringClient
from streams.agent.session import SteeringSession
from streams.core.holdout import Experiment, assign_arm
from streams.local.worker_process import WorkerProcess
from tests.integration.helpers import run_summary
from tests.integration.test_escalation import LADDER, RERUN, ROUTING, TASK

pytestmark = pytest.mark.integration

EXP = {"name": "it-pilot", "holdout": 0.5, "seed": "it"}
OWN = "claude-sonnet-4-5"


def _id(arm: str) -> str:
    exp = Experiment(EXP["name"], 0.5, EXP["seed"])
    return next(r for r in (f"exp-it-{i}" for i in range(100)) if assign_arm("default", exp, r) == arm)


def _drive(c: SyncSteeringClient, run_id: str) -> list[Decision | None]:
    s = SteeringSession(
        c,
        run_id,
        model=OWN,
        model_routing=ROUTING,
        task=TASK,
        e_traces_enabled=False,
        escalation=LADDER,
        experiment=EXP,
        on_stop="return",
    )
    s.start()
    got = []
    for _ in range(6):
        s.begin_step()
        got.append(s.end_step(**RERUN))
    s.finish("success")
    return got


def test_a_control_run_is_unsteered_and_every_decision_names_its_arm(adapters_worker: WorkerProcess) -> None:
    control, treatment = _id("control"), _id("treatment")
    with SyncSteeringClient(adapters_worker.settings, deadline_ms=15000) as c:
        ctrl = _drive(c, control)
        treat = _drive(c, treatment)
    assert None not in ctrl and None not in treat
    for d in ctrl:
        assert d is not None
        raw: Any = d.data
        assert raw["arm"] == "control" and raw["model"] == OWN
        assert not raw["inject"] and raw["injections"] == [] and raw["injection_text"] is None
        assert raw["action"] == "continue" and raw["action_reason"] is None and "taint" not in raw
    assert all(d is not None and d.data["arm"] == "treatment" for d in treat)
    assert "stop" in [d.action for d in treat if d is not None]  # the same loop, steered
    # the shadow: the run's state evolved from the would-be decisions
    summary = run_summary(adapters_worker, control)
    assert summary["arm"] == "control" and summary["experiment"] == "it-pilot"
    assert summary["rung"] == "stop" and summary["monitor_injections"] > 0
    url = f"http://127.0.0.1:{adapters_worker.settings.web_port}/runs/{control}/steps"
    steps = json.loads(urllib.request.urlopen(url, timeout=10).read())
    entries = steps["steps"] if isinstance(steps, dict) else steps
    assert any(e["injection_sources"] for e in entries)
