"""Other commits' trees beside this one, for the benchmarks that measure commits in turn
(`bench.cost_compare`, `bench.replay_cost`)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import commit

HERE = Path(__file__).resolve().parents[1]


class RevisionError(Exception):
    """A ref that is not a commit, or that cannot be checked out."""


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True, check=False)


@contextmanager
def checked_out(refs: Sequence[str]) -> Iterator[dict[str, Path]]:
    """Each ref in a throwaway worktree (named by its short sha), then this tree (named by
    `commit()` and "(here)"), in that order; the worktrees are removed on the way out."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-revisions-"))
    trees: dict[str, Path] = {}
    try:
        for ref in refs:
            got = git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
            if got.returncode != 0:
                raise RevisionError(f"{ref}: not a commit")
            sha = got.stdout.strip()
            tree = tmp / sha[:12]
            if git("worktree", "add", "--detach", str(tree), sha).returncode != 0:
                raise RevisionError(f"cannot check out {ref}")
            trees[sha[:12]] = tree
        trees[f"{commit()} (here)"] = HERE
        yield trees
    finally:
        for tree in trees.values():
            if tree != HERE:
                git("worktree", "remove", "--force", str(tree))
        shutil.rmtree(tmp, ignore_errors=True)
        git("worktree", "prune")


class MeasureError(Exception):
    """A child process measuring one tree failed or printed no result."""


def measure_in(tree: Path, child: str, *args: str, what: str) -> dict[str, Any]:
    """Run the Python code `child` with `args` in a process of its own, in `tree` (its own
    package on the path), and return the JSON object it prints on its `RESULT ` line."""
    proc = subprocess.run(
        [sys.executable, "-c", child, *args],
        cwd=tree,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        tail = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:] or ["(no output)"]
        raise MeasureError(f"{what} at {tree} failed (exit {proc.returncode}): {tail[0]}")
    return dict(json.loads(line[len("RESULT ") :]))


def print_table(got: dict[str, dict[str, list[float]]], rows: Sequence[str]) -> None:
    """One row per label in `rows`, one column per tree of `got` (as `checked_out` named them):
    the median (min to max), and its ratio to the first tree's median."""
    names = list(got)
    print("| us per step, median (min to max) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for row in rows:
        first = got[names[0]][row]
        base = statistics.median(first) if first else 0.0
        cells = []
        for name in names:
            xs = got[name][row]
            if not xs:
                cells.append("-")
                continue
            med = statistics.median(xs)
            ratio = f", {med / base:.2f}x" if name != names[0] and base else ""
            cells.append(f"{med:.0f} ({min(xs):.0f} to {max(xs):.0f}){ratio}")
        print(f"| {row} | " + " | ".join(cells) + " |")
