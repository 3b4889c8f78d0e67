"""The `rb-streams` command: worker, replay, cost, patterns, demo, simulate, config, plugins,
tenants, deadletters, experiment, kafka, models.

A user's mistake gets one line on stderr and an exit code, never a traceback: 2 for a usage or
configuration error, 1 for a failure (a missing file, an unreachable broker, invalid records).
Secrets are read only from the environment or from files (RB_<NAME>_FILE, RB_SECRETS_DIR),
never from flags: a command line is visible to every user of the machine.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .. import __version__
from ..kafka.client_settings import SettingsError, check_tenant_name
from ..kafka.security import KafkaAuthError
from ..settings import Settings
from .common import (
    UserError,
    _add_settings_flags,
    _alpha,
    _fail,
    _non_negative_int,
    _positive_float,
    _positive_int,
    _print_json,
    _settings,
)
from .cost import cmd_cost
from .deadletters import cmd_deadletters
from .experiment import cmd_experiment_report
from .local import _add_experiment_flags, cmd_demo, cmd_kafka, cmd_simulate
from .models import cmd_models
from .patterns import cmd_patterns_delete, cmd_patterns_list, cmd_patterns_load, cmd_patterns_stats
from .replay import cmd_replay
from .tenants import cmd_tenants_add
from .worker import cmd_worker

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


# -- commands ---------------------------------------------------------------------------------


def _tenant_arg(raw: str) -> str:
    try:
        return check_tenant_name(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
