"""The `rb-streams` command: worker, replay, cost, patterns, demo, simulate, config, plugins,
tenants, deadletters, experiment, kafka, models.

A user's mistake gets one line on stderr and an exit code, never a traceback: 2 for a usage or
configuration error, 1 for a failure (a missing file, an unreachable broker, invalid records).
Secrets are read only from the environment or from files (RB_<NAME>_FILE, RB_SECRETS_DIR),
never from flags: a command line is visible to every user of the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from .. import __version__
from ..kafka.client_settings import SettingsError, check_tenant_name
from ..kafka.security import KafkaAuthError, unreachable
from ..settings import Settings
from ..shared.logsafe import safe_for_log

# Settings that are never flags: secrets, and what `replay` does not use.
# Secrets never go on a command line; the experiment settings are JSON (env only: RB_EXPERIMENT,
# RB_ORG_EXPERIMENT), and `demo`/`simulate --experiment` is the simulator's switch.
_NO_FLAG = set(Settings.SECRETS) | {"experiment", "org_experiment"}
# The settings the pattern commands use: where the store is.
_STORE_FLAGS = ("data_dir", "patterns_path", "qdrant_url", "etrace_timeout_ms", "log_level")
# bytes/s a tenant may produce per broker (streams.admin.quotas, which needs aiokafka: kept here)
DEFAULT_PRODUCER_BYTE_RATE = 1024 * 1024
# `tenants add`: how to reach the broker as an admin, and the layout of the topics it creates
KAFKA_FLAGS = (
    "broker",
    "topic_prefix",
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "ssl_cafile",
    "partitions",
    "replication_factor",
    "tenants",
)
# the agent side's settings a worker never reads: left out of `worker --help` (their RB_* variables
# are still read, as every process reads its environment, and mean nothing to the worker)
AGENT_ONLY = ("client_extra_names", "client_call_gate", "client_gate_mode", "client_gate_policy", "tenant")
DEBUG_ENV = "RB_DEBUG"
# what streams.pipeline adds to an unknown_run detail when the run's run_start was refused
REFUSED_START_MARK = "its run_start was refused ("  # set to show tracebacks of internal errors


class UserError(Exception):
    """One line for the user; `code` 2 for usage, 1 for failure."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _add_settings_flags(p: argparse.ArgumentParser, only: Sequence[str] | None = None) -> None:
    names = only if only is not None else Settings.field_names()
    for name in names:
        if name in _NO_FLAG:
            continue
        p.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=None,
            type=_flag_type(name),
            help=f"(env {Settings.env_name(name)}, default {Settings.default(name)!r})",
        )


def _flag_type(name: str) -> Any:
    def parse(raw: str) -> Any:
        try:
            return Settings.parse_value(name, raw)
        except SettingsError as exc:
            # argparse names the flag ("argument --partitions: ..."): the variable is not in play
            raise argparse.ArgumentTypeError(exc.detail) from None

    return parse


def _settings(args: argparse.Namespace) -> Settings:
    given = {n: getattr(args, n, None) for n in Settings.field_names() if n not in _NO_FLAG}
    try:
        return Settings.from_env(**given)
    except SettingsError as exc:
        # a value the user typed as a flag is named as typed, one from the environment by its variable
        if exc.field is not None and given.get(exc.field) is not None:
            raise exc.named_as("--" + exc.field.replace("_", "-")) from None
        raise


