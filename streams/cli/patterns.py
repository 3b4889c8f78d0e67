"""`rb-streams patterns load|delete|list|stats`: the guidance pattern store."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from ..shared.logsafe import safe_for_log
from .common import UserError, _Bar, _print_json, _settings


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
