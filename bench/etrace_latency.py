"""E-trace retrieval latency per tier, embedded (local-mode) Qdrant on disk.

    .venv/bin/python -m bench.etrace_latency --patterns 2000 --orgs 20 --queries 200

The store holds the starter library plus synthetic patterns (E2 spread over the failure
types, E1 spread over `--orgs` organisations). Queries are thought windows of the synthetic
agent fleet (last 3 thoughts for E1, last 5 for E2). Per tier: the whole answer as the
worker runs it (MiniLM query embedding, caches off, + vector search), the embedding alone,
the vector search alone; baseline in the same run: a numpy brute-force cosine top-k over the
same vectors in memory. Also: E2 narrowed by failure type through its own collection (the
layout the worker uses) vs a payload filter on the all-E2 collection (what the layout avoids;
local mode evaluates filters in Python).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import STARTER, add_rounds_args, commit, log, machine, pct, spread
from streams.core.etrace_rules import E1_THOUGHTS, E2_THOUGHTS, Query, query_text
from streams.embeddings.models import load_models
from streams.etraces.pattern_store import E2_ALL, QdrantPatternStore, e1_collection, e2_collection
from streams.etraces.patterns import FAILURE_TYPE_VALUES, Pattern, read_file
from streams.local.simulate import BEHAVIOURS, MODULES, SYMBOLS, trajectory

_SITUATIONS = [
    "I keep running {cmd} and it fails with {err}; let me try {sym} once more.",
    "The {mod} module raises {err} when {sym} is called; I should read the code first.",
    "I changed {mod} and I think the fix for {sym} is done, the tests probably pass.",
    "Summarising progress on {mod}: {sym} still fails with {err}, same as before.",
    "Let me also look at the {other} config and the CI pipeline while I am here.",
    "Now I will rewrite the {other} template; the {mod} bug can wait.",
]
_ERRS = [
    "KeyError: 'expires_at'",
    "TimeoutError",
    "AssertionError",
    "ImportError: cannot import name",
    "TypeError",
]
_OTHER = ["nginx", "terraform", "onboarding email", "docker", "grafana", "billing"]


def synthetic(n_e2: int, n_e1: int, orgs: int, rnd: random.Random) -> list[Pattern]:
    out: list[Pattern] = []

    def text() -> str:
        return rnd.choice(_SITUATIONS).format(
            cmd=f"pytest tests/test_{rnd.randint(1, 99)}.py",
            err=rnd.choice(_ERRS),
            sym=rnd.choice(SYMBOLS),
            mod=rnd.choice(MODULES),
            other=rnd.choice(_OTHER),
        )

    for i in range(n_e2):
        ft = rnd.choice([*FAILURE_TYPE_VALUES, None])
        out.append(
            Pattern(
                id=f"syn-e2-{i}", tier="e2", title=f"e2 {i}", guidance="g", situation=text(), failure_type=ft
            )
        )
    for i in range(n_e1):
        out.append(
            Pattern(
                id=f"syn-e1-{i}",
                tier="e1",
                title=f"e1 {i}",
                guidance="g",
                situation=text(),
                org_id=f"org-{i % orgs}",
            )
        )
    return out


def windows(n: int) -> list[tuple[str, str]]:
    """(E1 query, E2 query) pairs from the synthetic fleet's thoughts."""
    out: list[tuple[str, str]] = []
    i = 0
    while len(out) < n:
        _, steps = trajectory(BEHAVIOURS[i % len(BEHAVIOURS)], 30, seed=1000 + i)
        thoughts: list[str] = []
        for s in steps:
            thoughts.append(str(s["thought"])[:240])
            if len(thoughts) >= 5 and len(out) < n:
                out.append((query_text(thoughts, E1_THOUGHTS) or "", query_text(thoughts, E2_THOUGHTS) or ""))
        i += 1
    return out


