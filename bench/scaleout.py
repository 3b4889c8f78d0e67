"""Scale-out on this machine: 1, 2 and 3 worker processes share 6 partitions and drain one
fleet; then one of 2 or 3 workers is killed (SIGKILL) mid-drain.

    RB_BENCH_KAFKA_PORT=19192 RB_BENCH_KAFKA_DIR=/tmp/scaleout-kafka \\
        .venv/bin/python -m bench.scaleout --runs 200 --steps 30 --repeat 3 --freeze 10 \\
        --quix-python /path/to/venv-with-quixstreams/bin/python --json bench/results/scaleout.json

One app (consumer group, own topics) per worker count, all started side by side and kept
warm; each round drains the same fleet (bench.throughput's synthetic coding agents, monitors
and E-traces on, new run ids each round) through each app in turn, with the workers ready
and the partitions split before the load generator (a thread of this process) writes it.
Throughput = distinct decisions / (last - first decision timestamp). Per worker: the valid
events it processed (rb_steps_processed) and its CPU seconds (with its embedding child);
beside them the broker's, the load generator's and the whole machine's busy cores, the
load average and CPU steal. Every round counts decisions per (run, step): each valid event
must have one, and a re-sent copy must be byte-identical to the first (or, computed again
from the same state, differ in `processed_ts` only).

Kill test (after the rounds): a fleet drains through the 3-worker app, then the 2-worker
app; at a third of the decisions the worker owning the most partitions is killed. The
survivors must take its partitions and answer every step; the figure is the longest pause
in decisions on the victim's partitions (session timeout + changelog recovery). With
`--freeze S`, first one of the 3 workers is stopped (SIGSTOP) S seconds, past the session
timeout, then resumed: a worker that sees the rebalance late. Partitions two workers claim at
once are recorded, and its decisions counted like the others' (reported, not failed: see
BENCHMARKS.md, Scale-out).

Pass-through references on one backlog of the fleet: bench.passthrough (Faust, with a table
write) and bench.quix_passthrough (quix-streams, without and with a state write), run by
`--quix-python` (an interpreter where quixstreams is installed; skipped without it).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from bench.common import (
    STARTER,
    CpuSampler,
    bench_settings,
    broker_pid,
    commit,
    ensure_broker,
    log,
    machine,
    results_dir,
    scrape,
    spread,
    stop_broker,
)
from bench.throughput import drain_timing, passthrough, preload
from streams.local.broker import REPO
from streams.local.worker_process import WorkerProcess, free_port
from streams.settings import Settings

Key = tuple[str, int]


WALL_CLOCK = ("processed_ts",)  # when the worker decided: a decision computed again differs here


def same_but_wall_clock(a: bytes, b: bytes) -> bool:
    """Two decision records equal but for when they were computed."""
    da, db = orjson.loads(a), orjson.loads(b)
    for k in WALL_CLOCK:
        da.pop(k, None)
        db.pop(k, None)
    return bool(da == db)


@dataclass
class Tally:
    """Decisions per (run, step): the first copy's bytes and the copies seen. A re-sent copy is
    byte-identical to the first (re-sent from the stored state), restamped (the same decision
    computed again from the same state: only `processed_ts` differs) or differing."""

    first: dict[Key, bytes] = field(default_factory=dict)
    copies: Counter[Key] = field(default_factory=Counter)
    identical: int = 0
    restamped: set[Key] = field(default_factory=set)
    differing: set[Key] = field(default_factory=set)

    def add(self, key: Key, value: bytes) -> bool:
        """Count one decision; True if it is the first of its (run, step)."""
        self.copies[key] += 1
        was = self.first.setdefault(key, value)
        if was is value:
            return True
        if was == value:
            self.identical += 1
        elif same_but_wall_clock(was, value):
            self.restamped.add(key)
        else:
            self.differing.add(key)
        return False

    def check(self, expected: Iterable[Key]) -> dict[str, Any]:
        """Missing (expected without a decision), unexpected (decided, not expected),
        duplicates (copies past the first: byte-identical, restamped or differing; keys for
        the last two), with a few examples."""
        want = set(expected)
        missing = sorted(want - self.first.keys())
        unexpected = sorted(self.first.keys() - want)
        return {
            "expected": len(want),
            "decided": len(want & self.first.keys()),
            "missing": len(missing),
            "missing_examples": missing[:10],
            "unexpected": len(unexpected),
            "duplicates": sum(self.copies.values()) - len(self.copies),
            "identical": self.identical,
            "restamped": len(self.restamped),
            "differing": len(self.differing),
            "differing_examples": sorted(self.differing)[:10],
        }


def longest_gap(stamps: Iterable[float]) -> float:
    """The longest pause between consecutive timestamps (0 for fewer than two)."""
    s = sorted(stamps)
    return max((b - a for a, b in itertools.pairwise(s)), default=0.0)


def expected_keys(prefix: str, runs: int, steps: int) -> set[Key]:
    """Every valid event of a preloaded fleet yields a decision: run_start (step 0), steps 1..N."""
    return {(f"{prefix}-{i}", k) for i in range(runs) for k in range(steps + 1)}


def _cpu_stat() -> tuple[int, int]:
    """(all ticks, steal ticks) of the machine since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v), v[7]


