"""No event stops a partition: poison events (hypothesis, every field, boundary values) and
injected faults in the worker's own stages, through a real broker and a real worker.

For every event sent: the worker's answer (a decision, a dead-letter record, or nothing for an
idempotent duplicate or a run_finish) is exactly replay's answer; control runs sent in between
are fully answered, in order; the committed offsets reach the end of every partition; SIGTERM
exits in time. A partition held by an event that never finishes turns /ready and the stall
metric, shutdown still completes in time, and the next worker answers the event.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path
from typing import IO, Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from streams.core.events import validator
from streams.local.worker_process import WorkerProcess
from streams.replay import Replayer
from streams.settings import Settings
from tests.factories import run_start, step
from tests.integration import faults
from tests.integration.helpers import make_settings
from tests.models import semantics
from tests.poison import Recipe, Runs, materialize, recipes

pytestmark = pytest.mark.integration

TOKEN = "t0k-poison"
CONTROL_KEY = "control-key-for-tests"
MAX_RUNS_PER_ORG = 8  # 2 per partition with 4: the cap is reached by the fuzz's fresh runs
CONTROL_STEPS = 6
# Decision fields the core decides (E-trace outcomes depend on the store: the worker has an
# empty local one, replay none).
CORE_FIELDS = (
    "run_id",
    "step",
    "fsm_state",
    "previous_state",
    "difficulty",
    "difficulty_source",
    "model",
    "monitors",
    "suppressed",
    "tokens_used",
    "token_budget",
    "budget_used",
    "event_ts",
)
REPRO = [  # issue 20, verbatim: every event keyed "r"
    b'{"type":"run_start","schema_version":1,"run_id":"r"}',
    b'{"type":"step","schema_version":1,"run_id":"r","step":1,"tokens":18446744073709551615}',
    b'{"type":"step","schema_version":1,"run_id":"r","step":2,"tokens":1}',
]


class FaultyWorker(WorkerProcess):
    """`rb-streams worker` with faults installed in its own code (tests/integration/faults.py)."""

    def __init__(self, settings: Settings, log_path: Path, faults_: str) -> None:
        self.settings = settings
        self.log_path = log_path
        env = dict(os.environ)
        env.update({Settings.env_name(k): str(v) for k, v in settings.as_dict().items()})
        env["RB_TEST_FAULTS"] = faults_
        plugins = faults.plugin_dir(log_path.parent / f"{log_path.stem}-plugins")  # the fault transition
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(plugins), env.get("PYTHONPATH")) if p)
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 (lives as long as the worker)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.faults"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @classmethod
    def launch(cls, settings: Settings, log_path: Path, faults_: str) -> FaultyWorker:
        w = cls(settings, log_path, faults_)
        try:
            asyncio.run(w.wait_ready(120))
        except BaseException:
            w.stop()
            raise
        return w

    def sigterm(self, timeout_s: float) -> float:
        """SIGTERM; seconds until the process exited (fails past timeout_s)."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout_s)
        self._log.close()
        return time.monotonic() - t0


