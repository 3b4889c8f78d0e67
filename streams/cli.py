"""The `rb-streams` command: worker, replay, demo, simulate, config, kafka, models, patterns."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from dataclasses import fields
from typing import Any

from .kafka.security import KafkaAuthError
from .settings import Settings, SettingsError


def _add_settings_flags(p: argparse.ArgumentParser) -> None:
    for f in fields(Settings):
        p.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            default=None,
            type=_flag_type(f.name),
            help=f"(env {Settings.env_name(f.name)}, default {f.default!r})",
        )


def _flag_type(name: str) -> Any:
    def parse(raw: str) -> Any:
        try:
            return Settings.parse_value(name, raw)
        except SettingsError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.from_env(**{f.name: getattr(args, f.name, None) for f in fields(Settings)})


def cmd_worker(args: argparse.Namespace) -> int:
    import faust

    from .kafka.topics import ensure_topics
    from .worker.assemble import assemble

    s = _settings(args)
    s.data_path.mkdir(parents=True, exist_ok=True)
    loop = asyncio.new_event_loop()
    try:
        counts = loop.run_until_complete(ensure_topics(s))
    finally:
        loop.close()
    asyncio.set_event_loop(asyncio.new_event_loop())
    w = assemble(s, counts[s.steering_topic])
    worker = faust.Worker(w.app, loglevel=s.log_level, quiet=True)
    # Faust's terminal spinner hooks the root logger at DEBUG so it can spin on every record,
    # which makes every library debug() call format a record: ~10% of the hot path.
    worker.spinner = None
    worker.execute_from_commandline()
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from .core.events import Limits
    from .core.monitors import load_profiles
    from .embeddings.models import load_models
    from .replay import replay_file

    profiles = args.monitor_profiles or os.environ.get(Settings.env_name("monitor_profiles"), "")
    if profiles:
        load_profiles(profiles)
    limits = Limits(max_event_bytes=args.max_event_bytes, max_thought_chars=args.max_thought_chars)
    with contextlib.ExitStack() as stack:
        src = sys.stdin.buffer if args.file == "-" else stack.enter_context(open(args.file, "rb"))
        out = (
            sys.stdout.buffer if args.output in (None, "-") else stack.enter_context(open(args.output, "wb"))
        )
        dl = stack.enter_context(open(args.deadletter, "wb")) if args.deadletter else None
        models = load_models()  # once: the monitors and the pattern store share them
        retriever = _replay_retriever(args, models.full)
        if retriever is not None:
            stack.callback(retriever.close)
        n_dec, n_dl = replay_file(
            src,
            out,
            dl,
            limits,
            sem=models.semantics(),
            retriever=retriever,
            max_runs_per_org=_setting(args.max_runs_per_org, "max_runs_per_org"),
            partitions=_setting(args.partitions, "partitions"),
            control_key=os.environ.get(Settings.env_name("control_key"), ""),
        )
    print(f"replay: {n_dec} decisions, {n_dl} dead-letters", file=sys.stderr)
    return 0


def _setting(flag: Any, name: str) -> Any:
    """A replay flag, else the worker's RB_* variable, else the setting's default."""
    if flag is not None:
        return flag
    raw = os.environ.get(Settings.env_name(name), "")
    return Settings.parse_value(name, raw) if raw else getattr(Settings, name)


def _replay_retriever(args: argparse.Namespace, embedder: Any) -> Any:
    """The pattern store replay queries: a server, a local store dir, or a seed file loaded
    into memory; None (E-traces answered "no pattern store configured") without any."""
    from .etraces.pattern_store import QdrantPatternStore
    from .etraces.retrieval import Retriever

    if not (args.patterns or args.qdrant_url or args.patterns_seed):
        return None
    emb = embedder
    if args.qdrant_url:
        store = QdrantPatternStore(emb, url=args.qdrant_url, api_key=os.environ.get("RB_QDRANT_API_KEY"))
    else:
        store = QdrantPatternStore(emb, path=args.patterns)  # None: in memory
    if args.patterns_seed:
        _load_file(store, args.patterns_seed, quiet=True)
    return Retriever(store)


def _load_file(store: Any, path: str, quiet: bool = False) -> tuple[int, int]:
    """Upsert the valid records of a JSONL file; print per-line errors. -> (loaded, bad)."""
    from .etraces.patterns import read_file

    good, errors = read_file(path)
    for err in errors:
        print(f"{path}: {err}", file=sys.stderr)

    def bar(done: int, total: int) -> None:
        if quiet:
            return
        width = 30
        filled = int(width * done / max(1, total))
        end = "\n" if done == total else ""
        print(
            f"\rpatterns: [{'#' * filled}{'.' * (width - filled)}] {done}/{total}",
            end=end,
            file=sys.stderr,
            flush=True,
        )

    n = store.upsert(good, progress=bar) if good else 0
    return n, len(errors)


def cmd_patterns(args: argparse.Namespace) -> int:
    from .embeddings.models import load_models
    from .etraces.pattern_store import QdrantPatternStore, StoreInUse
    from .kafka import wire

    s = _settings(args)
    try:
        if s.qdrant_url:
            store = QdrantPatternStore(load_models().full, url=s.qdrant_url, api_key=s.qdrant_api_key)
        else:
            store = QdrantPatternStore(load_models().full, path=s.patterns_dir)
    except StoreInUse as exc:
        print(f"rb-streams: {exc}", file=sys.stderr)
        return 2
    try:
        if args.action == "load":
            if not args.items:
                print("rb-streams: patterns load needs a JSONL file", file=sys.stderr)
                return 2
            total_bad = 0
            for path in args.items:
                n, bad = _load_file(store, path)
                total_bad += bad
                print(
                    f"patterns: {n} loaded from {path} into {store.location}, {bad} bad line(s)",
                    file=sys.stderr,
                )
            return 1 if total_bad else 0
        if args.action == "delete":
            if not args.items:
                print("rb-streams: patterns delete needs pattern ids", file=sys.stderr)
                return 2
            n = store.delete(args.items)
            print(f"patterns: deleted {n} of {len(args.items)}", file=sys.stderr)
            return 0 if n == len(args.items) else 1
        if args.action == "list":
            for p in sorted(store.iter_patterns(), key=lambda p: (p.tier, p.org_id or "", p.id)):
                if args.tier and p.tier != args.tier:
                    continue
                if args.org and p.org_id != args.org:
                    continue
                if args.json:
                    sys.stdout.buffer.write(wire.dumps(p.payload()) + b"\n")
                else:
                    scope = p.org_id or p.failure_type or "-"
                    print(f"{p.tier}\t{p.id}\t{scope}\t{p.title}")
            return 0
        sys.stdout.buffer.write(wire.dumps(store.stats()) + b"\n")
        return 0
    finally:
        store.close()


def cmd_demo(args: argparse.Namespace) -> int:
    from .local.demo import main as demo_main

    return demo_main(runs=args.runs, steps=args.steps, port=args.port, keep_broker=args.keep_broker)


def cmd_simulate(args: argparse.Namespace) -> int:
    from .local.demo import simulate

    return simulate(_settings(args), args.runs, args.steps, args.forever)


def cmd_config(args: argparse.Namespace) -> int:
    from .kafka import wire

    sys.stdout.buffer.write(wire.dumps(_settings(args).as_dict(mask_secrets=True)) + b"\n")
    return 0


def cmd_kafka(args: argparse.Namespace) -> int:
    from .local.broker import kafka

    kafka(args.action, args.port, args.data_dir)
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from .embeddings.model_build import STATIC_MODEL_NAME, build_static_model
    from .embeddings.paths import ModelNotAvailable, default_models_dir

    out = Path(args.out) if args.out else default_models_dir() / STATIC_MODEL_NAME
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] >= 5.0:
            last[0] = now
            print(f"models: distilling {done}/{total} tokens", file=sys.stderr)

    try:
        r = build_static_model(out, force=args.force, progress=progress)
    except ModelNotAvailable as exc:
        print(f"rb-streams: {exc}", file=sys.stderr)
        return 2
    if r.built:
        print(
            f"models: built {r.path} ({r.tokens} tokens x {r.dim} dims, "
            f"explained variance {r.explained_variance_ratio:.3f}) in {r.seconds:.1f}s",
            file=sys.stderr,
        )
    else:
        print(f"models: {r.path} is up to date", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rb-streams", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    w = sub.add_parser("worker", help="run the Faust worker")
    _add_settings_flags(w)
    w.set_defaults(func=cmd_worker)

    r = sub.add_parser("replay", help="run wire events (JSONL) through the core, write decisions (JSONL)")
    r.add_argument("file", help="input JSONL, one wire event per line ('-' for stdin)")
    r.add_argument("-o", "--output", help="output JSONL (default stdout)")
    r.add_argument("--deadletter", help="write dead-letter records here (JSONL)")
    r.add_argument("--max-event-bytes", type=int, default=Settings.max_event_bytes)
    r.add_argument("--max-thought-chars", type=int, default=Settings.max_thought_chars)
    r.add_argument(
        "--max-runs-per-org",
        type=int,
        default=None,
        help="as the worker's RB_MAX_RUNS_PER_ORG (0: no cap); the control key comes from RB_CONTROL_KEY",
    )
    r.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="as the worker's RB_PARTITIONS (the run cap is counted per partition)",
    )
    r.add_argument(
        "--monitor-profiles",
        default="",
        help="JSON/TOML file of custom monitor weight profiles (as the worker's RB_MONITOR_PROFILES)",
    )
    r.add_argument("--patterns", default=None, help="local pattern store directory to query (read-only use)")
    r.add_argument("--qdrant-url", default=None, help="query a Qdrant server instead")
    r.add_argument(
        "--patterns-seed", default=None, help="JSONL patterns loaded into the store (in memory by default)"
    )
    r.set_defaults(func=cmd_replay)

    pt = sub.add_parser("patterns", help="load, list, delete guidance patterns; store stats")
    pt.add_argument("action", choices=["load", "list", "delete", "stats"])
    pt.add_argument("items", nargs="*", help="load: JSONL file(s); delete: pattern ids")
    pt.add_argument("--tier", choices=["e1", "e2", "e3"], help="list: only this tier")
    pt.add_argument("--org", help="list: only this org's E1 patterns")
    pt.add_argument("--json", action="store_true", help="list: one JSON record per line")
    _add_settings_flags(pt)
    pt.set_defaults(func=cmd_patterns)

    d = sub.add_parser("demo", help="local broker + worker + simulated agents, live view")
    d.add_argument("--runs", type=int, default=7)
    d.add_argument("--steps", type=int, default=30)
    d.add_argument("--port", type=int, default=9092)
    d.add_argument("--keep-broker", action="store_true", help="leave a broker the demo started running")
    d.set_defaults(func=cmd_demo)

    sim = sub.add_parser("simulate", help="publish simulated agent runs to the configured broker")
    sim.add_argument("--runs", type=int, default=7, help="concurrent agents")
    sim.add_argument("--steps", type=int, default=30, help="steps per run")
    sim.add_argument("--forever", action="store_true", help="each agent starts a new run when one ends")
    _add_settings_flags(sim)
    sim.set_defaults(func=cmd_simulate)

    c = sub.add_parser("config", help="print the effective configuration")
    _add_settings_flags(c)
    c.set_defaults(func=cmd_config)

    k = sub.add_parser("kafka", help="start/stop/status of the local Maven-resolved broker")
    k.add_argument("action", choices=["install", "start", "stop", "restart", "status"])
    k.add_argument("--port", type=int, default=9092)
    k.add_argument("--data-dir", default=None)
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
    args = build_parser().parse_args(argv)
    try:
        rc: Any = args.func(args)
    except SettingsError as exc:
        print(f"rb-streams: invalid configuration: {exc}", file=sys.stderr)
        return 2
    except KafkaAuthError as exc:
        print(f"rb-streams: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)
