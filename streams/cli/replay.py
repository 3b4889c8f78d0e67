"""`rb-streams replay`: run wire events (JSONL) through the core, write decisions (JSONL)."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Iterator
from typing import Any

from ..settings import Settings
from .common import UserError, _DeadLetterLines, _progress, _settings
from .patterns import _load_file


def cmd_replay(args: argparse.Namespace) -> int:
    """The worker's decisions for a file of wire events, from the same settings object."""
    from ..embeddings.models import load_models
    from ..plugins import load_policy
    from ..replay import replay_file

    s = _settings(args)
    policy = load_policy(s)  # the worker's plugins and profiles: the worker's decisions
    guard = None
    if args.replay_guard:
        from ..core.guard import Guard, GuardSettings

        guard = Guard(GuardSettings(enabled=True, alpha=s.guard_alpha, min_runs=s.guard_min_runs))
    if (args.run is None) != (args.html is None):
        raise UserError("replay: --run and --html go together (--run ID --html OUT.html)", 2)
    page = _RunPage(args.run) if args.run is not None else None
    with contextlib.ExitStack() as stack:
        src = sys.stdin.buffer if args.file == "-" else stack.enter_context(open(args.file, "rb"))
        if page is not None and args.output is None:
            out: Any = io.BytesIO()  # --html without -o: the page is the output, not the decisions
        else:
            out = (
                sys.stdout.buffer
                if args.output in (None, "-")
                else stack.enter_context(open(args.output, "wb"))
            )
        dl = stack.enter_context(open(args.deadletter, "wb")) if args.deadletter else None
        oc = stack.enter_context(open(args.outcomes, "wb")) if args.outcomes else None
        models = load_models()  # once: the monitors and the pattern store share them
        retriever = _replay_retriever(args, s, models.full)
        if retriever is not None:
            stack.callback(retriever.close)
        bar = stack.enter_context(_progress(None, "replay", " events"))
        lines = None if args.json else _DeadLetterLines(args.file)
        n_dec, n_dl = replay_file(
            _counted(src, bar),
            out,
            dl,
            s.limits,
            policy=policy,
            sem=models.semantics(),
            retriever=retriever,
            max_runs_per_org=s.max_runs_per_org,
            max_runs=s.max_runs,
            partitions=s.partitions,
            control_key=s.control_key.get_secret_value(),
            tenant=args.tenant,
            on_deadletter=lines,
            outcomes=oc,
            guard=guard,
            on_event=None if page is None else page.see,
        )
        if lines is not None:
            lines.finish()
    if page is not None:
        page.write(args.html, args.file)
    summary: dict[str, Any] = {"decisions": n_dec, "deadletters": n_dl}
    if guard is not None:
        summary["guard_switches"] = [sw.why for sw in guard.switches]
        if not args.json:
            for sw in guard.switches:
                print(f"replay: {sw.why}", file=sys.stderr)
    if args.json:
        from ..kafka import wire

        sys.stderr.buffer.write(wire.dumps(summary) + b"\n")
    else:
        print(f"replay: {n_dec} decisions, {n_dl} dead-letters", file=sys.stderr)
    if n_dl and (args.strict or not n_dec):
        return 1  # --strict: anything dead-lettered fails; without it, a file with no valid event does
    return 0


class _RunPage:
    """`replay --run ID --html OUT.html`: the run's page (`streams.run_page`) as the worker
    would serve it, with what only a replay knows: every step's decision (the texts the agent
    received, the ladder's action) and the run's cost after each step."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.state: Any = None
        self.decisions: list[dict[str, Any]] = []
        self.costs: dict[int, float] = {}

    def see(self, rp: Any, decision: Any) -> None:
        st = rp.states.get(self.run_id)
        if st is not None:
            self.state = st
        if decision is not None and decision["run_id"] == self.run_id:
            self.decisions.append(decision)
            if st is not None:
                self.costs[decision["step"]] = st.cost_usd

    def write(self, path: str, source: str) -> None:
        from ..run_page import render_run_page, steps_from_decisions

        if self.state is None:
            raise UserError(f"replay: run {self.run_id!r} is not in {source} (no event of it was applied)")
        summary = {**self.state.summary(), "cost_usd": self.state.cost_usd}
        summary["cost_estimated"] = self.state.cost_estimated
        page = render_run_page(summary, steps_from_decisions(self.decisions, self.costs))
        with open(path, "w", encoding="utf-8") as f:
            f.write(page)


def _counted(src: Any, bar: Any) -> Iterator[bytes]:
    for line in src:
        bar.update(1)
        yield line


def _replay_retriever(args: argparse.Namespace, s: Settings, embedder: Any) -> Any:
    """The pattern store replay queries: a server, a local store dir, or a seed file loaded
    into memory; None (E-traces answered "no pattern store configured") without any."""
    from ..etraces.pattern_store import QdrantPatternStore
    from ..etraces.retrieval import Retriever

    if not (args.patterns or s.qdrant_url or s.patterns_seed):
        return None
    if s.qdrant_url:
        store = QdrantPatternStore(
            embedder, url=s.qdrant_url, api_key=s.qdrant_api_key.get_secret_value() or None
        )
    else:
        store = QdrantPatternStore(embedder, path=args.patterns)  # None: in memory
    if s.patterns_seed:
        _load_file(store, s.patterns_seed, quiet=True)
    return Retriever(store)
