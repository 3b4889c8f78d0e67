"""Per-step monitor work and run-state size stay flat as a run grows to 5,000 steps."""

from __future__ import annotations

import random

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .trajectories import Run, bash, edit, finish, step, view

WORDS = [
    "session",
    "cache",
    "token",
    "retry",
    "index",
    "query",
    "export",
    "orders",
    "billing",
    "invoice",
    "parser",
    "config",
    "auth",
    "timeout",
    "worker",
    "queue",
    "schema",
    "migration",
    "handler",
    "router",
    "template",
    "upload",
    "download",
    "report",
]


# Texts come from a fixed pool so that embeddings are cached after the first few hundred
# steps: the bound under test is the work per step (vectors compared), not the model's speed.
TOPICS = [" ".join(random.Random(k).choice(WORDS) for _ in range(8)) for k in range(400)]


def random_step(rng: random.Random, i: int) -> dict:
    topic = rng.choice(TOPICS)
    path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}_{rng.randrange(400)}.py"
    kind = rng.randrange(9)
    if kind == 0:
        return view(path, thought=f"Reading {path} about {topic}.")
    if kind == 1:
        return edit(path, "a", "b", thought=f"Changing {topic}.")
    if kind == 2:
        return bash(f"pytest tests/{rng.choice(WORDS)} -q", f"{rng.randrange(9)} failed", thought=topic)
    if kind == 3:
        return step(f"The root cause is the {topic}. I confirmed that the {rng.choice(WORDS)} is missing.")
    if kind == 4:
        return step("", "condense", None, f"Summary: {topic}")
    if kind == 5:
        return step(
            f"Let me search {topic}",
            "search_code",
            {"query": topic},
            rng.choice(["No matches found.", topic]),
        )
    if kind == 6:
        return finish(f"Done with {topic}.")
    if kind == 7:
        return step(f"Summary so far: {topic}")
    return bash(
        f"tool_{i % 997} --flag {rng.choice(WORDS)}", topic, thought=f"Trying {topic} with a new tool."
    )


def _state_bytes(run: Run) -> int:
    return len(orjson.dumps(run.state))


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_work_and_state_size_are_bounded_up_to_5000_steps(sem, seed):
    rng = random.Random(seed)
    run = Run(sem, task="Fix the flaky export of orders " + " ".join(rng.choice(WORDS) for _ in range(20)))
    sizes: dict[int, int] = {}
    work: list[int] = []
    for i in range(1, 5001):
        before = sem.compared
        run.feed(random_step(rng, i))
        work.append(sem.compared - before)
        if i in (100, 1000, 5000):
            sizes[i] = _state_bytes(run)
        run.results.clear()  # the harness's own memory, not the run state's
    assert max(work) <= 60, "per-step comparisons are capped by the bounded windows"
    # flat: the last thousand steps cost what the first thousand did (means: one step's
    # maximum depends on which random steps the window happens to hold)
    assert sum(work[4000:]) / 1000 <= sum(work[:1000]) / 1000 * 1.2 + 1
    assert sizes[5000] <= sizes[1000] * 1.15 + 512
    assert sizes[5000] < 40_000


def random_chat_step(rng: random.Random, i: int) -> dict:
    """A group chat: experts' messages with figures and quoted values, code runs with output."""
    topic = rng.choice(TOPICS)
    agent = rng.choice(["Planner", "Analyst", "Checker", "Executor"])
    if rng.randrange(3) == 0:
        return {
            "agent": agent,
            "thought": f"Running the {topic} query.",
            "action": "execute_code",
            "action_input": f"print(count('{rng.choice(WORDS)}'))",
            "observation": f"exitcode: 0\n{rng.randrange(10**6)} {topic} {rng.randrange(10**4)}",
        }
    if rng.randrange(20) == 0:
        return {"agent": agent, "thought": f"The answer is **{rng.randrange(10**5)}**. TERMINATE"}
    return {
        "agent": agent,
        "thought": f'The {topic} total is {rng.randrange(10**5)} for "{rng.choice(WORDS)}".',
    }


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_a_long_group_chat_keeps_its_answer_memory_bounded(seed):
    """verification_skip's answer check in a chat: two evidence filters, a claim, a few facts."""
    from streams.core.monitors import verification
    from streams.core.monitors.base import Context
    from streams.core.reading.features import extract

    rng = random.Random(seed)
    state = verification.MONITOR.initial()
    ctx = Context("How many orders were exported in March?", {})
    sizes: dict[int, int] = {}
    for i in range(1, 5001):
        state, _ = verification.MONITOR.evaluate(
            state, extract({"step": i, **random_chat_step(rng, i)}, 20_000), ctx, None
        )
        if i in (1000, 5000):
            sizes[i] = len(orjson.dumps(state.__dict__))
    assert sizes[5000] <= sizes[1000] * 1.15 + 512
    assert sizes[5000] < 5_000
