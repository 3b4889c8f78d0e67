"""`rb-streams demo`: local broker + worker + a fleet of scripted agents, with a live view."""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..agent.client import Decision, SteeringClient, StepLogEntry
from ..agent.compose import anthropic_request
from ..core.cost import run_cost
from ..core.prices import PRIOR_STATE_RATIO, PRIOR_UNIT, PriceTable
from ..etraces.patterns import starter_library
from ..settings import Settings, default_app_id
from .broker import kafka, reachable
from .simulate import BEHAVIOURS, trajectory
from .worker_process import WorkerProcess, free_port, signed

ROUTING = {"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5", "SKIP": "claude-opus-4-5"}
DEFAULT_MODEL = "claude-sonnet-4-5"  # the agents' own model: a call not routed elsewhere uses it
EXAMPLE_PRICES = Path(__file__).resolve().parents[2] / "deploy" / "prices.example.toml"
WORKER_CHECK_S = 0.5  # how often the demo checks that its worker is still running
T = TypeVar("T")


@dataclass
class AgentSummary:
    """What one simulated agent got from steering over its run, from its client's step log:
    the end-of-demo table (the live lines scroll away)."""

    agent: str
    run_id: str
    calls: int = 0  # decisions asked for (run_start's included)
    late: int = 0  # of those, past the deadline: the call went unsteered
    states: Counter[str] = field(default_factory=Counter)  # FSM state of each decision
    models: Counter[str] = field(default_factory=Counter)  # the model each call was routed to
    fired: Counter[str] = field(default_factory=Counter)  # monitor -> decisions it fired in
    injections: Counter[str] = field(default_factory=Counter)  # source -> calls it steered
    actions: Counter[str] = field(default_factory=Counter)  # escalate / stop, when any
    latencies: list[float] = field(default_factory=list)  # ms, of the decisions that came in time
    task: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)  # the step payloads it sent
    routed: list[str] = field(default_factory=list)  # call k+1's model (decision k's, or its own)
    texts: list[str | None] = field(default_factory=list)  # call k+1's steering text


def summarize(agent: str, run_id: str, log: Sequence[StepLogEntry], default_model: str) -> AgentSummary:
    s = AgentSummary(agent, run_id, calls=len(log))
    for e in log:
        if e.late:
            s.late += 1
            continue
        s.latencies.append(e.latency_ms)
        if e.fsm_state:
            s.states[e.fsm_state] += 1
        s.models[e.model_id or default_model] += 1
        s.fired.update(e.monitors_fired)
        s.injections.update({src for src in e.injection_sources if src})  # E3: several rules, one call
        if e.action in ("escalate", "stop"):
            s.actions[e.action] += 1
    return s


def demo_prices() -> tuple[PriceTable, str]:
    """The example price table from a source checkout, else the documented default ratios."""
    if EXAMPLE_PRICES.is_file():
        from ..prices import load_prices

        return load_prices(EXAMPLE_PRICES), "USD, deploy/prices.example.toml"
    table = {m: PRIOR_UNIT.scaled(PRIOR_STATE_RATIO.get(s, 1.0)) for s, m in ROUTING.items()}
    table[DEFAULT_MODEL] = PRIOR_UNIT
    return PriceTable(models=table), "units: the agents' model's input token = 1, FAST 1/3, SLOW 5/3"


def cost_line(rows: Sequence[AgentSummary]) -> str:
    """The fleet's bill under prompt caching (the core cost model on the demo's own steps):
    never switching, downgrades (routing's saving), upgrades (spending by design, apart) and
    steering's own cost at the end placement."""
    prices, unit = demo_prices()

    def compose(request: Any, decision: Any, placement: str) -> Any:
        return anthropic_request(request, decision, placement="end")

    base = down = both = steer = 0.0
    for r in rows:
        if not r.steps:
            continue
        start = {"task": r.task}
        n = len(r.steps)
        none: list[str | None] = [None] * n
        cheap = [m if m == ROUTING["FAST"] else DEFAULT_MODEL for m in r.routed]
        base += run_cost(start, r.steps, [DEFAULT_MODEL] * n, none, prices, compose).usd
        down += run_cost(start, r.steps, cheap, none, prices, compose).usd
        both += run_cost(start, r.steps, r.routed, none, prices, compose).usd
        steer += run_cost(start, r.steps, [DEFAULT_MODEL] * n, r.texts, prices, compose).usd
    if base <= 0:
        return "cost: no steps"

    def pct(x: float) -> str:
        return f"{100 * (x - base) / base:+.1f}%"

    return (
        f"cost under prompt caching ({unit}; tokens estimated from the steps' text): never switching "
        f"{base:.4f}; routing's downgrades {pct(down)}; with upgrades to {ROUTING['SLOW']} "
        f"{pct(both)} (spending by design, apart); steering's own cache cost {pct(steer)}"
    )