# ---------------------------------------------------------------- workers


def _metric_sum(page: dict[str, float], name: str) -> float:
    return sum(v for k, v in page.items() if k.startswith(name + "{"))


def processed(w: WorkerProcess) -> float:
    """Valid events this worker has processed (every type)."""
    return _metric_sum(scrape(w.settings.web_port), "rb_steps_processed_total")


def stalled(w: WorkerProcess) -> float:
    """rb_progress_stall_seconds: how long an owned partition has had events waiting and none
    evaluated (0 when none)."""
    return max(
        [v for k, v in scrape(w.settings.web_port).items() if k.startswith("rb_progress_stall_seconds")]
        or [0.0]
    )


def owned(w: WorkerProcess) -> list[int]:
    """The steps partitions this worker owns (each owned partition has a stall gauge)."""
    page = scrape(w.settings.web_port)
    pre = 'rb_partition_stall_seconds{partition="'
    return sorted(int(k[len(pre) :].split('"')[0]) for k in page if k.startswith(pre))


@dataclass
class Group:
    """n replicas of one app: same app id, topics and key; own data dirs and web ports."""

    n: int
    base: Settings
    workers: list[WorkerProcess] = field(default_factory=list)

    @classmethod
    def specs(cls, n: int, partitions: int) -> tuple[Group, list[tuple[Settings, Path]]]:
        base = bench_settings(
            partitions=partitions, patterns_seed=str(STARTER), topic_prefix=f"so{n}{uuid.uuid4().hex[:6]}"
        )
        specs = [
            (
                base.with_(data_dir=str(base.data_path / f"w{i}"), web_port=free_port()),
                results_dir() / f"scaleout-{n}w-{i}.log",
            )
            for i in range(n)
        ]
        return cls(n, base), specs

    def wait_split(self, timeout_s: float = 180.0) -> list[int]:
        """Until every live worker owns partitions and together they own all of them."""
        deadline = time.monotonic() + timeout_s
        got: list[int] = []
        while time.monotonic() < deadline:
            try:
                got = [len(owned(w)) for w in self.workers]
            except OSError:
                got = []
            if got and sum(got) == self.base.partitions and all(got):
                return got
            time.sleep(0.5)
        raise TimeoutError(f"{self.n} workers never split {self.base.partitions} partitions: {got}")

    def stop(self) -> None:
        for w in self.workers:
            w.stop()


def start_groups(counts: Iterable[int], partitions: int) -> list[Group]:
    """Every app's workers launched at once (they load their models side by side)."""
    groups, specs, sizes = [], [], []
    for n in counts:
        g, sp = Group.specs(n, partitions)
        groups.append(g)
        specs += sp
        sizes.append(n)
    log(f"starting {len(specs)} workers ({' + '.join(map(str, sizes))}) ...")
    t0 = time.monotonic()
    # start_all gives one key to any without; bench_settings gave each app its own already
    workers = WorkerProcess.start_all(specs, timeout_s=300)
    i = 0
    for g in groups:
        g.workers, i = workers[i : i + g.n], i + g.n
    for g in groups:
        log(f"  {g.n} worker(s): partitions split {g.wait_split()}")
    log(f"  ready in {time.monotonic() - t0:.0f}s")
    return groups


# ---------------------------------------------------------------- one drain


