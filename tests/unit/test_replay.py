from __future__ import annotations

import io

import orjson

from streams.cli.main import main
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
    # issue 39: FAST names the cheap model only when the switch pays under caching, and says why
    assert a[-1]["fsm_state"] == "FAST" and a[-1]["model"] in ("small", None)
    assert a[-1]["routing_reason"].split(":")[0] in ("downgrade", "same", "declined", "return")
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


def test_a_replayed_signed_eviction_is_judged_by_replay_as_the_worker_judged_it(tmp_path, sem):
    """Issue 32: an idle run is evicted, its id starts again, and someone re-sends the first
    (signed, still valid) eviction record. The worker refuses it (made for the earlier run);
    replay of the recorded topic must too: it used to evict the new run, answer the agent's
    repeated run_start with a decision 0 the worker never sent and dead-letter step 1."""
    import asyncio

    from streams.etraces.retrieval import Retriever
    from tests.unit.worker.harness import PARTITIONS, GatedStore, rig

    topic: list[bytes] = []  # the steps topic, as the worker read it

    async def worker() -> tuple[list[dict], list[dict]]:
        r = rig(sem, GatedStore(), idle_s=60.0)

        async def feed(value: bytes) -> None:
            topic.append(value)
            await r.feed(value, key=b"r")
            await r.drain()

        await feed(b(run_start("r")))
        r.now[0] += 61
        assert await r.retention.sweep(r.now[0]) == 1
        evict = r.steps_sent[0][1]
        await feed(evict)  # applied: the run was idle
        assert r.runs.lookup("r") is None
        again = b(run_start("r", ts=1_700_000_500.0))
        await feed(again)  # the id starts again
        await feed(evict)  # the first request, replayed
        await feed(again)  # the agent's retry of its run_start: a copy, decision 0 re-sent as is
        await feed(b(step("r", 1)))
        return r.decisions, r.deadletters

    decisions, deadletters = asyncio.run(worker())
    assert [d["step"] for d in decisions] == [0, 0, 0, 1]
    assert decisions[2] == decisions[1]
    assert [d["reason"] for d in deadletters] == ["invalid_control"]

    src = tmp_path / "steps.jsonl"
    src.write_bytes(b"\n".join(topic) + b"\n")
    out, dl = io.BytesIO(), io.BytesIO()
    with open(src, "rb") as fh:
        counts = replay_file(
            fh,
            out,
            dl,
            sem=sem,
            retriever=Retriever(GatedStore()),
            max_runs_per_org=0,
            partitions=PARTITIONS,
            control_key="k",
        )
    assert counts == (4, 1)
    strip = lambda d: {k: v for k, v in d.items() if k != "processed_ts"}  # noqa: E731
    replayed = [strip(orjson.loads(x)) for x in out.getvalue().splitlines()]
    assert replayed == [strip(d) for d in decisions]
    dead = [orjson.loads(x) for x in dl.getvalue().splitlines()]
    assert [(d["reason"], d["detail"]) for d in dead] == [(d["reason"], d["detail"]) for d in deadletters]


def test_replay_applies_a_signed_eviction_exactly_when_the_worker_does(sem):
    """The rule reads no clock: a signed request for the run's exact state applies in both
    (even a run re-created byte for byte), a moved-on run is kept in both."""
    import asyncio

    from streams.etraces.retrieval import Retriever
    from tests.unit.worker.harness import PARTITIONS, GatedStore, rig

    topic: list[bytes] = []

    async def worker() -> tuple[bool, bool]:
        r = rig(sem, GatedStore(), idle_s=60.0)

        async def feed(value: bytes, key: bytes) -> None:
            topic.append(value)
            await r.feed(value, key=key)
            await r.drain()

        for run in ("x", "y"):
            await feed(b(run_start(run)), run.encode())
        r.now[0] += 61
        assert await r.retention.sweep(r.now[0]) == 2
        asked = {k: v for k, v, _ in r.steps_sent}
        await feed(asked[b"x"], b"x")
        await feed(b(run_start("x")), b"x")  # the same run_start again: the same run, for all we know
        await feed(asked[b"x"], b"x")  # so the replayed request applies again, in both
        await feed(b(step("y", 1)), b"y")  # y moved on: its request is stale
        await feed(asked[b"y"], b"y")
        return r.runs.lookup("x") is None, r.runs.lookup("y") is None

    assert asyncio.run(worker()) == (True, False)
    rp = Replayer(
        sem=sem, retriever=Retriever(GatedStore()), max_runs_per_org=0, partitions=PARTITIONS, control_key="k"
    )
    assert all(dl is None for _, dl in rp.run(topic))
    assert "x" not in rp.states and "y" in rp.states


def test_replay_dead_letters_a_run_start_with_misspelt_fields_as_the_worker_does():
    """Issue 40: `modle_routing`, `escalaton`, `task_profle` gave "2 decisions, 0 dead-letters"."""
    evs = [run_start("a", modle_routing={"FAST": "small"}, escalaton={"stop_after": 2}, task_profle="qa")]
    evs += [step("a", 1), run_finish("a")]
    out, dls = io.BytesIO(), io.BytesIO()
    n_dec, n_dl = replay_file(io.BytesIO(b"\n".join(b(e) for e in evs)), out, dls, sem=semantics())
    first = orjson.loads(dls.getvalue().splitlines()[0])
    assert n_dec == 0 and n_dl == 3
    assert first["reason"] == "invalid_run_start"
    assert first["detail"] == "unknown field 'modle_routing'; did you mean 'model_routing'?"


def test_replay_outcomes_writes_one_record_per_run_as_the_worker_sends_it(tmp_path):
    from jsonschema import Draft202012Validator

    from streams.shared.contract import load_schema

    evs = [*events(), run_finish("b", "failure: Boom"), run_start("c"), step("c", 1)]  # b's finish twice
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(b(e) for e in evs) + b"\n")
    out, oc = tmp_path / "out.jsonl", tmp_path / "outcomes.jsonl"
    assert main(["replay", str(src), "-o", str(out), "--outcomes", str(oc)]) == 0
    lines = oc.read_bytes().splitlines()
    recs = [orjson.loads(x) for x in lines]
    check = Draft202012Validator(load_schema("outcome"))
    for r in recs:
        check.validate(r)
    assert [(r["run_id"], r["outcome"], r["ended_by"]) for r in recs] == [
        ("a", "success", "run_finish"),
        ("b", "failure: Boom", "run_finish"),
        ("b", "failure: Boom", "run_finish"),  # the copy re-sends the same record
        ("c", "abandoned", "evicted"),  # left unfinished: what its idle eviction sends
    ]
    assert lines[1] == lines[2]
    assert recs[0]["steps"] == 8 and recs[0]["model_calls"] and recs[3]["steps"] == 1
    # sorted keys, so a record is always the same bytes
    assert lines[0] == orjson.dumps(recs[0], option=orjson.OPT_SORT_KEYS)