def _progress(total: int | None, desc: str, unit: str) -> Any:
    """A progress bar on stderr, only when stderr is a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=None, file=sys.stderr, leave=False)


class _Bar:
    """A `progress(done, total)` callback drawing a bar (made on the first call, when the
    total is known)."""

    def __init__(self, desc: str, unit: str) -> None:
        self.desc, self.unit = desc, unit
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = _progress(total, self.desc, self.unit)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# -- commands ---------------------------------------------------------------------------------


def cmd_worker(args: argparse.Namespace) -> int:
    import faust

    from ..admin.topics import ensure_topics
    from ..embeddings.process import kill_all
    from ..plugins import load_policy
    from ..worker.assemble import assemble

    _stop_on_sigterm()  # until Faust handles it: a stop during start-up unwinds (issue 48)
    s = _settings(args)
    s.check_web_exposure()  # before the broker is asked anything
    s.check_decision_key()  # multi-tenant mode signs its decisions
    policy = load_policy(s)  # a bad plugin stops the worker here, before it joins the group
    s.data_path.mkdir(parents=True, exist_ok=True)
    lock = _lock_data_dir(s.data_path)  # held (open) for the worker's lifetime
    _check_web_port(s.web_host, s.web_port)
    if (why := unreachable(s)) is not None:
        return _fail(why, 1)
    # the app id is this prefix's, or the worker refuses it (streams.admin.ownership). asyncio.run,
    # not a bare loop: a stop mid-call (SIGTERM raises SystemExit in it) cancels the call and lets
    # its clients close before the loop does, where a closed loop left their tasks to die noisily.
    counts = asyncio.run(ensure_topics(s, claim=True))
    asyncio.set_event_loop(asyncio.new_event_loop())
    try:
        w = assemble(s, counts[s.steering_topic], policy)
        worker = faust.Worker(w.app, loglevel=s.log_level, quiet=True)
        # Faust's terminal spinner hooks the root logger at DEBUG so it can spin on every record,
        # which makes every library debug() call format a record: ~10% of the hot path.
        worker.spinner = None
        worker.execute_from_commandline()
    finally:  # however the worker ends (a signal while the child loads the model, too): no child left
        kill_all()
    lock.close()
    return 0


def _stop_on_sigterm() -> None:
    """SIGTERM before Faust installs its handlers (while the models load and the embedding
    child starts, ~10 s) raises SystemExit(143), as SIGINT raises KeyboardInterrupt: the
    start-up unwinds and its `finally` kills the child. The default action ended the process
    on the spot, and a child caught loading the model outlived it (issue 48)."""
    import signal

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def _lock_data_dir(path: Path) -> IO[bytes]:
    """An exclusive lock on the worker's data directory, or UserError: a second worker on the
    same directory would otherwise wait on the tables' locks for 30 s and die with a long log."""
    import fcntl

    fh = open(path / ".worker.lock", "ab")  # noqa: SIM115 (held until the worker exits)
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise UserError(
            f"the data directory {path} is in use by another worker: give each worker on this "
            "machine its own RB_DATA_DIR (and RB_WEB_PORT); see docs/production.md"
        ) from None
    return fh


def _check_web_port(host: str, port: int) -> None:
    """UserError when another process listens on the worker's web port: found out after the
    worker has joined the group, it is a ~60-line OSError traceback from the web server."""
    import socket

    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return  # an address that does not resolve: the web server says so
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the web server binds
        try:
            probe.bind(addr)
        except OSError as exc:
            raise UserError(
                f"the web port {host}:{port} (RB_WEB_PORT) is in use by another process ({exc.strerror}): "
                "give each worker on this machine its own RB_WEB_PORT (and RB_DATA_DIR)"
            ) from None


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


def cmd_cost(args: argparse.Namespace) -> int:
    """What steering and routing do to a fleet's bill under prompt caching (COST.md)."""
    from ..agent.compose import anthropic_request, check_placement
    from ..embeddings.models import load_models
    from ..plugins import load_policy
    from ..replay import Replayer
    from . import cost as rc

    s = _settings(args)
    if not s.prices_file.strip():
        raise UserError(
            "cost: no price table: set RB_PRICES_FILE or pass --prices-file (deploy/prices.example.toml)", 2
        )
    prices = s.prices
    if not prices.cost.get("model") or not prices.cost.get("fast"):
        raise UserError(
            f"cost: the price table {s.prices_file!r} has no [cost] section naming `model` and `fast`", 2
        )
    policy = load_policy(s)
    models = load_models()
    sem = models.semantics()

    def replayer() -> Replayer:
        return Replayer(s.limits, lambda: 0.0, sem=sem, policy=policy, max_runs_per_org=0, max_runs=0)

    def compose(request: Any, decision: Any, placement: str) -> Any:
        return anthropic_request(request, decision, placement=check_placement(placement))

    fleets, reports = [], []
    skipped = 0
    for path in args.files:
        # as replay: each refused line named (the first 20, then a count), skipped, then a total
        bad = _DeadLetterLines(path, command="cost")
        with open(path, "rb") as fh:
            try:
                runs = rc.read_runs(fh, path, on_bad=bad)
            except rc.CostInputError as exc:
                raise UserError(
                    f"cost: {exc}" + (f" ({bad.seen} invalid lines skipped)" if bad.seen else ""), 1
                ) from None
        skipped += bad.seen
        if args.runs:
            runs = runs[: args.runs]
        if args.step_seconds is not None:
            runs = rc.retimed(runs, args.step_seconds)
        got = rc.evaluate(rc.source_name(path), runs, prices, compose, replayer)
        reports.extend(got)
        fleets.append(rc.fleet_of(rc.source_name(path), got))
    chosen = next((r for r in reports if r.run_id == args.run), None) if args.run else None
    if args.run and chosen is None:
        raise UserError(f"cost: --run {args.run!r}: no such run in the files", 2)
    if args.json:
        out: dict[str, Any] = {
            "prices_file": s.prices_file,
            "cost": dict(prices.cost),
            "step_seconds": args.step_seconds,
            "invalid_lines_skipped": skipped,
            "fleets": [rc.fleet_dict(f) for f in fleets],
        }
        if args.per_run or chosen is not None:
            out["runs"] = [r.as_dict() for r in ([chosen] if chosen is not None else reports)]
        _print_json(out)
    else:
        c = prices.cost
        print(
            f"cost: every run as if on {c['model']}, FAST routed to {c['fast']}"
            + (f", SLOW to {c['slow']} (upgrades)" if c.get("slow") else "")
            + f"; prices {s.prices_file}; tokens estimated from text; % against never switching, no steering"
            + ("" if args.step_seconds is None else f"; steps re-timed {args.step_seconds:g} s apart")
        )
        for line in rc.table(fleets):
            print(line)
        if args.per_run or chosen is not None:
            for r in [chosen] if chosen is not None else reports:
                for line in rc.run_lines(r):
                    print(line)
    if args.plot:
        target = chosen if chosen is not None else max(reports, key=lambda r: r.steps, default=None)
        why = rc.plot(args.plot, fleets, target)
        print(f"rb-streams: {why}" if why else f"cost: plot written to {args.plot}", file=sys.stderr)
    if skipped:
        print(f"cost: {skipped} invalid lines skipped (named above)", file=sys.stderr)
    return 0


