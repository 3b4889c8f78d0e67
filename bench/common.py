"""Shared pieces of the benchmarks: a broker, a worker, paced load, percentiles."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import platform
import secrets
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from streams.local.broker import REPO, kafka, reachable
from streams.local.worker_process import free_port
from streams.settings import Settings

BENCH_PORT = int(os.environ.get("RB_BENCH_KAFKA_PORT", "29092"))
RESULTS = REPO / "bench" / "results"
STARTER = REPO / "patterns" / "starter.jsonl"  # the pattern library the benchmark workers load
DEFAULT_DATA = REPO.parent / "shared" / "data" / "real-dev"  # the real dev runs and their labels.json

# The escalation ladder measured: the built-in default (`ladder.DEFAULT_ESCALATION`), or a
# policy given with --ladder-policy (such as {"escalate_model_after": 1, "stop_after": 2}).
LADDER_POLICY: dict[str, Any] | None = None


def load_labels(data: Path) -> dict[str, dict[str, Any]]:
    """labels.json of a data folder, by run id ({} without one)."""
    path = data / "labels.json"
    if not path.exists():
        return {}
    return {r["run_id"]: r for r in json.loads(path.read_text("utf-8"))["runs"]}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def broker_dir(port: int = BENCH_PORT) -> Path:
    """The benchmark broker's data dir: RB_BENCH_KAFKA_DIR, else .local/bench-kafka-<port>."""
    return Path(os.environ.get("RB_BENCH_KAFKA_DIR") or REPO / ".local" / f"bench-kafka-{port}")


def ensure_broker(port: int = BENCH_PORT) -> bool:
    """Start the local broker for benchmarks unless one listens; True if we started it."""
    if reachable("127.0.0.1", port):
        return False
    kafka("start", port, str(broker_dir(port)))
    return True


def stop_broker(port: int = BENCH_PORT) -> None:
    kafka("stop", port, str(broker_dir(port)))


def bench_settings(port: int = BENCH_PORT, partitions: int = 8, **kw: Any) -> Settings:
    prefix = kw.pop("topic_prefix", f"b{uuid.uuid4().hex[:8]}")
    tmp = REPO / ".local" / "bench" / prefix
    tmp.mkdir(parents=True, exist_ok=True)
    return Settings.from_env(
        {},
        broker=f"kafka://127.0.0.1:{port}",
        topic_prefix=prefix,
        app_id=f"bench-{prefix}",
        decision_key=kw.pop("decision_key", secrets.token_hex(32)),  # signed, as every worker here
        partitions=partitions,
        data_dir=str(tmp),
        web_port=free_port(),
        session_timeout_s=6.0,
        heartbeat_interval_s=1.0,
        log_level="warn",
        **kw,
    )


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = min(len(s) - 1, max(0, round(p / 100.0 * (len(s) - 1))))
    return s[k]


def summary(xs: list[float]) -> dict[str, float]:
    return {
        "n": len(xs),
        "p50": pct(xs, 50),
        "p95": pct(xs, 95),
        "p99": pct(xs, 99),
        "max": max(xs) if xs else float("nan"),
        "mean": statistics.fmean(xs) if xs else float("nan"),
    }


async def paced(
    rate: float, runs: int, duration_s: float, one: Callable[[int, int], Awaitable[float | None]]
) -> tuple[list[float], float, int]:
    """`runs` sequential agents sharing `rate` steps/s for `duration_s`. Each agent sends its
    next step on schedule but never before its previous one was answered (like a real
    agent). Returns (latencies ms, achieved steps/s, misses)."""
    interval = runs / rate
    lat: list[float] = []
    misses = 0
    t_start = time.perf_counter()
    t_end = t_start + duration_s

    async def agent(i: int) -> None:
        nonlocal misses
        nxt = t_start + interval * (i / runs)  # spread the agents' phases
        k = 0
        while True:
            now = time.perf_counter()
            if nxt > now:
                await asyncio.sleep(nxt - now)
            if time.perf_counter() >= t_end:
                return
            k += 1
            ms = await one(i, k)
            if ms is None:
                misses += 1
            else:
                lat.append(ms)
            nxt += interval

    await asyncio.gather(*(agent(i) for i in range(runs)))
    elapsed = time.perf_counter() - t_start
    return lat, (len(lat) + misses) / elapsed, misses


