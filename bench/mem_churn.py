"""Run churn through the worker's processor without a broker: what grows with the runs seen.

    .venv/bin/python -m bench.mem_churn --runs 6000 --report 1000 [--tracemalloc]

The soak's load shape (`concurrency` runs at a time, `steps` steps each, one run in ten
abandoned to the idle timeout, short retention) fed straight into `Processor` with the
worker's real models, E-trace store, embedding child and prefetch, a dict for the run table
and a simulated clock (so retention evicts at the soak's pace whatever the CPU). Every
`--report` runs: RSS of this process and of the embedding child, every cache gauge
(`rb_cache_entries`), and with `--tracemalloc` the Python heap and the allocation sites that
grew since the first report. What grows here is Python-level; what grows only in the soak is
the broker side (Faust, aiokafka, RocksDB) or the allocator.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import orjson

from bench.common import STARTER, log
from streams.core.events import Limits
from streams.embeddings.cache import CachedEmbedder
from streams.embeddings.minilm import MiniLMEmbedder
from streams.embeddings.models import FULL_CACHE, FULL_CACHE_BYTES, load_models
from streams.embeddings.prefetch import EmbedPrefetch
from streams.embeddings.process import ProcessEmbedder
from streams.etraces.pattern_store import QdrantPatternStore
from streams.etraces.patterns import read_file
from streams.etraces.retrieval import Retriever
from streams.kafka import wire
from streams.local.simulate import BEHAVIOURS, trajectory
from streams.runtime.memtrace import rss_bytes
from streams.shared.contract import SCHEMA_VERSION
from streams.worker.gauges import CacheProbe
from streams.worker.metrics import Metrics
from streams.worker.processor import Processor
from streams.worker.retention_sweep import Retention
from streams.worker.run_table import RunTable

PARTITIONS = 4


class _Msg:
    __slots__ = ("offset", "partition", "topic")

    def __init__(self, partition: int, offset: int) -> None:
        self.topic, self.partition, self.offset = "steps", partition, offset

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


class _Ev:
    __slots__ = ("key", "message", "value")

    def __init__(self, key: bytes, value: bytes, message: _Msg) -> None:
        self.key, self.value, self.message = key, value, message


class _Acks:
    async def ack(self, event: Any) -> None:
        return None


def _events(n: int, steps: int, now: float) -> Iterator[dict[str, Any]]:
    rid = f"churn-{n:07d}"
    task, script = trajectory(BEHAVIOURS[n % len(BEHAVIOURS)], steps, seed=n)
    base = {"schema_version": SCHEMA_VERSION, "run_id": rid, "ts": now}
    yield {**base, "type": "run_start", "task": task, "org_id": ("acme", "globex")[n % 2]}
    for k, payload in enumerate(script, start=1):
        yield {**base, "type": "step", "step": k, **payload}
    if n % 10 != 9:  # one in ten is abandoned: left to the idle timeout
        yield {**base, "type": "run_finish", "outcome": "success"}


async def churn(args: argparse.Namespace) -> None:
    models = load_models()
    metrics = Metrics(process=False)
    clock = [time.time()]
    table: dict[bytes, bytes] = {}

    def part(run_id: str) -> int:
        return wire.partition_for(run_id, PARTITIONS)

    runs = RunTable(table, 0, part, PARTITIONS)
    requests: list[tuple[bytes, bytes, int]] = []

    async def send_step(key: bytes, value: bytes, partition: int) -> None:
        requests.append((key, value, partition))

    async def sink(*_: Any, **__: Any) -> None:
        return None

    retention = Retention(
        runs,
        send_step,
        part,
        finished_retention_s=60.0,
        idle_timeout_s=120.0,
        evict_interval_s=5.0,
        control_key="churn",
    )
    minilm = models.full.model
    assert isinstance(minilm, MiniLMEmbedder)
    child = ProcessEmbedder(minilm.model_dir, name=minilm.name, dim=minilm.dim)
    child_pid = child.start()
    query = CachedEmbedder(child, FULL_CACHE, FULL_CACHE_BYTES)
    store = QdrantPatternStore(query, path=args.patterns_dir) if args.patterns_dir else None
    if store is not None:
        store.upsert(read_file(STARTER)[0])
    retriever = Retriever(store, timeout_s=1.0, concurrency=2)
    prefetch = EmbedPrefetch(models.full, child, observe=metrics.prefetch)
    sem = models.semantics()
    runs.on_delete.append(retriever.discard)  # as streams.worker.assemble wires it
    proc = Processor(
        runs=runs,
        retention=retention,
        retriever=retriever,
        semantics=sem,
        limits=Limits(),
        metrics=metrics,
        send_decision=sink,
        send_deadletter=sink,
        steering_partition=part,
        clock=lambda: clock[0],
        prefetch_embeddings=prefetch,
    )
    probe = CacheProbe(
        metrics,
        runs=runs,
        retention=retention,
        chains=proc.chains,
        ack_order=proc.ack_order,
        semantics=sem,
        retriever=retriever,
        fast=models.fast,
        full=models.full,
        query=query,
        prefetch=prefetch,
    )
    offsets = [0] * PARTITIONS
    acks = _Acks()

    async def feed(key: bytes, value: bytes, partition: int) -> None:
        ev = _Ev(key, value, _Msg(partition, offsets[partition]))
        offsets[partition] += 1
        await proc.process(ev, acks)

    if args.tracemalloc:
        tracemalloc.start(4)
    first: tracemalloc.Snapshot | None = None
    counter = itertools.count()
    live: list[Iterator[dict[str, Any]]] = [
        _events(next(counter), args.steps, clock[0]) for _ in range(args.concurrency)
    ]
    started, last_sweep, t0 = args.concurrency, clock[0], time.monotonic()
    # A step every `pause` seconds per run: the simulated clock moves that much per round.
    while started < args.runs:
        for i, it in enumerate(live):
            ev = next(it, None)
            if ev is None:
                n = next(counter)
                started += 1
                live[i] = it = _events(n, args.steps, clock[0])
                ev = next(it)
                if n % args.report == 0:
                    await proc_drain(proc)
                    sizes, _ = probe.sizes()
                    line = (
                        f"runs={n:6d} t={time.monotonic() - t0:5.0f}s rss worker={rss_bytes() / 1e6:6.1f} MB "
                        f"embedding={rss_bytes(child_pid) / 1e6:6.1f} MB"
                    )
                    if args.tracemalloc:
                        line += f" traced={tracemalloc.get_traced_memory()[0] / 1e6:6.1f} MB"
                    log(line + " " + " ".join(f"{k}={v:.0f}" for k, v in sizes.items()))
                    if args.tracemalloc:
                        snap = tracemalloc.take_snapshot()
                        if first is None:
                            first = snap
                        else:
                            for d in snap.compare_to(first, "traceback")[: args.top]:
                                where = " <- ".join(
                                    f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno}"
                                    for f in reversed(d.traceback)
                                )
                                print(
                                    f"  {d.size_diff / 1e6:+8.3f} MB {d.count_diff:+8d}  {where}", flush=True
                                )
            ev["ts"] = clock[0]
            await feed(str(ev["run_id"]).encode(), orjson.dumps(ev), part(str(ev["run_id"])))
        clock[0] += args.pause
        if clock[0] - last_sweep >= 5.0:
            last_sweep = clock[0]
            await retention.sweep(clock[0])
            batch, requests[:] = list(requests), []
            for key, value, partition in batch:
                await feed(key, value, partition)
    retriever.close()


async def proc_drain(proc: Processor) -> None:
    while len(proc.chains):
        await asyncio.sleep(0.005)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=6000)
    ap.add_argument("--report", type=int, default=1000, help="runs between reports")
    ap.add_argument("--concurrency", type=int, default=40)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--pause", type=float, default=0.2)
    ap.add_argument("--patterns-dir", default="", help="a local pattern store (seeded with the starter)")
    ap.add_argument("--tracemalloc", action="store_true")
    ap.add_argument("--top", type=int, default=15)
    asyncio.run(churn(ap.parse_args()))


if __name__ == "__main__":
    main()
