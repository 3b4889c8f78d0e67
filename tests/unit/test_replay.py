from __future__ import annotations

import io

import orjson

from streams.cli import main
from streams.replay import Replayer, replay_file
from tests.factories import b, run_finish, run_start, step
from tests.models import semantics


def events():
    evs = [run_start("a", model_routing={"FAST": "small"}), run_start("b")]
    for i in range(1, 9):
        evs.append(step("a", i, difficulty=0.05))
        evs.append(step("b", i, thought="maybe an error in src/x.py? not sure"))
    evs += [run_finish("a"), run_finish("b", "failure: Boom")]
    return evs


def test_replay_writes_one_decision_per_model_call_in_wire_format(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(b(e) for e in events()) + b"\n{broken\n")
    out, dl = tmp_path / "out.jsonl", tmp_path / "dl.jsonl"
    assert main(["replay", str(src), "-o", str(out), "--deadletter", str(dl)]) == 0
    decisions = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert len(decisions) == 2 * 9
    a = [d for d in decisions if d["run_id"] == "a"]
    assert [d["step"] for d in a] == list(range(9))
    assert a[-1]["fsm_state"] == "FAST" and a[-1]["model"] == "small"
    dead = [orjson.loads(x) for x in dl.read_bytes().splitlines()]
    assert [d["reason"] for d in dead] == ["invalid_json"]


def test_interleaving_of_runs_does_not_change_decisions():
    evs = events()
    strip = lambda d: {k: v for k, v in d.items() if k != "processed_ts"}  # noqa: E731
    r1 = [strip(d) for d, _ in Replayer(sem=semantics()).run(b(e) for e in evs) if d]
    only_a = [e for e in evs if e["run_id"] == "a"] + [e for e in evs if e["run_id"] == "b"]
    r2 = [strip(d) for d, _ in Replayer(sem=semantics()).run(b(e) for e in only_a) if d]
    key = lambda d: (d["run_id"], d["step"])  # noqa: E731
    assert sorted(r1, key=key) == sorted(r2, key=key)


def test_replay_file_counts():
    src = io.BytesIO(b"\n".join(b(e) for e in events()))
    out = io.BytesIO()
    assert replay_file(src, out, sem=semantics()) == (18, 0)