async def collect(
    bootstrap: str,
    topic: str,
    prefix: str,
    expected: set[Key],
    ready: asyncio.Event,
    timeout_s: float,
    on_progress: Callable[[int], None] | None = None,
    grace_s: float = 2.0,
    hold: Callable[[], bool] = lambda: False,
) -> tuple[Tally, dict[int, list[float]]]:
    """Read `topic` from its end at the call (then set `ready`) until every expected (run,
    step) of runs `prefix-*` has a decision, plus `grace_s` for late re-sends, or `timeout_s`.
    `hold`: read on while it says so. Returns the tally and, per partition, the timestamps of
    first copies (seconds)."""
    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, isolation_level="read_committed"
    )
    await c.start()
    tally = Tally()
    stamps: dict[int, list[float]] = {}
    mark = prefix + "-"
    try:
        parts = c.partitions_for_topic(topic)
        while not parts:
            await c._client.force_metadata_update()
            parts = c.partitions_for_topic(topic)
        tps = [TopicPartition(topic, p) for p in parts]
        c.assign(tps)
        for tp, off in (await c.end_offsets(tps)).items():
            c.seek(tp, off)
        ready.set()
        deadline = time.monotonic() + timeout_s
        done_at: float | None = None
        next_log = time.monotonic() + 10
        while time.monotonic() < deadline and (
            done_at is None or time.monotonic() < done_at + grace_s or hold()
        ):
            batch = await c.getmany(timeout_ms=300, max_records=10_000)
            for tp, recs in batch.items():
                for r in recs:
                    d = orjson.loads(r.value)
                    rid = d.get("run_id", "")
                    if not rid.startswith(mark):
                        continue
                    if tally.add((rid, int(d.get("step", -1))), r.value):
                        stamps.setdefault(tp.partition, []).append(r.timestamp / 1000.0)
            n = len(tally.first)
            if on_progress is not None:
                on_progress(n)
            if done_at is None and expected <= tally.first.keys():
                done_at = time.monotonic()
            if time.monotonic() > next_log:
                log(f"    {n}/{len(expected)} decided")
                next_log = time.monotonic() + 10
        return tally, stamps
    finally:
        await c.stop()


@dataclass
class Kill:
    """SIGKILL the worker owning the most partitions once `fraction` of the decisions are in;
    with `freeze_s`, SIGSTOP it instead and SIGCONT it that long after (past the session
    timeout: a worker that sees the rebalance late, and comes back)."""

    fraction: float
    freeze_s: float = 0.0
    victim: int = -1
    partitions: list[int] = field(default_factory=list)
    events: float = 0.0
    at: float = 0.0
    resumed: float = 0.0  # when the frozen worker was resumed
    # (seconds after the kill, partition, workers owning it) whenever two claim one partition
    overlaps: list[tuple[float, int, list[int]]] = field(default_factory=list)
    _next_look: float = 0.0

    def look(self, workers: list[WorkerProcess]) -> None:
        """Once a second after the kill: which live, running worker owns what (a frozen one
        would not answer); a partition claimed by two is recorded."""
        now = time.monotonic()
        if now < self._next_look:
            return
        self._next_look = now + 1.0
        claims: dict[int, list[int]] = {}
        for i, w in enumerate(workers):
            if i == self.victim and (not self.freeze_s or not self.resumed):
                continue
            try:
                for p in owned(w):
                    claims.setdefault(p, []).append(i)
            except OSError:
                continue
        for p, who in sorted(claims.items()):
            if len(who) > 1:
                self.overlaps.append((round(time.time() - self.at, 1), p, who))


