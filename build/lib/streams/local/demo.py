"""`rb-streams demo`: local broker + worker + a fleet of scripted agents, with a live view."""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from ..agent.client import Decision, SteeringClient
from ..etraces.patterns import starter_library
from ..settings import Settings
from .broker import kafka, reachable
from .simulate import BEHAVIOURS, trajectory
from .worker_process import WorkerProcess, free_port

ROUTING = {"FAST": "claude-haiku-4-5", "SLOW": "claude-sonnet-4-6", "SKIP": "claude-sonnet-4-6"}


async def agent(
    client: SteeringClient, behaviour: str, steps: int, seed: int, show: Callable[[str], None]
) -> None:
    run_id = f"demo-{behaviour}-{uuid.uuid4().hex[:4]}"
    task, script = trajectory(behaviour, steps, seed)
    d = await client.start_run(
        run_id,
        task=task,
        model="claude-sonnet-4-6",
        model_routing=ROUTING,
        agent_name=f"{behaviour}-agent",
        org_id="acme",
        token_budget=200_000,
    )
    show(_line(run_id, 0, d))
    for i, payload in enumerate(script, start=1):
        await asyncio.sleep(random.uniform(0.05, 0.2))  # the "model call"
        d = await client.step(run_id, i, **payload)
        show(_line(run_id, i, d))
    await client.finish_run(run_id, "success")
    client.forget(run_id)  # a --forever fleet keeps the client's memory flat


def _line(run_id: str, step: int, d: Decision | None) -> str:
    if d is None:
        return f"{run_id:<24} step {step:>3}  (decision late: unsteered)"
    prev = d.data["previous_state"] or "-"
    diff = d.data["difficulty"]
    ds = "  -  " if diff is None else f"{diff:.2f}"
    arrow = f"{prev:>6} -> {d.fsm_state:<6}"
    line = f"{run_id:<24} step {step:>3}  {arrow}  difficulty {ds}  model {d.model or '(default)':<18}  {d.latency_ms:6.1f} ms"
    mon = d.data.get("monitors") or {}
    if mon.get("fired"):
        line += f"  fired: {', '.join(mon['fired'])}"
    if d.data["inject"]:
        by_source: dict[str, list[dict[str, object]]] = {}
        for inj in d.data["injections"]:
            by_source.setdefault(str(inj["source"]), []).append(inj)
        for source, injs in by_source.items():
            text = str(injs[0]["text"]).replace("\n", " ")
            sim = injs[0]["similarity"]
            what = f"{source} x{len(injs)}" if len(injs) > 1 else source
            what += f" {injs[0]['pattern_id']} sim {sim:.2f}" if isinstance(sim, float) else ""
            line += f"\n{'':<26}steer ({what}): {text[:130]}{'...' if len(text) > 130 else ''}"
    elif d.data["skipped_reason"] and "unavailable" in d.data["skipped_reason"]:
        line += f"  ({d.data['skipped_reason']})"
    return line


async def fleet(
    settings: Settings, runs: int, steps: int, forever: bool = False, deadline_ms: int | None = 2000
) -> None:
    """`runs` concurrent agents, one behaviour each; with `forever`, each starts a new run
    when its run finishes (the compose stack's demo-agent)."""

    async def one(client: SteeringClient, i: int) -> None:
        seed = i
        while True:
            await agent(client, BEHAVIOURS[i % len(BEHAVIOURS)], steps, seed, print)
            if not forever:
                return
            seed += runs

    async with SteeringClient(settings, deadline_ms=deadline_ms) as client:
        await asyncio.gather(*(one(client, i) for i in range(runs)))


def simulate(settings: Settings, runs: int, steps: int, forever: bool) -> int:
    """`rb-streams simulate`: the demo's agents against a configured broker and worker."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(fleet(settings, runs, steps, forever, deadline_ms=None))
    return 0


def main(runs: int = 7, steps: int = 30, port: int = 9092, keep_broker: bool = False) -> int:
    started_broker = False
    if not reachable("127.0.0.1", port):
        print(f"starting the local Kafka broker on 127.0.0.1:{port} ...", flush=True)
        kafka("start", port)
        started_broker = True
    tmp = tempfile.mkdtemp(prefix="rb-demo-")
    prefix = f"demo{uuid.uuid4().hex[:6]}"
    settings = Settings.from_env(
        broker=f"kafka://127.0.0.1:{port}",
        topic_prefix=prefix,
        partitions=4,
        data_dir=tmp,
        app_id=f"rb-demo-{prefix}",
        web_port=free_port(),
        log_level="warn",
        patterns_seed=str(starter_library()),
    )
    worker: WorkerProcess | None = None
    try:
        print("starting a worker ...", flush=True)
        worker = WorkerProcess.start(settings, Path(tmp) / "worker.log")
        kinds = "/".join(BEHAVIOURS[: min(runs, len(BEHAVIOURS))])
        print(f"worker ready; {runs} synthetic coding agents, {steps} steps each ({kinds}):\n", flush=True)
        asyncio.run(fleet(settings, runs, steps))
        print(
            "\ndone: every step got its decision above (FAST -> cheap model, SLOW -> strong model; "
            "fired monitors and the steering text the agent adds to its next call: monitor "
            "warnings, E3 universal rules on the first call, E2/E1 guidance retrieved from Qdrant)."
        )
        return 0
    finally:
        if worker is not None:
            worker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        if started_broker and not keep_broker:
            kafka("stop", port)
