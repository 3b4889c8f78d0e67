"""Every worker the local harness starts signs its decisions (issue 48): `make demo`, the
examples and a bare WorkerProcess, with a key made for the run when none is given, handed to
the agents through the same settings. The forger's side, through the real broker, is
tests/integration/test_decision_signing.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streams.local import worker_process
from streams.local.demo import demo_settings
from streams.local.worker_process import WorkerProcess, signed
from streams.settings import Settings


def test_the_demo_signs_with_a_fresh_key_per_run_on_a_prefix_and_app_id_of_its_own(monkeypatch, tmp_path):
    monkeypatch.setenv("RB_APP_ID", "rb-streams")  # another deployment's, from the shell
    monkeypatch.delenv("RB_DECISION_KEY", raising=False)
    one, two = demo_settings(9092, str(tmp_path)), demo_settings(9092, str(tmp_path))
    k1, k2 = one.secret(one.decision_key), two.secret(two.decision_key)
    assert len(k1) == 64 and int(k1, 16) >= 0 and k1 != k2
    assert one.app_id == f"{one.topic_prefix}-streams" != two.app_id


def test_an_operators_key_is_kept_and_a_missing_one_is_made():
    mine = Settings.from_env({"RB_DECISION_KEY": "operator-key"})
    assert signed(mine) is mine
    made = signed(Settings.from_env({}))
    assert len(made.secret(made.decision_key)) == 64


@pytest.mark.parametrize("key", ["", "operator-key"])
def test_a_worker_process_gets_the_key_its_settings_hand_to_agents(monkeypatch, tmp_path: Path, key: str):
    seen: dict[str, Any] = {}

    class Child:
        def __init__(self, args: list[str], env: dict[str, str], **_: Any) -> None:
            seen.update(env)

        def poll(self) -> int:
            return 0

    monkeypatch.setattr(worker_process.subprocess, "Popen", Child)
    w = WorkerProcess(Settings.from_env({}, decision_key=key or None), tmp_path / "worker.log")
    w.stop()
    given = w.settings.secret(w.settings.decision_key)
    assert given and seen["RB_DECISION_KEY"] == given and (not key or given == key)


def test_replicas_started_together_without_a_key_share_the_one_made_for_them(monkeypatch, tmp_path: Path):
    keys: list[str] = []

    class Child:
        def __init__(self, args: list[str], env: dict[str, str], **_: Any) -> None:
            keys.append(env["RB_DECISION_KEY"])

        def poll(self) -> int:
            return 0

    async def ready(self: WorkerProcess, timeout_s: float = 0) -> None:
        return None

    monkeypatch.setattr(worker_process.subprocess, "Popen", Child)
    monkeypatch.setattr(WorkerProcess, "wait_ready", ready)
    s = Settings.from_env({})
    workers = WorkerProcess.start_all([(s, tmp_path / "a.log"), (s.with_(web_port=7001), tmp_path / "b.log")])
    for w in workers:
        w.stop()
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 64
    assert {w.settings.secret(w.settings.decision_key) for w in workers} == {keys[0]}