def http(w: WorkerProcess, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(f"http://127.0.0.1:{w.settings.web_port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def raw_http_status(w: WorkerProcess, request: bytes) -> int:
    """The status of a hand-written request (header bytes urllib would refuse to send)."""
    with socket.create_connection(("127.0.0.1", w.settings.web_port), timeout=10) as sock:
        sock.sendall(request)
        first = sock.recv(4096).split(b"\r\n", 1)[0]
    return int(first.split()[1])


async def send_all(s: Settings, events: list[tuple[bytes | None, bytes | None]]) -> list[tuple[int, int]]:
    """Produce in order, one at a time; (partition, offset) of each."""
    p = AIOKafkaProducer(bootstrap_servers=s.bootstrap_servers, acks="all")
    await p.start()
    try:
        out = []
        for key, value in events:
            md = await p.send_and_wait(s.steps_topic, value=value, key=key)
            out.append((md.partition, md.offset))
        return out
    finally:
        await p.stop()


async def read_topic(s: Settings, topic: str, done: Any, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """Records of `topic` from the beginning until done(records) holds, then 1.5 s more."""
    c = AIOKafkaConsumer(bootstrap_servers=s.bootstrap_servers, group_id=None, enable_auto_commit=False)
    await c.start()
    try:
        parts = c.partitions_for_topic(topic) or set()
        while not parts:
            await c._client.force_metadata_update()
            parts = c.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in parts]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        out: list[dict[str, Any]] = []
        deadline, grace = time.monotonic() + timeout_s, None
        while time.monotonic() < (grace or deadline):
            for recs in (await c.getmany(timeout_ms=200)).values():
                out += [
                    {"_partition": r.partition, "_offset": r.offset, **orjson.loads(r.value)} for r in recs
                ]
            if grace is None and done(out):
                grace = time.monotonic() + 1.5
        return out
    finally:
        await c.stop()


async def committed_and_end(s: Settings) -> tuple[dict[int, int], dict[int, int]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=s.bootstrap_servers)
    await admin.start()
    c = AIOKafkaConsumer(bootstrap_servers=s.bootstrap_servers, group_id=None)
    await c.start()
    try:
        got = await admin.list_consumer_group_offsets(s.app_id)
        committed = {tp.partition: m.offset for tp, m in got.items() if tp.topic == s.steps_topic}
        tps = [TopicPartition(s.steps_topic, p) for p in range(s.partitions)]
        end = {tp.partition: off for tp, off in (await c.end_offsets(tps)).items()}
        return committed, end
    finally:
        await c.stop()
        await admin.close()


def same(got: dict[Any, Any], want: dict[Any, Any], what: str) -> None:
    """Equal mappings, or a short account of the first differences."""
    if got == want:
        return
    keys = sorted(set(got) | set(want), key=repr)
    diff = [(k, got.get(k, "-"), want.get(k, "-")) for k in keys if got.get(k, "-") != want.get(k, "-")]
    lines = "\n".join(f"  {k}: worker {g!r:.200} / replay {w!r:.200}" for k, g, w in diff[:10])
    pytest.fail(f"{what}: {len(diff)} differ (worker / replay):\n{lines}", pytrace=False)


def detail(r: dict[str, Any]) -> str:
    """A dead-letter's detail; of an internal error, the stage and exception type (where the
    recursion limit strikes words RecursionError's message differently per call stack)."""
    if r["reason"] == "internal_error":
        return ":".join(r["detail"].split(":")[:2])
    return str(r["detail"])


def k_(d: dict[str, Any]) -> tuple[str, int]:
    return d["run_id"], d["step"]


def core(d: dict[str, Any]) -> dict[str, Any]:
    return {
        **{k: d[k] for k in CORE_FIELDS},
        "monitor_injections": [i for i in d["injections"] if i["source"] == "monitor"],
    }


async def read_steps(s: Settings, fed: dict[int, int]) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """Records of the steps topic not read yet (per partition past `fed`), in offset order."""
    c = AIOKafkaConsumer(bootstrap_servers=s.bootstrap_servers, group_id=None, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(s.steps_topic, p) for p in range(s.partitions)]
        c.assign(tps)
        end = await c.end_offsets(tps)
        out = []
        for tp in tps:
            c.seek(tp, fed.get(tp.partition, 0))
        while [tp for tp in tps if await c.position(tp) < end[tp]]:
            for recs in (await c.getmany(timeout_ms=500)).values():
                out += [(r.partition, r.offset, r.key, r.value) for r in recs]
        for tp in tps:
            fed[tp.partition] = end[tp]
        return sorted(out, key=lambda r: (r[0], r[1]))
    finally:
        await c.stop()


@pytest.fixture(scope="module")
def poisoned(broker: str, tmp_path_factory: pytest.TempPathFactory):
    """A worker with the send fault, a token, a control key and a small per-org run cap, and a
    Replayer with the same settings that is fed the steps topic as the worker reads it."""
    tmp = tmp_path_factory.mktemp("poison")
    s = make_settings(
        broker, tmp, web_token=TOKEN, control_key=CONTROL_KEY, max_runs_per_org=MAX_RUNS_PER_ORG
    )
    w = FaultyWorker.launch(s, tmp / "worker.log", "send")
    state: dict[str, Any] = {
        "worker": w,
        # What the worker should have answered: the steps topic replayed (probes included).
        "verify": Replayer(
            policy=faults.POLICY,
            sem=semantics(),
            max_runs_per_org=MAX_RUNS_PER_ORG,
            partitions=s.partitions,
            control_key=CONTROL_KEY,
        ),
        "fed": {},
        "want_dl": {},  # (partition, offset) -> dead-letter record
        "want_dec": {},  # (run_id, step) -> decision
        "send_faults": set(),  # (run_id, step) whose decision the worker fails to send
        # Only to pick step numbers while planning (never compared with the worker).
        "plan": Replayer(
            policy=faults.POLICY,
            sem=semantics(),
            max_runs_per_org=MAX_RUNS_PER_ORG,
            partitions=s.partitions,
            control_key=CONTROL_KEY,
        ),
        "examples": 0,
    }
    yield state
    if w.proc.poll() is None:
        w.stop()


Event = tuple[str, bytes | None, bytes | None]


def plan_example(ex: int, corpus: list[Recipe], rp: Replayer) -> list[Event]:
    """The events of one example, in send order: live runs started, then the recipes with a
    control run's events and the fault runs' events spread among them."""
    prefix = f"x{ex}"
    live = [f"{prefix}-live{i}" for i in range(4)]
    control = f"{prefix}-control"
    runs = Runs(prefix, live, [control])
    fault, sendfail = f"{prefix}-fault", f"{faults.SEND_FAIL_PREFIX}{prefix}"

    def ev(d: dict[str, Any]) -> Event:
        return d["run_id"], d["run_id"].encode(), orjson.dumps({"schema_version": 1, **d})

    def start(rid: str, **kw: Any) -> Event:
        return ev({"type": "run_start", "run_id": rid, **kw})

    def step(rid: str, k: int, **kw: Any) -> Event:
        return ev(
            {"type": "step", "run_id": rid, "step": k, "thought": f"step {k} of {rid}", "tokens": 5, **kw}
        )

    fixed: list[Event] = [
        start(control, org_id=f"control-{ex}"),
        *[step(control, k) for k in range(1, CONTROL_STEPS + 1)],
        start(
            fault,
            org_id=f"faults-{ex}",
            fsm_transition=faults.FAULT_TRANSITION,
            scorer=faults.FAULT_TRANSITION,
            e_traces_enabled=False,
        ),
        step(fault, 1),
        step(fault, 2, difficulty=faults.FAIL_EVALUATE),  # internal_error at evaluate
        step(fault, 3),  # answered: step 2's number was used up
        step(fault, 4, difficulty=faults.FAIL_ENCODE),  # internal_error at encode
        step(fault, 5),
        start(sendfail, org_id=f"faults-{ex}", e_traces_enabled=False),
        step(sendfail, 1),  # its decision fails to send: internal_error at send
        step(sendfail, 2),  # answered as replay answers it: the state moved on
    ]
    if ex == 0:
        fixed[:0] = [("r", b"r", line) for line in REPRO]
    events: list[Event] = []

    def add(item: Event) -> None:
        events.append(item)
        rp.feed(item[2], key=item[1])

    for rid in live:
        add(start(rid, org_id=f"live-{ex}"))
    pending = list(corpus)
    every = max(1, len(pending) // (len(fixed) + 1))
    while pending or fixed:
        for _ in range(every):
            if not pending:
                break
            for rid in live:  # recipes asking for "the next step" get the live run's next one
                st_ = rp.states.get(rid)
                runs.next_step[rid] = st_.last_step + 1 if st_ else 1
            add(materialize(pending.pop(0), runs))
        if fixed:
            add(fixed.pop(0))
    return events


@settings(
    max_examples=4,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(corpus=st.lists(recipes(4), min_size=30, max_size=70))
def test_poison_events_get_replays_answer_and_control_runs_are_answered_in_order(poisoned, corpus):
    w, st_ = poisoned["worker"], poisoned
    s = w.settings
    ex = st_["examples"]
    st_["examples"] += 1
    events = plan_example(ex, corpus, st_["plan"])
    asyncio.run(send_all(s, [(k, v) for _, k, v in events]))
    st_["send_faults"].add((f"{faults.SEND_FAIL_PREFIX}x{ex}", 1))

    # What the worker should answer: the replay of everything on the steps topic so far.
    verify: Replayer = st_["verify"]
    for part, off, key, value in asyncio.run(read_steps(s, st_["fed"])):
        decision, dl = verify.feed(value, key=key)
        if dl is not None:
            st_["want_dl"][(part, off)] = dl
        if decision is not None:
            st_["want_dec"][(decision["run_id"], decision["step"])] = decision
    want_dl, send_faults = st_["want_dl"], st_["send_faults"]
    want_dec = {k: d for k, d in st_["want_dec"].items() if k not in send_faults}

    dead = asyncio.run(
        read_topic(s, s.deadletter_topic, lambda recs: len(recs) >= len(want_dl) + len(send_faults))
    )
    got_dl: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for r in dead:
        got_dl[(r["source"]["partition"], r["source"]["offset"])].append(r)
    assert all(len(v) == 1 for v in got_dl.values()), "an event was dead-lettered twice"
    # The send fault: dead-lettered by the worker where replay has the decision.
    send_dl = {p: v[0] for p, v in got_dl.items() if v[0]["detail"].startswith("send: ")}
    assert {(r["run_id"], r["step"]) for r in send_dl.values()} == send_faults
    assert {r["detail"] for r in send_dl.values()} == {"send: RuntimeError: injected producer failure"}
    got = {p: v[0] for p, v in got_dl.items() if p not in send_dl}
    same({p: detail(r) for p, r in got.items()}, {p: detail(d) for p, d in want_dl.items()}, "dead-letters")
    for r in got.values():
        validator("deadletter").validate({k: v for k, v in r.items() if not k.startswith("_")})

    decisions = asyncio.run(read_topic(s, s.steering_topic, lambda recs: len(recs) >= len(want_dec)))
    counts = Counter((d["run_id"], d["step"]) for d in decisions)
    # A re-sent copy of a run's last step (or run_start) gets the decision the state holds
    # again, as replay does (RELIABILITY #1-2): every copy of a (run, step) byte for byte the same.
    copies: dict[tuple[str, int], set[bytes]] = defaultdict(set)
    for d in decisions:
        copies[k_(d)].add(orjson.dumps({k: v for k, v in d.items() if not k.startswith("_")}))
    assert all(len(c) == 1 for c in copies.values()), "a step was answered twice, differently"
    same(dict.fromkeys(counts, 1), dict.fromkeys(want_dec, 1), "decisions (run, step)")
    for d in decisions:
        clean = {k: v for k, v in d.items() if not k.startswith("_")}
        validator("decision").validate(clean)
    same(
        {k: core(d) for k, d in ((k_(d), d) for d in decisions)},
        {k: core(d) for k, d in want_dec.items()},
        "decisions",
    )
    # The control run: every step answered, in order on its partition.
    ctl = sorted((d for d in decisions if d["run_id"] == f"x{ex}-control"), key=lambda d: d["_offset"])
    assert [d["step"] for d in ctl] == list(range(CONTROL_STEPS + 1))
    # The fault runs: each failure dead-lettered with its stage, the next step answered.
    faulted = {r["step"]: r["detail"] for r in got.values() if r["run_id"] == f"x{ex}-fault"}
    assert faulted[2] == "evaluate: RuntimeError: injected fault in the state machine"
    assert faulted[4].startswith("encode: TypeError: Integer exceeds 64-bit range")
    assert {k[1] for k in counts if k[0] == f"x{ex}-fault"} == {0, 1, 3, 5}
    assert {k[1] for k in counts if k[0] == f"{faults.SEND_FAIL_PREFIX}x{ex}"} == {0, 2}
    # The three lines: decision 0, step 1 refused for its token count, step 2 out of
    # order (step 1 never happened): nothing wedged, nothing unanswered.
    if ex == 0:
        assert {k[1] for k in counts if k[0] == "r"} == {0}
        r_dl = sorted((r for r in got.values() if r["run_id"] == "r"), key=lambda r: r["step"])
        assert [(r["reason"], r["step"]) for r in r_dl] == [("schema_violation", 1), ("out_of_order", 2)]
        assert "tokens" in r_dl[0]["detail"] and "9007199254740992" in r_dl[0]["detail"]
    assert w.proc.poll() is None, "the worker died"


def test_http_never_500s_on_header_bytes_and_takes_bearer_in_any_case(poisoned):
    w = poisoned["worker"]
    assert http(w, "/metrics")[0] == 401
    assert http(w, "/metrics", {"Authorization": f"bearer {TOKEN}"})[0] == 200
    assert http(w, "/metrics", {"Authorization": f"BEARER {TOKEN}"})[0] == 200
    for junk in (
        b"Bearer \xff\xfe\xe9",
        b"Bearer \xed\xa0\x80",
        b"\xc3\xa9\xff",
        b"Bearer " + TOKEN.encode() + b"\xff",
    ):
        req = b"GET /metrics HTTP/1.1\r\nHost: w\r\nAuthorization: " + junk + b"\r\nConnection: close\r\n\r\n"
        assert raw_http_status(w, req) in (400, 401), junk  # refused, never a 500
    assert http(w, "/ready") == (200, b'{"ready":true}')


def test_every_partition_commits_to_its_end_and_sigterm_exits_in_time(poisoned):
    w = poisoned["worker"]
    s = w.settings
    deadline = time.monotonic() + 30
    while True:
        committed, end = asyncio.run(committed_and_end(s))
        if all(committed.get(p) == end[p] for p in end) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert committed == end, (committed, end)
    status, body = http(w, "/metrics", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200
    text = body.decode()
    assert (
        'rb_internal_errors_total{stage="evaluate"}' in text
        and 'rb_internal_errors_total{stage="send"}' in text
    )
    assert "rb_partition_stall_seconds" in text
    took = w.sigterm(timeout_s=s.session_timeout_s + 10)
    assert took < s.session_timeout_s + 5, took
    log = w.log_path.read_text(errors="replace")
    assert "graceful shutdown not done" not in log
    assert "Traceback" in log  # the injected faults' tracebacks (once per stage) ...
    assert log.count("Traceback") <= 6  # ... evaluate, encode, send, once a minute: not one per event


def test_a_partition_held_by_an_event_that_never_finishes_is_seen_and_shutdown_still_completes(
    broker, tmp_path
):
    s = make_settings(broker, tmp_path, stall_threshold_s=2.0)
    w = FaultyWorker.launch(s, tmp_path / "hung.log", "hang")
    try:
        hung = "hang-1"
        part = None
        events = [(hung.encode(), orjson.dumps({"type": "run_start", "schema_version": 1, "run_id": hung}))]
        # Runs on the same partition as the hung event: answered, but their acks wait behind it.
        from streams.kafka.wire import partition_for

        part = partition_for(hung, s.partitions)
        neighbours = [r for r in (f"nb-{i}" for i in range(200)) if partition_for(r, s.partitions) == part][
            :3
        ]
        events += [
            (r.encode(), orjson.dumps({"type": "run_start", "schema_version": 1, "run_id": r}))
            for r in neighbours
        ]
        asyncio.run(send_all(s, events))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status, body = http(w, "/ready")
            if status == 503:
                break
            time.sleep(0.5)
        assert status == 503, body
        ready = orjson.loads(body)
        assert ready["ready"] is False and float(ready["stalled_partitions"][str(part)]) >= 2.0
        metrics = http(w, "/metrics")[1].decode()
        line = next(
            x
            for x in metrics.splitlines()
            if x.startswith(f'rb_partition_stall_seconds{{partition="{part}"}}')
        )
        assert float(line.split()[-1]) >= 1.0
        took = w.sigterm(timeout_s=s.session_timeout_s + 15)
        assert took < s.session_timeout_s + 8, took  # the shutdown deadline: session timeout + 5 s
        assert "graceful shutdown not done" in w.log_path.read_text(errors="replace")
    finally:
        if w.proc.poll() is None:
            w.stop()
    # Nothing was committed past the hung event: the next worker answers it.
    w2 = FaultyWorker.launch(s, tmp_path / "next.log", "")
    try:
        decisions = asyncio.run(
            read_topic(s, s.steering_topic, lambda recs: any(r["run_id"] == hung for r in recs))
        )
        assert [d["step"] for d in decisions if d["run_id"] == hung] == [0]
        assert {d["run_id"] for d in decisions} >= {hung, *neighbours}
    finally:
        w2.stop()


def test_an_idle_worker_whose_last_evaluation_was_a_held_runs_event_neither_stalls_nor_exits(
    broker, tmp_path
):
    """A run's step queued behind its run_start's slow E-trace answer is evaluated after the
    later offsets of another run on its partition. Everything answered, the worker then idles
    past its stall threshold and its exit delay: it stays ready, reports no stall and lives."""
    s = make_settings(broker, tmp_path, stall_threshold_s=2.0, stall_exit_s=5.0, partitions=1)
    w = FaultyWorker.launch(s, tmp_path / "slow.log", "slowetrace")
    try:
        slow, fast = f"{faults.SLOW_PREFIX}1", "fast-1"

        def ev(run: str, k: int) -> tuple[bytes, bytes]:
            return run.encode(), orjson.dumps(run_start(run) if k == 0 else step(run, k))

        # after the readiness probe's run: the held run, then another run decided while it waits
        asyncio.run(send_all(s, [ev(slow, 0), ev(slow, 1), ev(fast, 0), ev(fast, 1)]))
        want = {(slow, 0), (slow, 1), (fast, 0), (fast, 1)}
        decisions = asyncio.run(
            read_topic(s, s.steering_topic, lambda recs: want <= {(r["run_id"], r["step"]) for r in recs})
        )
        assert want <= {(d["run_id"], d["step"]) for d in decisions}
        idle_until = time.monotonic() + s.stall_exit_s + 3.0  # past the threshold and the exit delay
        while time.monotonic() < idle_until:
            assert w.proc.poll() is None, w.log_path.read_text(errors="replace")[-2000:]
            status, body = http(w, "/ready")
            assert status == 200, body
            time.sleep(0.5)
        metrics = http(w, "/metrics")[1].decode()
        stall = [x for x in metrics.splitlines() if x.startswith("rb_progress_stall_seconds{")]
        assert stall and all(float(x.split()[-1]) == 0.0 for x in stall), stall
        lag = [x for x in metrics.splitlines() if x.startswith("rb_consumer_lag_messages{")]
        assert lag and all(float(x.split()[-1]) == 0.0 for x in lag), lag
    finally:
        w.stop()
