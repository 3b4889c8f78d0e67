"""Embedder candidates for the monitors: throughput, single-text latency, paraphrase similarity.

    .venv/bin/python -m bench.embedders [--torch-python /tmp/refenv/bin/python] [--no-build]

Candidates: the static model (model2vec-style, distilled by streams.embeddings.model_build), MiniLM on
our numpy forward pass (fp32), and optionally sentence-transformers on torch for comparison
(only if `--torch-python` names an interpreter that has it: never the project venv). Caches
are off, so every figure is a real forward pass. Writes bench/results/embedders.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import log, machine, pct, results_dir
from streams.embeddings.minilm import MiniLMEmbedder
from streams.embeddings.model_build import STATIC_MODEL_NAME, build_static_model
from streams.embeddings.paths import default_models_dir, minilm_model_dir
from streams.embeddings.static import StaticEmbedder
from streams.embeddings.vectors import cosine

PAIRS = [
    ("search for auth middleware config", "look up configuration of authentication middleware"),
    ("session timeout", "session expiry"),
    ("session timeout", "session token expiration"),
    ("run the unit tests", "execute pytest"),
    ("session timeout", "compile the rust crate"),  # negative pair
]

_FILES = ["src/auth/middleware.py", "app/session.py", "tests/test_login.py", "crates/core/src/lib.rs"]
_TEMPLATES = [
    "Let me open {f} to see how the session timeout is handled.",
    "The test in {f} still fails with KeyError('user_id'); the fixture probably doesn't set it.",
    "I'll grep for SESSION_TIMEOUT across the repo, starting from {f}.",
    "Running pytest -k login again to check whether the change to {f} fixed the 401s.",
    "I think the issue might be in the middleware, but I'm not sure; it could also be the cache layer "
    "in {f} that keeps stale tokens after the expiry window, which would explain the intermittent failures.",
    "Edited {f}: the token expiry now uses the configured timeout instead of the hard-coded 300 seconds.",
    "cargo build fails in {f} with error[E0308]: mismatched types, expected `u64`, found `i64`.",
    "Summary so far: auth config lives in settings.py, {f} reads it at import time, tests mock it.",
    "done",
    "Now I need to check whether {f} is imported anywhere else before renaming the function.",
    "All tests pass after the change to {f}; submitting the fix.",
    "Looking up the configuration of the authentication middleware in {f}.",
    "Hmm, that didn't work. Let me try a different approach: patch the clock in {f} instead.",
    "The stack trace points at line 42 of {f}: 'NoneType' object has no attribute 'expires_at'.",
    "Re-reading {f} to confirm the edit landed where I expected.",
    "Let me search for where the session expiry is computed; {f} looks like the obvious candidate.",
]
THOUGHTS = [t.format(f=f) for t in _TEMPLATES for f in _FILES]  # 64 realistic agent thoughts


def _throughput(
    embed: Callable[[Sequence[str]], Any], texts: list[str], min_s: float, min_reps: int
) -> float:
    embed(texts)  # warm-up
    reps, t0 = 0, time.perf_counter()
    while reps < min_reps or time.perf_counter() - t0 < min_s:
        embed(texts)
        reps += 1
    return reps * len(texts) / (time.perf_counter() - t0)


def _latencies_ms(embed: Callable[[Sequence[str]], Any], texts: list[str], rounds: int) -> list[float]:
    embed(texts[:1])
    out = []
    for _ in range(rounds):
        for t in texts:
            t0 = time.perf_counter()
            embed([t])
            out.append((time.perf_counter() - t0) * 1000.0)
    return out


def measure(name: str, embed: Callable[[Sequence[str]], Any], *, min_s: float, rounds: int) -> dict[str, Any]:
    log(f"{name}: throughput (batch of {len(THOUGHTS)})")
    eps = _throughput(embed, THOUGHTS, min_s=min_s, min_reps=3)
    log(f"{name}: single-text latency ({rounds} x {len(THOUGHTS)} calls)")
    lat = _latencies_ms(embed, THOUGHTS, rounds)
    sims = {f"{a} | {b}": round(cosine(*np.asarray(embed([a, b]), dtype=np.float32)), 3) for a, b in PAIRS}
    r = {
        "name": name,
        "emb_per_s": round(eps, 1),
        "single_p50_ms": pct(lat, 50),
        "single_p95_ms": pct(lat, 95),
    }
    r["sims"] = sims
    log(
        f"{name}: {eps:,.0f} embeddings/s (batch 64), single p50 {r['single_p50_ms']:.3f} ms, "
        f"p95 {r['single_p95_ms']:.3f} ms"
    )
    return r


_TORCH_SCRIPT = r"""
import json, sys, time
import numpy as np
import torch
from sentence_transformers import SentenceTransformer
torch.set_num_threads(int(sys.argv[2]))
texts, pairs, min_s, rounds = json.loads(sys.stdin.read())
m = SentenceTransformer(sys.argv[1], device="cpu")
enc = lambda xs: m.encode(xs, batch_size=64, convert_to_numpy=True)
enc(texts)
reps, t0 = 0, time.perf_counter()
while reps < 3 or time.perf_counter() - t0 < min_s:
    enc(texts); reps += 1
eps = reps * len(texts) / (time.perf_counter() - t0)
lat = []
for _ in range(rounds):
    for t in texts:
        t0 = time.perf_counter(); enc([t]); lat.append((time.perf_counter() - t0) * 1000)