def timed(fn: Any, reps: list[Any]) -> list[float]:
    out = []
    for r in reps:
        t0 = time.perf_counter()
        fn(r)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patterns", type=int, default=2000, help="synthetic patterns (E2 70%%, E1 30%%)")
    ap.add_argument("--orgs", type=int, default=20)
    ap.add_argument("--queries", type=int, default=200)
    add_rounds_args(ap, "queries over the same store")
    args = ap.parse_args()

    rnd = random.Random(7)
    emb = load_models().full
    tmp = Path(tempfile.mkdtemp(prefix="rb-etrace-bench-"))
    try:
        store = QdrantPatternStore(emb, path=tmp / "store")
        starter = read_file(STARTER)[0]
        syn = synthetic(int(args.patterns * 0.7), args.patterns - int(args.patterns * 0.7), args.orgs, rnd)
        t0 = time.perf_counter()
        store.upsert(
            starter + syn, progress=lambda d, t: log(f"  loaded {d}/{t}") if d % 500 == 0 or d == t else None
        )
        load_s = time.perf_counter() - t0
        log(f"store: {len(starter) + len(syn)} patterns in {load_s:.1f}s")
        qs = windows(args.queries)
        org = "org-0"
        c = store.client

        def vectors(name: str) -> np.ndarray:
            pts, _ = c.scroll(name, limit=100_000, with_vectors=True)
            return np.array([p.vector for p in pts], dtype=np.float32)

        mats = {name: vectors(name) for name in (E2_ALL, e1_collection(org), e2_collection("loop"))}

        def floor(name: str, k: int) -> list[float]:
            m = mats[name]
            vecs = emb.embed([q[1] for q in qs[:50]])
            return timed(lambda v: np.argsort(-(m @ v))[:k], list(vecs))

        def no_cache(fn: Any) -> Any:
            def run(x: Any) -> Any:
                emb.cache_clear()
                return fn(x)

            return run

        def measure() -> list[tuple[str, str, list[float], float | None]]:
            rows: list[tuple[str, str, list[float], float | None]] = []
            for tier, name, idx, q_of in (
                ("e1", e1_collection(org), 0, lambda t: Query("e1", t, org, None, 1, 0.8)),
                ("e2", E2_ALL, 1, lambda t: Query("e2", t, None, None, 2, 0.7)),
                ("e2 loop", e2_collection("loop"), 1, lambda t: Query("e2", t, None, "loop", 2, 0.7)),
            ):
                texts = [q[idx] for q in qs]
                log(f"{tier}: {len(mats[name])} vectors in {name}")
                full = timed(no_cache(lambda t, q_of=q_of: store.answer(q_of(t))), texts)
                emb_t = timed(no_cache(lambda t: emb.embed([t])), texts)
                vecs = [emb.embed([t])[0].tolist() for t in texts]
                k = 1 if tier == "e1" else 2
                search = timed(
                    lambda v, name=name, k=k: c.query_points(name, query=v, limit=k * 4, with_payload=True),
                    vecs,
                )
                fl = floor(name, k * 4)
                base = pct(fl, 50)
                rows.append((tier, "answer (embed + search)", full, None))
                rows.append((tier, "query embedding (MiniLM)", emb_t, None))
                rows.append((tier, "vector search (Qdrant local)", search, pct(search, 50) / base))
                rows.append((tier, "numpy brute force (floor)", fl, 1.0))

            from qdrant_client import models

            flt = models.Filter(
                must=[models.FieldCondition(key="failure_type", match=models.MatchValue(value="loop"))]
            )
            vecs = [emb.embed([q[1]])[0].tolist() for q in qs]
            filtered = timed(
                lambda v: c.query_points(E2_ALL, query=v, limit=8, query_filter=flt, with_payload=True), vecs
            )
            per_type = timed(
                lambda v: c.query_points(e2_collection("loop"), query=v, limit=8, with_payload=True), vecs
            )
            rows.append(
                (
                    "e2 loop",
                    "payload filter on all-E2 (avoided)",
                    filtered,
                    pct(filtered, 50) / pct(per_type, 50),
                )
            )

            store._e3 = None

            def e3_uncached(_: object) -> object:
                store._e3 = None  # the 10 s cache dropped: every answer scrolls
                return store.answer(Query("e3", None, None, None, 32, None))

            e3_cold = timed(e3_uncached, list(range(50)))
            e3_hot = timed(lambda _: store.answer(Query("e3", None, None, None, 32, None)), list(range(200)))
            rows.append(("e3", "scroll (cache cold)", e3_cold, None))
            rows.append(("e3", "cached (10 s)", e3_hot, None))
            return rows

        rounds = []
        for i in range(max(1, args.repeat)):
            log(f"round {i + 1}/{max(1, args.repeat)}")
            rounds.append(measure())
        store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"\nmachine: {machine()}  date: {time.strftime('%Y-%m-%d')}  commit: {commit()}  "
        f"patterns: {len(starter) + len(syn)} (load {load_s:.1f}s)"
    )
    if len(rounds) > 1:
        print(f"(medians of {len(rounds)} rounds of {args.queries} queries; min to max in the last columns)")
    print("| tier | what | p50 ms | p99 ms | ratio (p50) | p50 min to max | p99 min to max |")
    print("|---|---|---:|---:|---:|---:|---:|")
    figures: dict[str, dict[str, float]] = {}
    for i, (tier, what, _, ratio0) in enumerate(rounds[0]):
        p50 = spread([pct(r[i][2], 50) for r in rounds])
        p99 = spread([pct(r[i][2], 99) for r in rounds])
        ratios = [x for r in rounds if (x := r[i][3]) is not None]
        ratio = "" if ratio0 is None else f"{statistics.median(ratios):.1f}x"
        print(
            f"| {tier} | {what} | {p50['median']:.3f} | {p99['median']:.3f} | {ratio} | "
            f"{p50['min']:.3f} to {p50['max']:.3f} | {p99['min']:.3f} to {p99['max']:.3f} |"
        )
        figures[f"{tier} {what} p50 ms"] = p50
        figures[f"{tier} {what} p99 ms"] = p99
    f = figures
    print(
        f"SUMMARY etraces: E2 answer p50 {f['e2 answer (embed + search) p50 ms']['median']:.1f} ms / "
        f"p99 {f['e2 answer (embed + search) p99 ms']['median']:.1f} ms "
        f"(embedding {f['e2 query embedding (MiniLM) p50 ms']['median']:.1f} ms, "
        f"search {f['e2 vector search (Qdrant local) p50 ms']['median']:.2f} ms); "
        f"E1 p50 {f['e1 answer (embed + search) p50 ms']['median']:.1f} ms; "
        f"E3 cached {f['e3 cached (10 s) p50 ms']['median']:.3f} ms, "
        f"cold {f['e3 scroll (cache cold) p50 ms']['median']:.2f} ms"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"figures": figures}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
