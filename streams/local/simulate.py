"""Synthetic coding-agent trajectories: realistic step texts for the demo, benchmarks and tests.

Each run follows one behaviour (healthy, looping, flailing, skipping verification, drifting,
contradicting itself, re-summarising without progress), with texts that vary from step to step (file names, line numbers,
counts), so embedding caches do not flatter the monitors' cost the way a handful of repeated
strings would.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

BEHAVIOURS = ("healthy", "looping", "flailing", "skipper", "drifter", "contradicts", "recapper")

MODULES = [
    "auth/session",
    "billing/invoice",
    "exports/csv_writer",
    "api/routes",
    "cache/store",
    "db/migrations",
]
SYMBOLS = ["load_token", "refresh", "paginate", "render_row", "get_user", "apply_discount", "flush"]
ERRORS = ["KeyError: 'expires_at'", "AssertionError: assert 99 == 100", "TypeError: 'NoneType' object"]
OFF_TOPIC = [
    "The marketing site's hero image looks blurry on retina screens; let me tweak the srcset in {f}.",
    "I should upgrade the Slack bot in {f} to the new events API while I am here.",
    "The Kubernetes node pool could use spot instances; editing {f} to cut the cloud bill.",
    "Let me rewrite the onboarding email template in {f} with a friendlier tone.",
]
SEARCHES = ["session timeout", "session expiry", "session token expiration", "token lifetime setting"]


def task_for(module: str) -> str:
    return f"Fix the failing test in tests/test_{module.split('/')[1]}.py: {module} raises on expired tokens"


def _bash(thought: str, cmd: str, out: str, error: bool = False) -> dict[str, Any]:
    return {
        "thought": thought,
        "action": "execute_bash",
        "action_input": {"command": cmd},
        "observation": out,
        "observation_is_error": error,
    }


def _view(thought: str, path: str, rnd: random.Random) -> dict[str, Any]:
    first = rnd.randint(1, 400)
    body = "\n".join(f"{first + i}\t    x_{rnd.randint(0, 999)} = {rnd.choice(SYMBOLS)}()" for i in range(8))
    return {
        "thought": thought,
        "action": "str_replace_editor",
        "action_input": {"command": "view", "path": path},
        "observation": body,
    }


def _edit(thought: str, path: str, rnd: random.Random) -> dict[str, Any]:
    n = rnd.randint(1, 999)
    return {
        "thought": thought,
        "action": "str_replace_editor",
        "action_input": {"command": "str_replace", "path": path, "old_str": f"v{n}", "new_str": f"v{n + 1}"},
        "observation": f"The file {path} has been edited.",
    }


def _finish(thought: str) -> dict[str, Any]:
    return {"thought": thought, "action": "finish", "action_input": {"message": thought}}


def _healthy(rnd: random.Random, module: str, k: int) -> dict[str, Any]:
    path = f"src/{module}.py"
    test = f"tests/test_{module.split('/')[1]}.py"
    sym = rnd.choice(SYMBOLS)
    line = rnd.randint(10, 500)
    phase = k % 6
    if phase == 0:
        return _view(f"Let me read {sym} in {path} around line {line}.", path, rnd)
    if phase == 1:
        out = f"{rnd.randint(1, 3)} failed, {rnd.randint(5, 40)} passed in {rnd.uniform(0.5, 9):.2f}s"
        return _bash(f"Run the {sym} tests to see the current failure.", f"pytest {test} -q -k {sym}", out)
    if phase == 2:
        return _bash(
            f"Where else is {sym} called?",
            f"grep -rn '{sym}(' src/ | head -{rnd.randint(5, 30)}",
            "\n".join(f"src/{rnd.choice(MODULES)}.py:{rnd.randint(1, 900)}: {sym}()" for _ in range(4)),
        )
    if phase == 3:
        return _edit(f"Handle the missing expiry in {sym} (line {line}) instead of raising.", path, rnd)
    if phase == 4:
        out = f"{rnd.randint(20, 60)} passed in {rnd.uniform(0.5, 9):.2f}s"
        return _bash(f"Re-run the tests after changing {sym}.", f"pytest {test} -q", out)
    return _view(f"Check the fixture that builds tokens for {sym} (line {line}).", "tests/conftest.py", rnd)


def _step(rnd: random.Random, behaviour: str, module: str, k: int, n: int) -> dict[str, Any]:
    late = k > n // 2
    if behaviour == "looping" and late:
        term = SEARCHES[k % len(SEARCHES)]
        return {
            "thought": f"Search the code for the {term} once more.",
            "action": "search_code",
            "action_input": {"query": term},
            "observation": "No matches found.",
        }
    if behaviour == "flailing" and late:
        if k % 2 and k <= n - 8:  # the last eight: the test re-run, failing every time (a streak: SLOW)
            return _edit(f"Try another fix for the failure (attempt {k}).", f"src/{module}.py", rnd)
        return _bash(
            "Run the failing test again.",
            f"pytest tests/test_{module.split('/')[1]}.py -q -x --tb=line -p no:randomly -k case{k}",
            f"E   {ERRORS[0]}\n1 failed in {rnd.uniform(0.5, 3):.2f}s",
            error=True,
        )
    if behaviour == "recapper" and late and k < n - 1:
        return {
            "thought": rnd.choice(["", "Context is long; condensing."]),
            "action": "condense",
            "action_input": None,
            "observation": (
                f"Summary so far: {module} raises KeyError on tokens without expires_at. I read "
                f"src/{module}.py and the fixture; next I will make the expiry check tolerant."
            ),
        }
    if behaviour == "skipper" and k == n:
        return _finish("Fixed: the expired token no longer raises. All tests pass.")
    if behaviour == "skipper" and k == n - 1:
        return _edit("Make the expiry check tolerant of a missing field.", f"src/{module}.py", rnd)
    if behaviour == "drifter" and late:
        f = f"site/{rnd.choice(['hero', 'bot', 'nodes', 'email'])}_{rnd.randint(1, 99)}.cfg"
        return _view(rnd.choice(OFF_TOPIC).format(f=f), f, rnd)
    if behaviour == "contradicts" and k in (n // 3, n // 3 + 1):
        # A finding asserted, then denied in the next message with nothing run in between: a
        # contradiction, not an update on evidence.
        if k == n // 3:
            thought = "I confirmed that the token cache returns stale tokens after a refresh."
        else:
            thought = (
                "So the token cache does not return stale tokens after a refresh; the clock mock in "
                "conftest.py freezes time at 1970."
            )
        return {"thought": thought, "action": None, "action_input": None, "observation": None}
    if k == n - 1:
        out = f"{rnd.randint(100, 400)} passed in {rnd.uniform(5, 30):.2f}s"
        return _bash("Run the whole suite before finishing.", "pytest -q", out)
    if k == n:
        return _finish("The failing test passes now and the full suite is green.")
    return _healthy(rnd, module, k)


def trajectory(behaviour: str, steps: int, seed: int = 0) -> tuple[str, Iterator[dict[str, Any]]]:
    """(task, step payloads 1..steps) of one synthetic run."""
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"unknown behaviour {behaviour!r}; expected one of {', '.join(BEHAVIOURS)}")
    rnd = random.Random(f"{behaviour}:{seed}")
    module = rnd.choice(MODULES)

    def gen() -> Iterator[dict[str, Any]]:
        for k in range(1, steps + 1):
            s = _step(rnd, behaviour, module, k, steps)
            s["tokens"] = rnd.randint(200, 2500)
            yield s

    return task_for(module), gen()