sims = {}
for a, b in pairs:
    va, vb = enc([a, b]); sims[f"{a} | {b}"] = round(float(va @ vb), 3)
print(json.dumps({"eps": eps, "lat": lat, "sims": sims, "torch": torch.__version__}))
"""


def measure_torch(python: str, *, min_s: float, rounds: int) -> dict[str, Any]:
    name = "sentence-transformers (torch, CPU)"
    log(f"{name}: running in {python}")
    proc = subprocess.run(
        [python, "-c", _TORCH_SCRIPT, str(minilm_model_dir()), str(os.cpu_count() or 1)],
        input=json.dumps([THOUGHTS, PAIRS, min_s, rounds]),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
    )
    d = json.loads(proc.stdout.strip().splitlines()[-1])
    lat = d["lat"]
    r = {
        "name": f"{name} {d['torch']}",
        "emb_per_s": round(d["eps"], 1),
        "single_p50_ms": pct(lat, 50),
        "single_p95_ms": pct(lat, 95),
        "sims": d["sims"],
    }
    log(f"{name}: {d['eps']:,.0f} embeddings/s (batch 64), single p50 {r['single_p50_ms']:.3f} ms")
    return r


def measure_build() -> dict[str, Any]:
    log("static model: distilling from MiniLM into a temporary dir (force)")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        rep = build_static_model(Path(tmp) / STATIC_MODEL_NAME, force=True)
        wall = time.perf_counter() - t0
    log(f"static model: built {rep.tokens} tokens x {rep.dim} dims in {wall:.1f}s")
    return {"seconds": round(wall, 1), "tokens": rep.tokens, "dim": rep.dim}


def render(
    results: list[dict[str, Any]], build: dict[str, Any] | None, cmd: str, load_s: dict[str, float]
) -> str:
    lines = [
        "# Embedders",
        "",
        f"Command: `{cmd}`  ",
        f"Machine: {machine()}  ",
        f"Date: {time.strftime('%Y-%m-%d %H:%M')}; caches off, {len(THOUGHTS)} realistic agent thoughts "
        "(16 templates x 4 file names, 10-40 tokens).",
        "",
        "| candidate | embeddings/s (batch of 64) | single text p50 | single text p95 |",
        "|---|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['name']} | {r['emb_per_s']:,.0f} | {r['single_p50_ms']:.3f} ms | {r['single_p95_ms']:.3f} ms |"
        )
    lines += ["", "Cosine similarity:", "", "| pair | " + " | ".join(r["name"] for r in results) + " |"]
    lines.append("|---|" + "---:|" * len(results))
    for a, b in PAIRS:
        key = f"{a} | {b}"
        neg = " (negative)" if "rust" in b else ""
        lines.append(f"| {a} / {b}{neg} | " + " | ".join(f"{r['sims'][key]:.3f}" for r in results) + " |")
    lines.append("")
    if load_s:
        lines.append("Load time: " + ", ".join(f"{k} {v:.2f} s" for k, v in load_s.items()) + ".")
    if build:
        lines.append(
            f"Static model build (`rb-streams models build --force`): {build['seconds']} s wall for "
            f"{build['tokens']} tokens x {build['dim']} dims (numpy forward pass, 2 BLAS threads)."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--torch-python", help="interpreter with torch + sentence-transformers (a throwaway venv)"
    )
    ap.add_argument("--no-build", action="store_true", help="skip timing a full static-model build")
    ap.add_argument("--min-seconds", type=float, default=3.0, help="minimum time per throughput figure")
    ap.add_argument("--rounds", type=int, default=3, help="passes over the 64 texts for latency")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    load_s: dict[str, float] = {}
    t0 = time.perf_counter()
    minilm = MiniLMEmbedder()
    load_s["MiniLM"] = time.perf_counter() - t0
    build_static_model(default_models_dir() / STATIC_MODEL_NAME, minilm)  # no-op when present
    t0 = time.perf_counter()
    static = StaticEmbedder(default_models_dir() / STATIC_MODEL_NAME)
    load_s["static"] = time.perf_counter() - t0

    results = [
        measure(
            f"static {STATIC_MODEL_NAME} (numpy)", static.embed, min_s=args.min_seconds, rounds=args.rounds
        ),
        measure("MiniLM-L6-v2 numpy fp32", minilm.embed, min_s=args.min_seconds, rounds=args.rounds),
    ]
    if args.torch_python:
        results.append(measure_torch(args.torch_python, min_s=args.min_seconds, rounds=args.rounds))
    build = None if args.no_build else measure_build()

    for a, b in PAIRS:
        key = f"{a} | {b}"
        print(f"cosine  {key:<80} " + "  ".join(f"{r['sims'][key]:.3f}" for r in results))
    cmd = ".venv/bin/python -m bench.embedders" + (
        f" --torch-python {args.torch_python}" if args.torch_python else ""
    )
    md = render(results, build, cmd, load_s)
    out = results_dir()
    (out / "embedders.md").write_text(md, encoding="utf-8")
    (out / "embedders.json").write_text(
        json.dumps({"results": results, "build": build, "load_s": load_s, "machine": machine()}, indent=2),
        encoding="utf-8",
    )
    print(md)
    log(f"wrote {out / 'embedders.md'}")
    print(
        "SUMMARY embedders: "
        + "; ".join(
            f"{r['name']} {r['emb_per_s']:,.0f}/s, single p50 {r['single_p50_ms']:.2f} ms" for r in results
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
