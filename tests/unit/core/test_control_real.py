"""Control runs receive no steering at all on every real dev source (issue 50 target): 0
texts, the run's own model, no taint, no stop; their shadows are steered as any run would be.

Replayed through the worker's pipeline (`Replayer.pipeline.run`, which gives the sealed
result: the decision sent and the shadow) with holdout 0.5, on a stride of each source's runs
(the whole of every source is `bench.compliance`'s, which fails on a steered control decision
too)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest

from streams.core.holdout import Experiment, Experiments, assign_arm
from streams.core.policy import Policy
from streams.core.results import Sealed
from streams.replay import Replayer
from tests.fixtures.golden_decisions import REAL_DEV
from tests.models import semantics

SOURCES = (
    "swe_agent_java",
    "mini_swe_agent",
    "tau_retail",
    "captainagent",
    "openhands_swe",
    "trail_gaia",
    "agentdojo",
)
RUNS_PER_SOURCE = 14
EXP = Experiment("dev-control", 0.5, "rb")


def _runs(name: str) -> list[list[bytes]]:
    path = REAL_DEV / f"{name}.jsonl"
    if not path.exists():
        pytest.skip(f"real dev data not found at {REAL_DEV}")
    runs: dict[str, list[bytes]] = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            runs.setdefault(orjson.loads(line)["run_id"], []).append(line)
    return list(runs.values())


def _sample(runs: list[list[bytes]]) -> list[list[bytes]]:
    """A stride over the file: its runs come grouped (agentdojo's benign, then its attacked),
    so every part of it is replayed, in both arms."""
    stride = max(1, len(runs) // RUNS_PER_SOURCE)
    return [runs[i] for i in range(0, len(runs), stride)]


@pytest.mark.parametrize("name", SOURCES)
def test_control_runs_of_a_real_source_receive_no_steering(name: str) -> None:
    rp = Replayer(
        sem=semantics(), policy=Policy().with_experiments(Experiments(EXP)), clock=lambda: 1_767_225_600.0
    )
    seen: Counter[str] = Counter()
    for run in _sample(_runs(name)):
        for line in run:
            out = rp.pipeline.run(line, rp.clock(), rp.retriever.answer_now)
            assert isinstance(out, Sealed) and out.deadletter is None, out
            d: Any = out.decision
            if d is None:
                continue
            st = rp.states[d["run_id"]]
            assert d["arm"] == assign_arm(st.config.org_id, EXP, d["run_id"]) == st.config.arm
            seen[d["arm"]] += 1
            if d["arm"] == "treatment":
                assert out.shadow is None
                seen["treatment texts"] += bool(d["inject"])
                continue
            assert not d["inject"] and d["injection_text"] is None and d["injections"] == []
            assert d["model"] == st.config.model
            assert "taint" not in d and "sanctioned" not in d
            assert d["action"] == "continue" and d["action_reason"] is None
            shadow = out.shadow
            assert shadow is not None and shadow["arm"] == "control"
            seen["would-be texts"] += bool(shadow["inject"])
            seen["would-be taint"] += bool(shadow.get("taint"))
            seen["would-be escalations"] += shadow["action"] in ("escalate", "stop")
    assert seen["control"] and seen["treatment"], seen
    if name == "agentdojo":  # the attacked runs' shadows carry the gate's list
        assert seen["would-be taint"], seen
    if name in ("swe_agent_java", "openhands_swe", "mini_swe_agent"):  # coding runs loop
        assert seen["would-be texts"], seen