def drain(g: Group, prefix: str, runs: int, steps: int, kill: Kill | None = None) -> dict[str, Any]:
    """One fleet through one app; the figures of the round (see the module's docstring)."""
    s = g.base
    expected = expected_keys(prefix, runs, steps)
    workers = list(g.workers)
    dead = [i for i, w in enumerate(workers) if w.proc.poll() is not None]
    if dead:
        raise RuntimeError(f"{g.n}-worker app: worker(s) {dead} exited:\n{workers[dead[0]].tail(20)}")
    stalls = [stalled(w) for w in workers]  # what the progress watch says while idle
    before = [processed(w) for w in workers]
    brk = broker_pid()
    samplers = [
        CpuSampler(w.proc.pid, every=0.1, broker=brk if i == 0 else None) for i, w in enumerate(workers)
    ]
    load = os.getloadavg()
    stat0 = _cpu_stat()
    gen: dict[str, float] = {}

    def generate() -> None:
        c0, t0 = time.thread_time(), time.perf_counter()
        gen["events"] = asyncio.run(preload(s, runs, steps, prefix=prefix))
        gen["cpu_s"], gen["wall_s"] = time.thread_time() - c0, time.perf_counter() - t0

    def resume(pid: int) -> None:
        assert kill is not None
        os.kill(pid, signal.SIGCONT)
        kill.resumed = time.time()
        log(f"    resumed worker {kill.victim} after {kill.freeze_s:g}s")

    def held() -> bool:
        """A frozen worker: read on until 15 s after it resumed (what it sends then counts)."""
        if kill is None or not kill.freeze_s or kill.victim < 0:
            return False
        return not kill.resumed or time.time() < kill.resumed + 15.0

    def progress(n: int) -> None:
        if kill is None:
            return
        if kill.victim >= 0:
            kill.look(workers)
            return
        if n < kill.fraction * len(expected):
            return
        parts = [owned(w) for w in workers]
        kill.victim = max(range(len(workers)), key=lambda i: len(parts[i]))
        kill.partitions = parts[kill.victim]
        kill.events = processed(workers[kill.victim]) - before[kill.victim]
        kill.at = time.time()
        pid = workers[kill.victim].proc.pid
        if kill.freeze_s:
            os.kill(pid, signal.SIGSTOP)
            asyncio.get_running_loop().call_later(kill.freeze_s, resume, pid)
        else:
            os.kill(pid, signal.SIGKILL)
        what = f"froze for {kill.freeze_s:g}s" if kill.freeze_s else "killed"
        log(f"    {what} worker {kill.victim} (partitions {kill.partitions}) at {n}/{len(expected)}")

    async def both() -> tuple[Tally, dict[int, list[float]]]:
        ready = asyncio.Event()
        reader = asyncio.create_task(
            collect(
                s.bootstrap_servers, s.steering_topic, prefix, expected, ready, 300.0, progress, hold=held
            )
        )
        await ready.wait()
        await asyncio.to_thread(generate)
        return await reader

    tally, stamps = asyncio.run(both())
    stat1 = _cpu_stat()
    for sm in samplers:
        sm.stop()
    time.sleep(1.1)  # /metrics renders at most once a second
    first = min((t for v in stamps.values() for t in v), default=0.0)
    last = max((t for v in stamps.values() for t in v), default=0.0)
    secs = max(1e-9, last - first)
    per_worker = []
    for i, (w, sm) in enumerate(zip(workers, samplers, strict=True)):
        cpu = sm.between(first, last) or {}
        gone = kill is not None and i == kill.victim and not kill.freeze_s
        events = kill.events if gone and kill is not None else processed(w) - before[i]
        per_worker.append(
            {
                "events": events,
                # a killed worker's embedding child goes with it: its sum is not kept
                "cpu_s": float("nan") if gone else cpu.get("cpu_s", float("nan")),
                "loop_cpu_s": float("nan") if gone else cpu.get("main_cpu_s", float("nan")),
                "killed": gone,
                "frozen": kill is not None and i == kill.victim and bool(kill.freeze_s),
            }
        )
    m = samplers[0].between(first, last) or {}
    dt, dsteal = stat1[0] - stat0[0], stat1[1] - stat0[1]
    # the generator's CPU falls almost all inside the window (it writes while the workers drain)
    ours = (
        sum(w["cpu_s"] for w in per_worker if not w["killed"])
        + m.get("broker_cpu_s", 0.0)
        + gen.get("cpu_s", 0.0)
    )
    row: dict[str, Any] = {
        "workers": g.n,
        "prefix": prefix,
        "decisions": len(tally.first),
        "seconds": secs,
        "rate": len(tally.first) / secs,
        "per_worker": per_worker,
        "broker_cpu_s": m.get("broker_cpu_s", float("nan")),
        "machine_busy_cores": m.get("machine_busy_s", float("nan")) / secs,
        "ours_cores": ours / secs,  # workers + broker + generator
        "others_cores": (m.get("machine_busy_s", float("nan")) - ours) / secs,  # other helpers
        "generator": gen,
        "load1": load[0],
        "idle_stall_s": stalls,
        "steal_pct": 100.0 * dsteal / dt if dt else 0.0,
        **tally.check(expected),
    }
    if kill is not None:
        row["kill"] = {
            "victim": kill.victim,
            "partitions": kill.partitions,
            "events_before_kill": kill.events,
            "longest_pause_s": max((longest_gap(stamps.get(p, [])) for p in kill.partitions), default=0.0),
            "pause_elsewhere_s": max(
                (longest_gap(v) for p, v in stamps.items() if p not in kill.partitions), default=0.0
            ),
            "freeze_s": kill.freeze_s,
            "survivors_own": [owned(w) for i, w in enumerate(workers) if i != kill.victim or kill.freeze_s],
            "overlaps": kill.overlaps,
            # what it had answered: its partitions' first copies stamped before the kill
            "decided_before_kill": sum(1 for p in kill.partitions for t in stamps.get(p, []) if t <= kill.at),
        }
        row["kill"]["taken_over"] = sorted(p for o in row["kill"]["survivors_own"] for p in o) == list(
            range(s.partitions)
        )
        if not kill.freeze_s:
            g.workers[kill.victim].stop()
            g.workers = [w for i, w in enumerate(workers) if i != kill.victim]
    return row


