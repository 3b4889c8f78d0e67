"""A plugin distribution installed next to a real worker: runs that name its scorer, profile
and transition get them through a real broker, and replay with the same plugins agrees."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import orjson
import pytest

from streams.agent.client import SteeringClient
from streams.local.worker_process import WorkerProcess
from streams.plugins import PROFILES, SCORERS, TRANSITIONS, load_policy
from streams.replay import Replayer
from tests.factories import b, run_finish, run_start, step
from tests.integration.helpers import make_settings
from tests.integration.kafka_io import read_all
from tests.models import semantics
from tests.plugin_dist import CONSTANT_DIFFICULTY, write_dist

pytestmark = pytest.mark.integration


def test_a_worker_runs_an_installed_plugins_scorer_profile_and_transition(
    broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    write_dist(
        site,
        {
            SCORERS: {"constant": "constant"},
            PROFILES: {"oncall": "SRE"},
            TRANSITIONS: {"end_at_three": "end_at_three"},
        },
    )
    s = make_settings(broker, tmp_path)
    pythonpath = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    w = WorkerProcess.start(s, tmp_path / "worker.log", extra_env={"PYTHONPATH": pythonpath})
    events = [
        run_start(
            "plug-1",
            scorer="constant",
            task_profile="oncall",
            fsm_transition="end_at_three",
            e_traces_enabled=False,  # no pattern store on either side: not what is compared
        ),
        *(step("plug-1", k, thought=f"step {k}") for k in range(1, 5)),
        run_finish("plug-1"),
    ]
    try:

        async def publish() -> None:
            async with SteeringClient(s) as c:
                for e in events:
                    await c.send_raw(b(e), key=b"plug-1")

        asyncio.run(publish())
        live = [
            d
            for d in asyncio.run(read_all(s.bootstrap_servers, s.steering_topic, expect=5))
            if d["run_id"] == "plug-1"
        ]
    finally:
        w.stop()
    log = w.log_path.read_text(errors="replace")
    assert "Traceback" not in log, w.tail(120)
    by_step = {d["step"]: d for d in live}
    # the plugin's constant scorer scored every step; its transition ended the run at step 3
    assert sorted(by_step) == [0, 1, 2, 3, 4]
    assert [by_step[k]["difficulty"] for k in (1, 2, 3, 4)] == [CONSTANT_DIFFICULTY] * 4
    assert {by_step[k]["difficulty_source"] for k in (1, 2, 3, 4)} == {"scorer"}
    assert [by_step[k]["fsm_state"] for k in (1, 2, 3, 4)] == ["NORMAL", "NORMAL", "END", "END"]

    # replay, with the same plugins installed, gives the worker's decisions
    monkeypatch.syspath_prepend(str(site))
    offline = [d for d, _ in Replayer(policy=load_policy(s), sem=semantics()).run(b(e) for e in events) if d]

    def norm(ds: list[dict]) -> list[bytes]:
        drop = ("processed_ts", "key", "partition", "offset")
        return sorted(
            orjson.dumps({k: v for k, v in d.items() if k not in drop}, option=orjson.OPT_SORT_KEYS)
            for d in ds
        )

    assert norm(live) == norm(offline)