def add_rounds_args(ap: Any, what: str) -> None:
    """`--repeat N` (rounds of `what`, figures as medians with min-max) and `--json FILE`:
    the two options every headline benchmark takes (bench.headline passes them)."""
    ap.add_argument("--repeat", type=int, default=1, help=f"rounds of {what}; medians with min-max")
    ap.add_argument("--json", help="also write the figures to this file")


def spread(xs: list[float]) -> dict[str, float]:
    """Median of repeated runs with their min and max (the form every headline figure takes)."""
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def fmt_spread(sp: dict[str, float], unit: str = "", digits: int = 2) -> str:
    """'4.52 (4.10 to 5.02)' with the unit after each number."""
    return f"{sp['median']:.{digits}f}{unit} ({sp['min']:.{digits}f} to {sp['max']:.{digits}f}{unit})"


def commit() -> str:
    """The commit measured (with '+changes' when the tree differs from it)."""
    import subprocess

    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def scrape(port: int) -> dict[str, float]:
    """A worker's /metrics as {'name{label="v",...}': value} (for before/after deltas)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}"] = sample.value
    return out


def machine() -> str:
    return (
        f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )


def broker_pid(port: int = BENCH_PORT) -> int | None:
    """The pid of the local benchmark broker (deploy/kafka/kafka.sh's pid file), if it runs."""
    try:
        pid = int((broker_dir(port) / "kafka.pid").read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _machine_busy() -> int | None:
    """Clock ticks all CPUs spent busy since boot (user, nice, system, irq, softirq; not
    idle, iowait or steal), from /proc/stat (None when not Linux)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:8]]
        return v[0] + v[1] + v[2] + v[5] + v[6]
    except (OSError, IndexError, ValueError):
        return None


def results_dir() -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    return RESULTS


def _ticks(path: str, reaped: bool = False) -> int | None:
    """utime + stime of a /proc stat file in clock ticks, plus, with `reaped`, those of the
    children it has waited for (None when gone or not Linux)."""
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11 : 15 if reaped else 13])
    except (OSError, IndexError, ValueError):
        return None


class CpuSampler:
    """The CPU time a process spends between two wall-clock instants: its main thread (the
    worker's event loop, what bounds its throughput) and the process with its children (the
    embedding process; running children and those already waited for); besides, the whole
    machine's busy time and, given its pid, the broker's (how much of the cores the rest
    leaves). Sampled from /proc every `every` s on a thread and interpolated, so the instants
    may be read from Kafka timestamps afterwards. Linux only: elsewhere `between` returns None."""

    def __init__(self, pid: int, every: float = 0.05, broker: int | None = None) -> None:
        import threading

        self.pid = pid
        self.broker = broker
        self.every = every
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        # (time, main ticks, total ticks, machine busy ticks, broker ticks)
        self.samples: list[tuple[float, int, int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self._thread.start()

    def _children(self) -> list[int]:
        out = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == self.pid:
                            out.append(int(entry))
                except (OSError, IndexError, ValueError):
                    pass
        return out

    def _run(self) -> None:
        kids: list[int] = []
        n = 0
        while not self._stop.is_set():
            if n % 20 == 0:  # the embedding process starts with the worker: look now and then
                kids = self._children()
            n += 1
            main = _ticks(f"/proc/{self.pid}/task/{self.pid}/stat")
            proc = _ticks(f"/proc/{self.pid}/stat", reaped=True)
            if main is None or proc is None:
                return
            total = proc + sum(t for k in kids if (t := _ticks(f"/proc/{k}/stat")) is not None)
            busy = _machine_busy() or 0
            broker = _ticks(f"/proc/{self.broker}/stat") if self.broker else 0
            if broker is None:  # gone: its time stays what it was
                broker = self.samples[-1][4] if self.samples else 0
            self.samples.append((time.time(), main, total, busy, broker))
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _at(self, t: float, i: int) -> float:
        s = self.samples
        for (t0, *a), (t1, *b) in itertools.pairwise(s):
            if t0 <= t <= t1:
                return float(a[i] + (b[i] - a[i]) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0))
        return float(s[0][1 + i] if t < s[0][0] else s[-1][1 + i])

    def between(self, t0: float, t1: float) -> dict[str, float] | None:
        """CPU seconds in [t0, t1]: the main thread, the process with its children, the
        whole machine (all cores) and the broker (0 without its pid)."""
        if len(self.samples) < 2:
            return None
        names = ("main_cpu_s", "cpu_s", "machine_busy_s", "broker_cpu_s")
        return {k: (self._at(t1, i) - self._at(t0, i)) / self.hz for i, k in enumerate(names)}