def _counts(c: Counter[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in c.most_common()) or "-"


def latency_line(rows: Sequence[AgentSummary], deadline_ms: int) -> str:
    """What an agent with this deadline got: decisions in time, their latency (median, p95,
    max) and the late ones, each a model call that went out unsteered."""
    calls = sum(r.calls for r in rows)
    late = sum(r.late for r in rows)
    ms = sorted(x for r in rows for x in r.latencies)
    if not ms:
        spread = "none in time"
    else:
        p50, p95 = ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        spread = f"median {p50:.0f} ms, p95 {p95:.0f} ms, max {ms[-1]:.0f} ms"
    return (
        f"decisions against the client's {deadline_ms} ms deadline (RB_CLIENT_DEADLINE_MS): "
        f"{calls - late} of {calls} in time ({spread}); late {late} (those calls went unsteered)"
    )


SUMMARY_COLUMNS = ("agent", "calls", "late", "FSM states", "routed to", "monitors fired", "calls steered by")


def summary_table(rows: Sequence[AgentSummary]) -> str:
    """One line per agent, columns aligned; counts as `name n, name n` (most first)."""
    cells = [
        [
            r.agent,
            str(r.calls),
            str(r.late),
            _counts(r.states),
            _counts(Counter({m.removeprefix("claude-"): n for m, n in r.models.items()})),
            _counts(r.fired),
            _counts(r.injections) + (f"; {_counts(r.actions)}" if r.actions else ""),
        ]
        for r in rows
    ]
    widths = [max(len(c[i]) for c in [list(SUMMARY_COLUMNS), *cells]) for i in range(len(SUMMARY_COLUMNS))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(SUMMARY_COLUMNS), *cells]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


async def agent(
    client: SteeringClient, behaviour: str, steps: int, seed: int, show: Callable[[str], None]
) -> AgentSummary:
    run_id = f"demo-{behaviour}-{uuid.uuid4().hex[:4]}"
    task, script = trajectory(behaviour, steps, seed)
    d = await client.start_run(
        run_id,
        task=task,
        model=DEFAULT_MODEL,
        model_routing=ROUTING,
        agent_name=f"{behaviour}-agent",
        org_id="acme",
        token_budget=200_000,
    )
    show(_line(run_id, 0, d))
    sent: list[dict[str, Any]] = []
    routed: list[str] = []
    texts: list[str | None] = []
    for i, payload in enumerate(script, start=1):
        routed.append((d.model if d is not None else None) or DEFAULT_MODEL)
        texts.append(d.injection_text if d is not None else None)
        await asyncio.sleep(random.uniform(0.05, 0.2))  # the "model call"
        d = await client.step(run_id, i, **payload)
        sent.append(payload)
        show(_line(run_id, i, d))
    await client.finish_run(run_id, "success")
    summary = summarize(f"{behaviour}-agent", run_id, client.step_log(run_id), DEFAULT_MODEL)
    summary.task, summary.steps, summary.routed, summary.texts = task, sent, routed, texts
    client.forget(run_id)  # a --forever fleet keeps the client's memory flat
    return summary


def _line(run_id: str, step: int, d: Decision | None) -> str:
    if d is None:
        return (
            f"{run_id:<24} step {step:>3}  (decision late: past the client's deadline, this call unsteered)"
        )
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
    settings: Settings, runs: int, steps: int, forever: bool = False, deadline_ms: int | None = None
) -> list[AgentSummary]:
    """`runs` concurrent agents, one behaviour each; with `forever`, each starts a new run
    when its run finishes (the compose stack's demo-agent). Each agent's summary, in order.
    `deadline_ms` None: the client's default (`RB_CLIENT_DEADLINE_MS`, 250 ms), what an agent
    gets, so the demo shows the latency and late decisions an agent would see."""

    async def one(client: SteeringClient, i: int) -> AgentSummary:
        seed = i
        while True:
            summary = await agent(client, BEHAVIOURS[i % len(BEHAVIOURS)], steps, seed, print)
            if not forever:
                return summary
            seed += runs

    async with SteeringClient(settings, deadline_ms=deadline_ms) as client:
        return list(await asyncio.gather(*(one(client, i) for i in range(runs))))


