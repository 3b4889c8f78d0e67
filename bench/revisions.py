"""Other commits' trees beside this one, for the benchmarks that measure commits in turn
(`bench.cost_compare`, `bench.replay_cost`)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

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