def show(row: dict[str, Any]) -> str:
    pw = "; ".join(
        f"w{i}{'(killed)' if w['killed'] else '(frozen)' if w.get('frozen') else ''} {w['events']:.0f} ev "
        f"{w['cpu_s']:.1f} s CPU"
        for i, w in enumerate(row["per_worker"])
    )
    return (
        f"{row['workers']} worker(s): {row['decisions']} in {row['seconds']:.1f}s = {row['rate']:.0f}/s; {pw}; "
        f"broker {row['broker_cpu_s']:.1f} s, generator {row['generator'].get('cpu_s', 0):.1f} s "
        f"({row['generator'].get('wall_s', 0):.1f} s wall); ours {row['ours_cores']:.2f} cores, "
        f"others {row['others_cores']:.2f}; "
        f"load {row['load1']:.1f} steal {row['steal_pct']:.1f}%; missing {row['missing']} "
        f"dup {row['duplicates']} (identical {row['identical']}, restamped keys {row['restamped']}, "
        f"differing keys {row['differing']})"
    )


def idle_cores(groups: list[Group], seconds: float = 3.0) -> dict[str, float]:
    """Cores the broker and all the (idle) workers use while nothing is sent: the floor the
    apps kept warm side by side add to every drain (fetch polls, heartbeats, gauges)."""
    from bench.common import _ticks

    hz = os.sysconf("SC_CLK_TCK")
    brk = broker_pid()
    pids = [w.proc.pid for g in groups for w in g.workers]

    def now() -> tuple[float, float]:
        b = _ticks(f"/proc/{brk}/stat") or 0 if brk else 0
        return float(b), float(sum(_ticks(f"/proc/{p}/stat", reaped=True) or 0 for p in pids))

    b0, w0 = now()
    time.sleep(seconds)
    b1, w1 = now()
    return {"broker": (b1 - b0) / hz / seconds, "workers": (w1 - w0) / hz / seconds, "n_workers": len(pids)}


# ---------------------------------------------------------------- references


async def _create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs)])
    finally:
        await admin.close()