def simulate(settings: Settings, runs: int, steps: int, forever: bool) -> int:
    """`rb-streams simulate`: the demo's agents against a configured broker and worker."""
    with contextlib.suppress(KeyboardInterrupt):
        summaries = asyncio.run(fleet(settings, runs, steps, forever))
        print(f"\nwhat each agent got from steering:\n\n{summary_table(summaries)}")
        print(latency_line(summaries, settings.client_deadline_ms))
        print(cost_line(summaries))
    return 0


async def while_alive(work: Coroutine[Any, Any, T], proc: subprocess.Popen[bytes]) -> T | None:
    """`work`'s result, or None (`work` cancelled) as soon as `proc` has exited: the demo's
    agents go on unsteered when their worker dies (the client fails open), so without this
    the demo ended as if all went well (issue 48)."""
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            if proc.poll() is not None:
                return None
            await asyncio.wait([task], timeout=WORKER_CHECK_S)
        return task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=5.0)


def dead_worker(worker: WorkerProcess, lines: int = 15) -> str:
    """What the demo says when its worker died: the exit code and the end of its log."""
    return (
        f"rb-streams demo: the worker died during the demo (exit code {worker.proc.returncode}): "
        f"the steps after that got no decision. The end of its log:\n{worker.tail(lines)}"
    )


def run_fleet(settings: Settings, worker: WorkerProcess, runs: int, steps: int) -> int:
    """The demo's agents against `worker`, then their summary; 1 (and why, on stderr) if the
    worker died meanwhile, which the agents alone would not notice."""
    summaries = asyncio.run(while_alive(fleet(settings, runs, steps), worker.proc))
    if summaries is None or worker.proc.poll() is not None:
        print(f"\n{dead_worker(worker)}", file=sys.stderr, flush=True)
        return 1
    print(f"\nwhat each agent got from steering:\n\n{summary_table(summaries)}")
    print(f"\n{latency_line(summaries, settings.client_deadline_ms)}")
    print(f"\n{cost_line(summaries)}")
    print(
        "\ndone: every step in time got its decision above (FAST -> cheap model, SLOW -> strong model; "
        "fired monitors and the steering text the agent adds to its next call: monitor "
        "warnings, E3 universal rules on the first call, E2/E1 guidance retrieved from Qdrant)."
    )
    return 0


def demo_settings(port: int, data_dir: str) -> Settings:
    """The demo's worker and agents: a topic prefix of their own (so its app id, the prefix's
    default, is too) and a decision key made for this run, which the worker signs with and the
    agents check: a record forged into the steering topic steers none of them."""
    prefix = f"demo{uuid.uuid4().hex[:6]}"
    return signed(
        Settings.from_env(
            broker=f"kafka://127.0.0.1:{port}",
            topic_prefix=prefix,
            app_id=default_app_id(prefix),  # not an RB_APP_ID of the environment: another's
            partitions=4,
            data_dir=data_dir,
            web_port=free_port(),
            log_level="warn",
            patterns_seed=str(starter_library()),
        )
    )


def main(runs: int = 7, steps: int = 30, port: int = 9092, keep_broker: bool = False) -> int:
    started_broker = False
    if not reachable("127.0.0.1", port):
        print(f"starting the local Kafka broker on 127.0.0.1:{port} ...", flush=True)
        kafka("start", port)
        started_broker = True
    tmp = tempfile.mkdtemp(prefix="rb-demo-")
    settings = demo_settings(port, tmp)
    worker: WorkerProcess | None = None
    try:
        print("starting a worker ...", flush=True)
        worker = WorkerProcess.start(settings, Path(tmp) / "worker.log")
        kinds = "/".join(BEHAVIOURS[: min(runs, len(BEHAVIOURS))])
        print(f"worker ready; {runs} synthetic coding agents, {steps} steps each ({kinds}):\n", flush=True)
        return run_fleet(settings, worker, runs, steps)
    finally:
        if worker is not None:
            worker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        if started_broker and not keep_broker:
            kafka("stop", port)
