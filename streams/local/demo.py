"""`rb-streams demo`: local broker + worker + a fleet of scripted agents, with a live view."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..agent.client import Decision, SteeringClient, StepLogEntry
from ..agent.compose import anthropic_request
from ..agent.validation import RUN_FIELDS
from ..core.cost import run_cost
from ..core.prices import PRIOR_STATE_RATIO, PRIOR_UNIT, PriceTable
from ..etraces.patterns import starter_library
from ..settings import Settings, default_app_id
from .broker import kafka, reachable
from .respond import RESPONSIVE, ResponsiveRun, told_by
from .simulate import BEHAVIOURS, trajectory
from .worker_process import WorkerProcess, free_port, signed

ROUTING = {"FAST": "claude-haiku-4-5", "SLOW": "claude-opus-4-5", "SKIP": "claude-opus-4-5"}
DEFAULT_MODEL = "claude-sonnet-4-5"  # the agents' own model: a call not routed elsewhere uses it
EXAMPLE_PRICES = Path(__file__).resolve().parents[2] / "deploy" / "prices.example.toml"
WORKER_CHECK_S = 0.5  # how often the demo checks that its worker is still running
EXPERIMENT_NAME = "demo"
REPORT_GRACE_S = 3.0  # the worker publishes a run's outcome after its run_finish: let it land
REPORT_TIMEOUT_S = 120.0
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
    # an experiment's run (`--experiment`): its arm (decisions' `arm`), outcome and response
    arm: str | None = None
    outcome: str = "success"
    told: Counter[str] = field(default_factory=Counter)  # monitor -> texts the agent weighed
    complied: Counter[str] = field(default_factory=Counter)  # monitor -> of those, followed
    refused: int = 0  # calls the pre-call gate refused


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
        from ..price_file import load_prices

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
    client: SteeringClient,
    behaviour: str,
    steps: int,
    seed: int,
    show: Callable[[str], None],
    experiment: dict[str, Any] | None = None,
) -> AgentSummary:
    """One run of a scripted agent; with `experiment`, an agent that responds to steering
    (`respond.ResponsiveRun`) in a run of that experiment, which reports its outcome."""
    if experiment is not None:
        return await responsive_agent(client, behaviour, steps, seed, show, experiment)
    run_id = f"demo-{behaviour}-{uuid.uuid4().hex[:4]}"
    task, script = trajectory(behaviour, steps, seed)
    d = await client.start_run(run_id, **_start_fields(behaviour, task))
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


def _start_fields(behaviour: str, task: str) -> dict[str, Any]:
    return {
        "task": task,
        "model": DEFAULT_MODEL,
        "model_routing": ROUTING,
        "agent_name": f"{behaviour}-agent",
        "org_id": "acme",
        "token_budget": 200_000,
    }


async def responsive_agent(
    client: SteeringClient,
    behaviour: str,
    steps: int,
    seed: int,
    show: Callable[[str], None],
    experiment: dict[str, Any],
) -> AgentSummary:
    """`agent` in an experiment: each call's step comes from what the decision before it told
    the agent (`told_by`), a tool call passes the client's pre-call gate first, and run_finish
    reports the outcome the response model gives."""
    run = ResponsiveRun(behaviour, steps, seed)
    run_id = f"demo-{behaviour}-{uuid.uuid4().hex[:6]}"
    d = await client.start_run(run_id, **_start_fields(behaviour, run.task), experiment=experiment)
    show(_line(run_id, 0, d))
    arm = d.data.get("arm") if d is not None else None
    sent: list[dict[str, Any]] = []
    routed: list[str] = []
    texts: list[str | None] = []

    def allow(tool: str, args: Any) -> bool:
        return client.check_call(run_id, tool, args).allow

    while (payload := run.next_step(told_by(d.data if d is not None else None), allow)) is not None:
        routed.append((d.model if d is not None else None) or DEFAULT_MODEL)
        texts.append(d.injection_text if d is not None else None)
        await asyncio.sleep(random.uniform(0.05, 0.2))  # the "model call"
        d = await client.step(run_id, run.k, **payload)
        sent.append(payload)
        show(_line(run_id, run.k, d))
        if arm is None and d is not None:
            arm = d.data.get("arm")
    await client.finish_run(run_id, run.outcome())
    summary = summarize(f"{behaviour}-agent", run_id, client.step_log(run_id), DEFAULT_MODEL)
    summary.task, summary.steps, summary.routed, summary.texts = run.task, sent, routed, texts
    summary.arm, summary.outcome = arm if isinstance(arm, str) else None, run.outcome()
    summary.told, summary.complied, summary.refused = run.told, run.complied, int(run.refused)
    client.forget(run_id)
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
    settings: Settings,
    runs: int,
    steps: int,
    forever: bool = False,
    deadline_ms: int | None = None,
    experiment: dict[str, Any] | None = None,
    rounds: int = 1,
) -> list[AgentSummary]:
    """`runs` concurrent agents, one behaviour each; with `forever`, each starts a new run
    when its run finishes (the compose stack's demo-agent). Each agent's summary, in order.
    `deadline_ms` None: the client's default (`RB_CLIENT_DEADLINE_MS`, 250 ms), what an agent
    gets, so the demo shows the latency and late decisions an agent would see. With
    `experiment`, agents that respond to steering (`RESPONSIVE` behaviours), `rounds` runs each
    one after another, every run's summary in order."""
    kinds = RESPONSIVE if experiment is not None else BEHAVIOURS

    async with SteeringClient(settings, deadline_ms=deadline_ms) as client:

        def run_one(i: int, seed: int) -> Awaitable[AgentSummary]:
            return agent(client, kinds[i % len(kinds)], steps, seed, print, experiment)

        per_agent = await asyncio.gather(*(runs_of(run_one, i, runs, rounds, forever) for i in range(runs)))
    return [s for rows in per_agent for s in rows]


async def runs_of(
    run_one: Callable[[int, int], Awaitable[AgentSummary]], i: int, agents: int, rounds: int, forever: bool
) -> list[AgentSummary]:
    """Agent `i`'s runs one after another: `rounds` of them, or without end (`forever`, keeping
    only the last summary, so a --forever fleet's memory stays flat). Each run's seed is the
    previous one's plus the number of agents: every run of the fleet has a seed of its own."""
    seed = i
    done: list[AgentSummary] = []
    while True:
        done.append(await run_one(i, seed))
        if forever:
            done = done[-1:]
        elif len(done) >= rounds:
            return done
        seed += agents


def experiment_config(holdout: float, seed: str) -> dict[str, Any]:
    """The run_start `experiment` of the demo's runs: its name, holdout and seed."""
    if not 0.0 <= holdout <= 0.5:
        raise ValueError(f"--holdout must be from 0 to 0.5, got {holdout}")
    if len(seed) > 64:
        raise ValueError("--seed: at most 64 characters")
    return {"name": EXPERIMENT_NAME, "holdout": holdout, "seed": seed}


def experiment_unsupported() -> str | None:
    """Why this build cannot run an experiment (its run_start has no `experiment`), or None."""
    if "experiment" not in RUN_FIELDS:
        return "this build's run_start has no `experiment` field: --experiment needs a build with experiments"
    return None


def _rate(wins: int, n: int) -> str:
    return f"{wins}/{n} ({100 * wins / n:.0f}%)" if n else "0/0"


def experiment_table(rows: Sequence[AgentSummary]) -> str:
    """What the agents themselves saw, per arm: runs, successes, the texts that reached them
    and how many they followed (the response model's draws), calls the gate refused. The
    figures of record are the worker's outcome records (the report below)."""
    arms = sorted({r.arm or "(no arm)" for r in rows})
    lines = ["per arm, as the simulated agents saw it (synthetic: the response model's effect):"]
    for a in arms:
        rs = [r for r in rows if (r.arm or "(no arm)") == a]
        wins = sum(r.outcome == "success" for r in rs)
        told: Counter[str] = Counter()
        complied: Counter[str] = Counter()
        for r in rs:
            told.update(r.told)
            complied.update(r.complied)
        followed = ", ".join(f"{m} {complied[m]}/{n}" for m, n in sorted(told.items())) or "none"
        refused = sum(r.refused for r in rs)
        lines.append(
            f"  {a:<10} runs {len(rs):>3}  success {_rate(wins, len(rs)):<14} texts followed: {followed}"
            f"; calls refused by the gate {refused}"
        )
    fails = Counter(r.outcome for r in rows if r.outcome != "success")
    if fails:
        lines.append(f"  failures: {_counts(fails)}")
    return "\n".join(lines)


def report(settings: Settings) -> tuple[int, str]:
    """`rb-streams experiment report` on the worker's outcomes topic: (exit code, its output
    or why there is none). A build without the subcommand says so instead."""
    env = dict(os.environ)
    env.update({Settings.env_name(k): str(v) for k, v in settings.as_dict().items()})
    try:
        p = subprocess.run(
            [sys.executable, "-m", "streams", "experiment", "report"],
            env=env,
            capture_output=True,
            text=True,
            timeout=REPORT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return 1, f"rb-streams experiment report did not finish within {REPORT_TIMEOUT_S:.0f} s"
    if p.returncode == 2 and "invalid choice" in p.stderr:
        return 2, "(this build has no `rb-streams experiment report`: the report is not shown)"
    return p.returncode, (p.stdout + p.stderr).rstrip()


def show_experiment(settings: Settings, rows: Sequence[AgentSummary]) -> int:
    """The experiment's end: the agents' own table, then the report from the outcome records."""
    print(f"\n{experiment_table(rows)}")
    time.sleep(REPORT_GRACE_S)
    rc, text = report(settings)
    print(f"\nrb-streams experiment report (the worker's outcome records):\n\n{text}")
    print(
        "\nThe effect above is synthetic: the simulated agents follow a text with the "
        "probabilities of their response model (docs/experiments.md). The point is the "
        "instrument: arms, outcomes, compliance and the report, on your own fleet."
    )
    return 0 if rc in (0, 2) else rc


def simulate(
    settings: Settings,
    runs: int,
    steps: int,
    forever: bool,
    experiment: dict[str, Any] | None = None,
    rounds: int = 1,
) -> int:
    """`rb-streams simulate`: the demo's agents against a configured broker and worker; with
    `experiment`, agents that respond to steering in runs of that experiment, then the report."""
    with contextlib.suppress(KeyboardInterrupt):
        summaries = asyncio.run(fleet(settings, runs, steps, forever, experiment=experiment, rounds=rounds))
        if experiment is not None:
            return show_experiment(settings, summaries)
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


def run_fleet(
    settings: Settings,
    worker: WorkerProcess,
    runs: int,
    steps: int,
    experiment: dict[str, Any] | None = None,
    rounds: int = 1,
) -> int:
    """The demo's agents against `worker`, then their summary; 1 (and why, on stderr) if the
    worker died meanwhile, which the agents alone would not notice."""
    work = fleet(settings, runs, steps, experiment=experiment, rounds=rounds)
    summaries = asyncio.run(while_alive(work, worker.proc))
    if summaries is None or worker.proc.poll() is not None:
        print(f"\n{dead_worker(worker)}", file=sys.stderr, flush=True)
        return 1
    if experiment is not None:
        return show_experiment(settings, summaries)
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
            # the example prices, so the outcome records and the experiment report show costs
            # (an install without the checkout's deploy/ has none: costs then read 0)
            prices_file=str(EXAMPLE_PRICES) if EXAMPLE_PRICES.is_file() else "",
        )
    )


def main(
    runs: int = 7,
    steps: int = 30,
    port: int = 9092,
    keep_broker: bool = False,
    experiment: dict[str, Any] | None = None,
    rounds: int = 1,
) -> int:
    if experiment is not None and (why := experiment_unsupported()) is not None:
        print(f"rb-streams demo: {why}", file=sys.stderr)
        return 2
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
        pool = RESPONSIVE if experiment is not None else BEHAVIOURS
        kinds = "/".join(pool[: min(runs, len(pool))])
        what = f"{steps} steps each ({kinds})"
        if experiment is not None:
            what += f", {rounds} runs each in experiment {experiment}"
        print(f"worker ready; {runs} synthetic coding agents, {what}:\n", flush=True)
        return run_fleet(settings, worker, runs, steps, experiment, rounds)
    finally:
        if worker is not None:
            worker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        if started_broker and not keep_broker:
            kafka("stop", port)