def quix(s: Settings, n: int, partitions: int, python: str, stateful: bool) -> dict[str, Any]:
    """quix-streams consume-produce (with a state write: `stateful`) over the backlog. Its output
    topic stamps records on append (quix-streams copies the input's timestamp)."""
    out = f"{s.topic_prefix}.quix{int(stateful)}.out"
    asyncio.run(
        _create_topic(s.bootstrap_servers, out, partitions, {"message.timestamp.type": "LogAppendTime"})
    )
    log(f"quix-streams pass-through{' with state' if stateful else ''} draining the backlog ...")
    p = subprocess.Popen(
        [
            python,
            "-m",
            "bench.quix_passthrough",
            s.bootstrap_servers,
            s.steps_topic,
            out,
            f"quix{int(stateful)}-{s.topic_prefix}",
            str(s.data_path / f"quix{int(stateful)}"),
            "1" if stateful else "0",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=open(results_dir() / "quix-passthrough.log", "ab"),  # noqa: SIM115
    )
    cpu = CpuSampler(p.pid, broker=broker_pid())
    try:
        cnt, first, last = asyncio.run(drain_timing(s.bootstrap_servers, out, n, 120))
    finally:
        cpu.stop()
        p.terminate()
        p.wait(30)
    got = cpu.between(first, last) or {}
    secs = max(1e-9, last - first)
    row = {
        "n": cnt,
        "seconds": secs,
        "rate": cnt / secs,
        "cpu_us": got.get("cpu_s", float("nan")) / max(1, cnt) * 1e6,
        "broker_cpu_us": got.get("broker_cpu_s", float("nan")) / max(1, cnt) * 1e6,
        "machine_cores": got.get("machine_busy_s", float("nan")) / secs,
    }
    log(f"  quix{' + state' if stateful else ''}: {cnt} in {secs:.2f}s = {row['rate']:.0f}/s")
    return row


def references(runs: int, steps: int, partitions: int, python: str | None) -> dict[str, Any]:
    s = bench_settings(partitions=partitions)
    n = asyncio.run(preload(s, runs, steps, prefix="pt"))
    rows: dict[str, Any] = {"load1": os.getloadavg()[0]}
    rows["faust"] = passthrough(s, n, partitions)
    if python:
        rows["quix"] = quix(s, n, partitions, python, stateful=False)
        rows["quix_state"] = quix(s, n, partitions, python, stateful=True)
    return rows


# ---------------------------------------------------------------- main


def summarise(rounds: list[dict[int, dict[str, Any]]], refs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians (min-max) per worker count: rate, ratio to 1 worker within the round, busy
    cores, CPU seconds per 1,000 events of workers, broker and generator; references."""
    fig: dict[str, Any] = {}
    counts = sorted(rounds[0])
    for n in counts:
        rows = [r[n] for r in rounds]
        fig[f"{n}w events/s"] = spread([r["rate"] for r in rows])
        fig[f"{n}w / 1w"] = spread([r[n]["rate"] / r[counts[0]]["rate"] for r in rounds])
        fig[f"{n}w busy cores"] = spread([r["machine_busy_cores"] for r in rows])
        fig[f"{n}w our cores (workers + broker + generator)"] = spread([r["ours_cores"] for r in rows])
        fig[f"{n}w other helpers' cores"] = spread([r["others_cores"] for r in rows])
        fig[f"{n}w load"] = spread([r["load1"] for r in rows])
        fig[f"{n}w steal %"] = spread([r["steal_pct"] for r in rows])
        fig[f"{n}w worker CPU cores"] = spread(
            [sum(w["cpu_s"] for w in r["per_worker"]) / r["seconds"] for r in rows]
        )
        fig[f"{n}w broker CPU cores"] = spread([r["broker_cpu_s"] / r["seconds"] for r in rows])
        fig[f"{n}w worker CPU us/event"] = spread(
            [sum(w["cpu_s"] for w in r["per_worker"]) / r["decisions"] * 1e6 for r in rows]
        )
        fig[f"{n}w broker CPU us/event"] = spread([r["broker_cpu_s"] / r["decisions"] * 1e6 for r in rows])
        fig[f"{n}w generator CPU us/event"] = spread(
            [r["generator"]["cpu_s"] / r["decisions"] * 1e6 for r in rows]
        )
        fig[f"{n}w event share of busiest worker"] = spread(
            [
                max(w["events"] for w in r["per_worker"]) / sum(w["events"] for w in r["per_worker"])
                for r in rows
            ]
        )
        fig[f"{n}w missing"] = sum(r["missing"] for r in rows)
        fig[f"{n}w differing"] = sum(r["differing"] for r in rows)
    for k in ("faust", "quix", "quix_state"):
        if refs and k in refs[0]:
            fig[f"{k} pass-through events/s"] = spread([r[k]["rate"] for r in refs])
            if k != "faust":
                fig[f"{k} / faust"] = spread([r[k]["rate"] / r["faust"]["rate"] for r in refs])
    return fig


def _fmt(sp: Any, digits: int = 0) -> str:
    if not isinstance(sp, dict):
        return str(sp)
    return f"{sp['median']:.{digits}f} ({sp['min']:.{digits}f} to {sp['max']:.{digits}f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--workers", default="1,2,3", help="worker counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-kill", action="store_true", help="skip the kill test")
    ap.add_argument(
        "--freeze",
        type=float,
        default=0.0,
        help="first, freeze (SIGSTOP) one of the 3 workers this long mid-drain, then resume it",
    )
    ap.add_argument("--quix-python", help="an interpreter with quixstreams (for its pass-through)")
    ap.add_argument("--no-refs", action="store_true", help="skip the pass-through references")
    ap.add_argument("--json", help="also write the rows and figures to this file")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]

    started = ensure_broker()
    rounds: list[dict[int, dict[str, Any]]] = []
    kills: list[dict[str, Any]] = []
    refs: list[dict[str, Any]] = []
    idle: list[dict[str, float]] = []
    groups: list[Group] = []
    t_start = time.monotonic()
    try:
        groups = start_groups(counts, args.partitions)
        for g in groups:  # warm: models, caches, the first changelog writes
            drain(g, "warm", 20, 5)
        for rnd in range(args.repeat):
            idle.append(idle_cores(groups))
            log(
                f"idle: broker {idle[-1]['broker']:.3f} cores, {idle[-1]['n_workers']} workers {idle[-1]['workers']:.3f}"
            )
            rows: dict[int, dict[str, Any]] = {}
            for g in groups:
                log(
                    f"round {rnd + 1}/{args.repeat}: {g.n} worker(s) drain {args.runs} runs x {args.steps} steps"
                )
                rows[g.n] = drain(g, f"r{rnd}", args.runs, args.steps)
                log("  " + show(rows[g.n]))
            rounds.append(rows)
            if not args.no_refs:
                refs.append(references(args.runs, args.steps, args.partitions, args.quix_python))
        if args.freeze:
            g = max(groups, key=lambda g: g.n)
            g.wait_split()
            log(f"freeze test: one of {g.n} workers stopped {args.freeze:g}s a third of the way in")
            row = drain(g, "freeze", args.runs, args.steps, Kill(1 / 3, freeze_s=args.freeze))
            log("  " + show(row) + f"; {row['kill']}")
            kills.append(row)
        if not args.no_kill:
            for g in sorted(groups, key=lambda g: -g.n):
                if g.n < 2:
                    continue
                g.wait_split()
                log(f"kill test: one of {g.n} workers killed a third of the way in")
                row = drain(g, "kill", args.runs, args.steps, Kill(1 / 3))
                log("  " + show(row) + f"; {row['kill']}")
                kills.append(row)
    finally:
        for g in groups:
            g.stop()
        if started:
            stop_broker()

    fig = summarise(rounds, refs)
    print(f"\nmachine: {machine()}  date: {time.strftime('%Y-%m-%d %H:%M')}  commit: {commit()}")
    print(
        f"took {(time.monotonic() - t_start) / 60:.1f} min; {args.runs} runs x {args.steps} steps, {args.partitions} partitions"
    )
    for i, rows in enumerate(rounds, 1):
        for r in rows.values():
            print(f"round {i}: {show(r)}")
    for i, r in enumerate(refs, 1):
        print(
            f"refs {i} (load {r['load1']:.1f}): "
            + ", ".join(f"{k} {v['rate']:.0f}/s" for k, v in r.items() if isinstance(v, dict))
        )
    for r in kills:
        print(f"kill: {show(r)}; {r['kill']}")
    for r in idle:
        print(
            f"idle: broker {r['broker']:.3f} cores, {r['n_workers']:.0f} idle workers {r['workers']:.3f} cores"
        )
    print(f"\nMedians of {len(rounds)} rounds (min to max):")
    for k, v in fig.items():
        print(f"| {k} | {_fmt(v, 0 if ('events/s' in k or 'us/event' in k) else 2)} |")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"rounds": rounds, "kills": kills, "refs": refs, "idle": idle, "figures": fig},
                indent=1,
                default=str,
            )
        )
    # the freeze test shows a known weakness (a worker back from a freeze sends beside the
    # new owner): reported, not a failure of this benchmark
    bad = sum(r["missing"] + r["differing"] for rows in rounds for r in rows.values())
    bad += sum(r["missing"] + r["differing"] for r in kills if not r["kill"]["freeze_s"])
    frozen = [r for r in kills if r["kill"]["freeze_s"]]
    print(
        "SUMMARY scaleout: "
        + ", ".join(f"{n}w {fig[f'{n}w events/s']['median']:.0f}/s" for n in counts)
        + f"; lost or differing decisions (rounds, SIGKILL): {bad}"
        + "".join(f"; freeze: missing {r['missing']}, differing {r['differing']}" for r in frozen)
    )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