def _tenant_arg(raw: str) -> str:
    try:
        return check_tenant_name(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _DeadLetterLines:
    """`replay`'s refused lines on stderr, each with its line number and reason (the first
    `shown`, then a count): "1 dead-letters" alone does not say which line or why."""

    def __init__(self, name: str, shown: int = 20, command: str = "replay") -> None:
        self.name = "<stdin>" if name == "-" else name
        self.command = command
        self.shown = shown
        self.seen = 0
        self.printed = 0
        # run id -> [first line, count] of its later events refused because its run_start was
        # (streams.pipeline): one line per run at the end, not one per event
        self.after_refused_start: dict[str, list[int]] = {}

    def __call__(self, lineno: int, record: dict[str, Any]) -> None:
        self.seen += 1
        run_id = record.get("run_id")
        if record.get("reason") == "unknown_run" and REFUSED_START_MARK in str(record.get("detail")):
            self.after_refused_start.setdefault(str(run_id), [lineno, 0])[1] += 1
            return
        self.printed += 1
        if self.printed <= self.shown:
            detail = safe_for_log(str(record.get("detail") or ""), 200)  # the file's own text
            where = f"{self.name}:{lineno}"
            print(
                f"{self.command}: {where}: {record.get('reason')}" + (f": {detail}" if detail else ""),
                file=sys.stderr,
            )
        elif self.printed == self.shown + 1:
            if self.command == "replay":
                rest = "further dead-lettered lines not shown; --deadletter FILE keeps them all"
            else:
                rest = "further invalid lines not shown"
            print(f"{self.command}: ({rest})", file=sys.stderr)

    def finish(self) -> None:
        """One line per run whose later events were refused for its refused run_start."""
        for n, (run_id, (first, count)) in enumerate(self.after_refused_start.items()):
            if n == self.shown:
                print(
                    f"{self.command}: (and {len(self.after_refused_start) - n} more such runs)",
                    file=sys.stderr,
                )
                break
            print(
                f"{self.command}: {self.name}:{first}: unknown_run: {count} later events of run "
                f"{safe_for_log(run_id, 100)!r} (from this line on), dead-lettered because its run_start was refused",
                file=sys.stderr,
            )


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


def _load_file(store: Any, path: str, quiet: bool = False) -> tuple[int, int]:
    """Upsert the valid records of a JSONL file; print per-line errors. -> (loaded, bad)."""
    from ..etraces.patterns import read_file

    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    good, errors = read_file(path)
    for err in errors:
        print(f"{path}: {safe_for_log(err, None)}", file=sys.stderr)  # the file's own text
    if not good:
        return 0, len(errors)
    if quiet:
        return store.upsert(good), len(errors)
    with contextlib.closing(_Bar("patterns", " patterns")) as bar:
        n = store.upsert(good, progress=bar)
    return n, len(errors)


@contextlib.contextmanager
def _store(args: argparse.Namespace) -> Iterator[Any]:
    from ..embeddings.models import load_models
    from ..etraces.pattern_store import QdrantPatternStore, StoreInUse

    s = _settings(args)
    try:
        if s.qdrant_url:
            store = QdrantPatternStore(
                load_models().full, url=s.qdrant_url, api_key=s.qdrant_api_key.get_secret_value() or None
            )
        else:
            store = QdrantPatternStore(load_models().full, path=s.patterns_dir)
    except StoreInUse as exc:
        raise UserError(str(exc)) from None
    try:
        yield store
    finally:
        store.close()


def cmd_patterns_load(args: argparse.Namespace) -> int:
    from ..etraces.patterns import starter_library

    if args.starter:
        args.files = [*args.files, str(starter_library())]
    if not args.files:
        raise UserError("patterns load: name JSONL file(s), or --starter for the bundled library", 2)
    for path in args.files:  # every file is checked before the store is opened
        if not os.path.isfile(path):
            raise UserError(f"{path}: no such file")
    total_bad = 0
    report = []
    with _store(args) as store:
        for path in args.files:
            n, bad = _load_file(store, path)
            total_bad += bad
            report.append({"file": path, "loaded": n, "bad_lines": bad, "store": str(store.location)})
            if not args.json:
                print(
                    f"patterns: {n} loaded from {path} into {store.location}, {bad} bad line(s)",
                    file=sys.stderr,
                )
    if args.json:
        _print_json(report)
    return 1 if total_bad else 0


def cmd_patterns_delete(args: argparse.Namespace) -> int:
    with _store(args) as store:
        n = store.delete(args.ids, org_id=args.org)
    if args.json:
        _print_json({"deleted": n, "asked": len(args.ids)})
    else:
        print(f"patterns: deleted {n} of {len(args.ids)}", file=sys.stderr)
    return 0 if n == len(args.ids) else 1


def cmd_patterns_list(args: argparse.Namespace) -> int:
    from ..kafka import wire

    listed = 0
    with _store(args) as store:
        for p in sorted(store.iter_patterns(), key=lambda p: (p.tier, p.org_id or "", p.id)):
            if args.tier and p.tier != args.tier:
                continue
            if args.org and p.org_id != args.org:
                continue
            listed += 1
            if args.json:
                sys.stdout.buffer.write(wire.dumps(p.payload()) + b"\n")
            else:
                scope = p.org_id or p.failure_type or "-"
                cells = (p.tier, p.id, scope, p.title)  # whoever wrote the pattern chose these
                print("\t".join(safe_for_log(c, None) for c in cells))
        if not listed and not args.json:  # on stderr: stdout stays the (empty) list
            which = " matching" if args.tier or args.org else ""
            print(
                f"patterns: no{which} pattern in {store.location} (`rb-streams patterns load --starter` "
                "loads the bundled library)",
                file=sys.stderr,
            )
    return 0


def cmd_patterns_stats(args: argparse.Namespace) -> int:
    with _store(args) as store:
        stats = store.stats()
    if args.json:
        _print_json(stats)
    else:
        for k, v in stats.items():
            print(f"{k}\t{v}")
    return 0


def _experiment_arg(args: argparse.Namespace) -> dict[str, Any] | None:
    """`--experiment` (with `--holdout`, `--seed`): the runs' run_start `experiment`, or None.
    ValueError (said in one line by the caller) for a bad value or a build without them."""
    from ..local.demo import experiment_config, experiment_unsupported

    if not args.experiment:
        return None
    if (why := experiment_unsupported()) is not None:
        raise ValueError(why)
    return experiment_config(args.holdout, args.seed)


def cmd_demo(args: argparse.Namespace) -> int:
    from ..local.demo import main as demo_main
    from ..local.respond import RESPONSIVE

    _stop_on_sigterm()  # a SIGTERM (a `timeout`, a closed terminal) stops the broker and worker too
    try:
        experiment = _experiment_arg(args)
    except ValueError as exc:
        return _fail(str(exc), 2)
    default_runs = len(RESPONSIVE) if experiment is not None else 7
    return demo_main(
        runs=args.runs or default_runs,
        steps=args.steps,
        port=args.port,
        keep_broker=args.keep_broker,
        experiment=experiment,
        rounds=args.rounds,
    )


def cmd_simulate(args: argparse.Namespace) -> int:
    from ..local.demo import simulate

    try:
        experiment = _experiment_arg(args)
    except ValueError as exc:
        return _fail(str(exc), 2)
    s = _settings(args)
    if (why := unreachable(s)) is not None:
        return _fail(why, 1)
    from ..local.respond import RESPONSIVE

    runs = args.runs if args.runs is not None else len(RESPONSIVE) if experiment is not None else 7
    return simulate(s, runs, args.steps, args.forever, experiment, args.rounds)


def _add_experiment_flags(p: argparse.ArgumentParser, rounds: int) -> None:
    p.add_argument(
        "--experiment",
        action="store_true",
        help="agents that respond to steering (synthetic response model), in runs of experiment "
        "'demo' (a held-out control arm), then their outcomes and the report",
    )
    p.add_argument(
        "--holdout",
        type=float,
        default=0.5,
        help="with --experiment: share of runs in control (0-0.5; default 0.5)",
    )
    p.add_argument("--seed", default="0", help="with --experiment: the experiment's seed (default 0)")
    p.add_argument(
        "--rounds",
        type=_positive_int,
        default=rounds,
        help=f"with --experiment: runs per agent, one after another (default {rounds})",
    )


def cmd_config(args: argparse.Namespace) -> int:
    shown = _settings(args).as_dict(mask_secrets=True)
    if args.json:
        _print_json(shown)
    else:
        width = max(len(Settings.env_name(k)) for k in shown)
        for k, v in shown.items():
            print(f"{Settings.env_name(k):<{width}}  {v}")
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    """What runs may name (scorers, transitions, weight profiles) and where each comes from,
    as the worker and `replay` load them from these settings."""
    from ..plugins import load_plugins

    policy, loaded = load_plugins(_settings(args))
    origin = {(x.kind, x.name): x.origin for x in loaded}  # the rest is built in
    rows = [
        {"kind": kind, "name": name, "origin": origin.get((kind, name), "built in")}
        for kind, names in (
            ("scorer", policy.scorers),
            ("transition", policy.transitions),
            ("profile", policy.profiles),
        )
        for name in sorted(names)
    ]
    if args.json:
        _print_json(rows)
    else:
        for r in rows:
            print(f"{r['kind']:<10}  {r['name']:<20}  {r['origin']}")
    return 0


def cmd_tenants_add(args: argparse.Namespace) -> int:
    """A tenant's topics and ACLs (multi-tenant mode), then the settings its agents need."""
    from aiokafka.errors import KafkaError

    from ..admin.quotas import Quotas, set_quotas
    from ..admin.tenants import add_tenant, client_env

    s = _settings(args)
    try:
        done = asyncio.run(
            add_tenant(s, args.name, principal=args.principal, worker_principal=args.worker_principal)
        )
    except KafkaError as exc:
        raise UserError(
            f"could not set up tenant {args.name!r} on {s.broker}: {type(exc).__name__}: {exc}"
        ) from None
    print(
        f"tenant {done.tenant}: topics {', '.join(done.topics)} (created: {', '.join(done.created) or 'none'})"
    )
    for acl in done.acls:
        print(f"  allow {acl.describe()}")
    principal = args.principal or f"User:{done.tenant}"
    quotas = Quotas(args.producer_byte_rate or None, args.request_percentage)
    try:
        asyncio.run(set_quotas(s, principal, quotas))
    except KafkaError as exc:
        raise UserError(
            f"could not set the quotas of {principal} on {s.broker}: {type(exc).__name__}: {exc}"
        ) from None
    print(f"  quota: {principal} may {quotas.describe()}")
    print("its agents' settings:")
    broker = args.tenant_broker or done.listener
    protocol = None if args.tenant_broker else done.listener_protocol
    env = client_env(s, done.tenant, broker=broker, protocol=protocol, principal=done.principal)
    for k, v in env.items():
        print(f"  {k}={v}")
    if not broker:
        print(
            f"  (no SASL listener found on {s.broker}: give the tenants' address with --tenant-broker)",
        )
    served = [*s.tenant_names, done.tenant] if done.tenant not in s.tenant_names else list(s.tenant_names)
    print(f"the workers serve it with RB_TENANTS={','.join(served)} (restart them to pick it up)")
    return 0


def cmd_deadletters(args: argparse.Namespace) -> int:
    """Read the dead-letter topic: why the worker refused an event (a run it never steered)."""
    from aiokafka.errors import KafkaError

    from ..admin import deadletters as dl

    known = dl.reasons()
    if args.reason is not None and args.reason not in known:
        raise UserError(f"--reason {args.reason!r}: not a dead-letter reason (known: {', '.join(known)})", 2)
    try:
        since = None if args.since is None else dl.parse_since(args.since)
    except ValueError as exc:
        raise UserError(str(exc), 2) from None
    s = _settings(args)
    if (why := unreachable(s)) is not None:
        return _fail(why, 1)
    topic = dl.topic_of(s, s.tenant)
    q = dl.Query(run=args.run, reason=args.reason, since_s=since, limit=args.limit, follow=args.follow)
    try:
        n = asyncio.run(dl.read(s, topic, q, dl.printer(args.json)))
    except dl.TopicMissing:
        raise UserError(
            f"topic {topic} does not exist on {s.broker}: no worker has run with this RB_TOPIC_PREFIX there"
        ) from None
    except KafkaError as exc:
        raise UserError(f"could not read {topic} on {s.broker}: {type(exc).__name__}: {exc}") from None
    if n == 0 and not args.json:
        print(f"deadletters: no matching record in {topic}", file=sys.stderr)
    return 0


def cmd_experiment_report(args: argparse.Namespace) -> int:
    """Per arm and per monitor: success with intervals, cost, compliance, the sequential verdict."""
    from ..core.guard import GuardSettings
    from ..experiments import report as er

    guard = GuardSettings(enabled=True, alpha=args.alpha, min_runs=args.min_runs)
    if args.files:
        records: Any = er.read_jsonl(args.files)  # streamed: a file is read once, never held
        bad = 0
    else:
        from aiokafka.errors import KafkaError

        from ..experiments import topic as et

        s = _settings(args)
        if (why := unreachable(s)) is not None:
            return _fail(why, 1)
        name = et.outcomes_topic(s)
        try:
            records, bad = asyncio.run(et.read_outcomes(s, name))
        except et.TopicMissing:
            raise UserError(
                f"topic {name} does not exist on {s.broker}: no worker has written outcomes with this "
                "RB_TOPIC_PREFIX there (or name OUTCOMES.jsonl files)"
            ) from None
        except KafkaError as exc:
            raise UserError(f"could not read {name} on {s.broker}: {type(exc).__name__}: {exc}") from None
    try:
        rep = er.build(records, experiment=args.experiment, alpha=args.alpha, guard=guard)
    except er.ReportError as exc:
        raise UserError(str(exc)) from None
    rep["ignored"]["not_json"] = bad
    if args.json:
        _print_json(rep)
    else:
        print(er.text(rep))
    if args.plot:
        why = er.plot(args.plot, rep)
        print(f"rb-streams: {why}" if why else f"experiment: plot written to {args.plot}", file=sys.stderr)
    return 0


def _alpha(raw: str) -> float:
    try:
        x = float(raw)
    except ValueError:
        x = 0.0
    if not 0 < x < 1:
        raise argparse.ArgumentTypeError(f"expected a level between 0 and 1, got {raw!r}")
    return x


def _non_negative_int(raw: str) -> int:
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {raw!r}")
    return n


def _positive_float(raw: str) -> float:
    try:
        x = float(raw)
    except ValueError:
        x = 0.0
    if not 0 < x < 1e6:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {raw!r}")
    return x


def _positive_int(raw: str) -> int:
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {raw!r}")
    return n


def cmd_kafka(args: argparse.Namespace) -> int:
    from ..local.broker import kafka

    try:
        kafka(args.action, args.port, args.data_dir)
    except subprocess.CalledProcessError as exc:
        # The script has said what went wrong (e.g. "not running"); only the exit code is left.
        return 1 if exc.returncode else 0
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..embeddings.model_build import STATIC_MODEL_NAME, build_static_model
    from ..embeddings.paths import ModelNotAvailable, default_models_dir

    out = Path(args.out) if args.out else default_models_dir() / STATIC_MODEL_NAME
    try:
        with contextlib.closing(_Bar("models: distilling", " tokens")) as bar:
            r = build_static_model(out, force=args.force, progress=bar)
    except ModelNotAvailable as exc:
        raise UserError(str(exc), 2) from None
    if r.built:
        print(
            f"models: built {r.path} ({r.tokens} tokens x {r.dim} dims, "
            f"explained variance {r.explained_variance_ratio:.3f}) in {r.seconds:.1f}s",
            file=sys.stderr,
        )
    else:
        print(f"models: {r.path} is up to date", file=sys.stderr)
    return 0


def _print_json(data: Any) -> None:
    from ..kafka import wire

    sys.stdout.buffer.write(wire.dumps(data) + b"\n")


# -- parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    # the docstring's whole first paragraph: its first line alone stops mid-list
    p = argparse.ArgumentParser(prog="rb-streams", description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--version", action="version", version=f"rb-streams {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="command")

    w = sub.add_parser("worker", help="run the Faust worker")
    _add_settings_flags(w, [n for n in Settings.field_names() if n not in AGENT_ONLY])
    w.set_defaults(func=cmd_worker)

    r = sub.add_parser("replay", help="run wire events (JSONL) through the core, write decisions (JSONL)")
    r.add_argument("file", help="input JSONL, one wire event per line ('-' for stdin)")
    r.add_argument("-o", "--output", help="output JSONL (default stdout)")
    r.add_argument("--deadletter", help="write dead-letter records here (JSONL)")
    r.add_argument(
        "--outcomes",
        help="write the runs' outcome records here (JSONL), as the worker sends them to <prefix>.outcomes",
    )
    r.add_argument("--strict", action="store_true", help="exit 1 when any event was dead-lettered")
    r.add_argument(
        "--guard",
        dest="replay_guard",
        action="store_true",
        help="run the do-no-harm guard (RB_GUARD_ALPHA, RB_GUARD_MIN_RUNS) on the outcome records replay "
        "produces, in order, and mask treatment runs as the worker would; its switches on stderr",
    )
    r.add_argument("--json", action="store_true", help="print the summary as JSON (on stderr)")
    r.add_argument(
        "--tenant",
        default=None,
        type=_tenant_arg,
        help="multi-tenant mode: the events came from this tenant's steps topic (its org, as the worker rules)",
    )
    r.add_argument("--patterns", default=None, help="local pattern store directory to query (read-only use)")
    r.add_argument("--run", default=None, metavar="ID", help="with --html: the run whose page to write")
    r.add_argument(
        "--html",
        default=None,
        metavar="OUT.html",
        help="write --run's page (the worker's /runs/{id}/view, with every step's decision and cost) "
        "here; decisions go to -o only when it is given",
    )
    _add_settings_flags(
        r,
        (
            "max_event_bytes",
            "max_thought_chars",
            "max_runs_per_org",
            "max_runs",
            "partitions",
            "monitor_profiles",
            "qdrant_url",
            "patterns_seed",
        ),
    )
    r.set_defaults(func=cmd_replay)

    co = sub.add_parser("cost", help="price steering and routing under prompt caching, on trajectories")
    co.add_argument("files", nargs="+", metavar="FILE", help="wire events (JSONL); each file is one data set")
    co.add_argument("--runs", type=_positive_int, default=None, help="only the first N runs of each file")
    co.add_argument("--run", default=None, help="print (and plot) this run")
    co.add_argument("--per-run", action="store_true", help="one line (or JSON object) per run too")
    co.add_argument(
        "--step-seconds", type=_positive_float, default=None, help="re-time each run's steps S seconds apart"
    )
    co.add_argument("--json", action="store_true", help="one JSON object")
    co.add_argument("--plot", default=None, metavar="FILE.png", help="cost over a run's calls and fleet bars")
    _add_settings_flags(co, ("prices_file", "max_event_bytes", "max_thought_chars", "monitor_profiles"))
    co.set_defaults(func=cmd_cost)

    pt = sub.add_parser("patterns", help="load, list, delete guidance patterns; store stats")
    psub = pt.add_subparsers(dest="action", required=True, metavar="action")
    pl = psub.add_parser("load", help="upsert patterns from JSONL file(s)")
    pl.add_argument("files", nargs="*", metavar="FILE")
    pl.add_argument(
        "--starter", action="store_true", help="also load the starter library that ships with rb-streams"
    )
    pl.set_defaults(func=cmd_patterns_load)
    pd = psub.add_parser("delete", help="delete shared (E2/E3) patterns by id, or an org's E1 ones")
    pd.add_argument("ids", nargs="+", metavar="ID")
    pd.add_argument("--org", help="delete this org's E1 patterns with these ids (no other org's)")
    pd.set_defaults(func=cmd_patterns_delete)
    pls = psub.add_parser("list", help="list the stored patterns")
    pls.add_argument("--tier", choices=["e1", "e2", "e3"], help="only this tier")
    pls.add_argument("--org", help="only this org's E1 patterns")
    pls.set_defaults(func=cmd_patterns_list)
    ps = psub.add_parser("stats", help="collections and counts")
    ps.set_defaults(func=cmd_patterns_stats)
    for sp in (pl, pd, pls, ps):
        sp.add_argument("--json", action="store_true", help="machine-readable output")
        _add_settings_flags(sp, _STORE_FLAGS)

    d = sub.add_parser("demo", help="local broker + worker + simulated agents, live view")
    d.add_argument(
        "--runs",
        type=_positive_int,
        default=None,
        help="simulated agents, one run each (default 7; with --experiment 8, one per responsive behaviour)",
    )
    d.add_argument("--steps", type=_positive_int, default=30, help="steps per run (default 30)")
    d.add_argument(
        "--port",
        type=int,
        default=9092,
        help="the local broker's port: used if running, else started (default 9092)",
    )
    d.add_argument("--keep-broker", action="store_true", help="leave a broker the demo started running")
    _add_experiment_flags(d, rounds=5)
    d.set_defaults(func=cmd_demo)

    sim = sub.add_parser("simulate", help="publish simulated agent runs to the configured broker")
    sim.add_argument(
        "--runs", type=int, default=None, help="concurrent agents (default 7; with --experiment 8)"
    )
    sim.add_argument("--steps", type=int, default=30, help="steps per run")
    sim.add_argument("--forever", action="store_true", help="each agent starts a new run when one ends")
    _add_experiment_flags(sim, rounds=1)
    _add_settings_flags(sim)
    sim.set_defaults(func=cmd_simulate)

    c = sub.add_parser("config", help="print the effective configuration (secrets masked)")
    c.add_argument("--json", action="store_true", help="one JSON object")
    _add_settings_flags(c)
    c.set_defaults(func=cmd_config)

    pg = sub.add_parser(
        "plugins", help="list the scorers, transitions and profiles runs may name, and their origin"
    )
    pg.add_argument("--json", action="store_true", help="one JSON array")
    _add_settings_flags(pg, ("monitor_profiles",))
    pg.set_defaults(func=cmd_plugins)

    tn = sub.add_parser("tenants", help="multi-tenant mode: a tenant's topics and ACLs")
    tsub = tn.add_subparsers(dest="tenants_command", required=True, metavar="action")
    ta = tsub.add_parser("add", help="create a tenant's topics and ACLs, print its agents' settings")
    ta.add_argument("name", help="the tenant (1-64 letters, digits, '_' or '-'): its org and topic infix")
    ta.add_argument("--principal", default="", help="its Kafka principal (default User:<name>)")
    ta.add_argument(
        "--worker-principal",
        default="",
        help="also allow the workers' principal (User:<name>) its topics, and what a worker needs",
    )
    ta.add_argument(
        "--tenant-broker",
        default="",
        help="the address its agents use (default: the brokers' advertised SASL listener)",
    )
    ta.add_argument(
        "--producer-byte-rate",
        type=_non_negative_int,
        default=DEFAULT_PRODUCER_BYTE_RATE,
        help="Kafka quota: bytes/s the tenant may produce to each broker (its peak steps/s x step "
        f"size, with room to spare; default {DEFAULT_PRODUCER_BYTE_RATE}; 0: set none)",
    )
    ta.add_argument(
        "--request-percentage",
        type=float,
        default=None,
        help="Kafka quota: the share of a broker's request threads the tenant may use, in percent (default: none)",
    )
    _add_settings_flags(ta, KAFKA_FLAGS)
    ta.set_defaults(func=cmd_tenants_add)

    dlp = sub.add_parser("deadletters", help="read the dead-letter topic: what the worker refused, and why")
    dlp.add_argument("--run", default=None, help="only this run's records")
    dlp.add_argument("--reason", default=None, help="only this reason (invalid_run_start, unknown_run, ...)")
    dlp.add_argument("--since", default=None, help="only records of the last 30s, 10m, 2h, 1d, ...")
    dlp.add_argument(
        "--limit", type=_positive_int, default=50, help="the newest N matches, all partitions (default 50)"
    )
    dlp.add_argument("--follow", "-f", action="store_true", help="then keep printing new ones (Ctrl-C ends)")
    dlp.add_argument("--json", action="store_true", help="each record as one JSON line (others wrapped)")
    _add_settings_flags(
        dlp,
        (*KAFKA_FLAGS[:6], "tenant"),  # how to reach the broker, and whose topic to read
    )
    dlp.set_defaults(func=cmd_deadletters)

    ex = sub.add_parser("experiment", help="experiments: the report over outcome records")
    exsub = ex.add_subparsers(dest="experiment_command", required=True, metavar="action")
    er = exsub.add_parser(
        "report",
        help="per arm and monitor: success with 95%% intervals, cost, compliance, an anytime-valid verdict",
    )
    er.add_argument(
        "files", nargs="*", metavar="OUTCOMES.jsonl", help="outcome records (default: the outcomes topic)"
    )
    er.add_argument("--experiment", default=None, help="only this experiment (others are counted, left out)")
    er.add_argument("--alpha", type=_alpha, default=0.05, help="the sequential test's level (default 0.05)")
    er.add_argument(
        "--min-runs",
        type=_positive_int,
        default=50,
        help="the guard's runs per arm before a switch (default 50)",
    )
    er.add_argument("--json", action="store_true", help="the report as one JSON object")
    er.add_argument(
        "--plot", default=None, metavar="FILE.png", help="success per arm with intervals, cost per success"
    )
    _add_settings_flags(er, (*KAFKA_FLAGS[:6],))
    er.set_defaults(func=cmd_experiment_report)

    k = sub.add_parser("kafka", help="start/stop/status of the local Maven-resolved broker")
    k.add_argument("action", choices=["install", "start", "stop", "restart", "status"])
    k.add_argument("--port", type=int, default=9092, help="the broker's client port (default 9092)")
    k.add_argument(
        "--data-dir",
        default=None,
        help="the broker's data, logs and pid file (default $RB_KAFKA_DIR, else .local/kafka-PORT in a "
        "checkout, the user data dir when installed)",
    )
    k.set_defaults(func=cmd_kafka)

    m = sub.add_parser("models", help="build the embedding model artifacts the monitors use")
    m.add_argument("action", choices=["build"])
    m.add_argument(
        "--out",
        default=None,
        help="artifact dir (default: $RB_MODELS_DIR or <python prefix>/share/rb-streams/models, + /static-minilm-256)",
    )
    m.add_argument("--force", action="store_true", help="rebuild even if a valid artifact exists")
    m.set_defaults(func=cmd_models)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # usage errors: argparse prints one line, exits 2
    try:
        rc: Any = args.func(args)
    except SettingsError as exc:
        return _fail(f"invalid configuration: {exc}", 2)
    except UserError as exc:
        return _fail(str(exc), exc.code)
    except KafkaAuthError as exc:
        return _fail(str(exc), 2)

    except OSError as exc:  # a file the user named: missing, a directory, not readable...
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", 1)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: one line, the traceback only when asked for
        if os.environ.get(DEBUG_ENV):
            raise
        return _fail(f"internal error: {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for the traceback)", 1)
    return int(rc or 0)


def _fail(message: str, code: int) -> int:
    print(f"rb-streams: {message}", file=sys.stderr)
    return code
