"""Every count in a floor text is true of the steps it names (issue 48, item 10): each claimed
repeat is checked against the results it names, kept exactly (`bench.floor_claims`: every
line of every result, no Bloom filter), over runs drawn to repeat, recombine and extend their
results."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.floor_claims import Exact, check
from streams.core.monitors import progress as P
from streams.core.reading.features import extract

POOL = [f"def handler_{c}(request): return route(request, '{c}')" for c in "abcdefghijklmnopqrstuvwxyz"]
BIG = [f"config entry {c}{d} = enabled" for c in "abcdef" for d in "uvwxyz"]  # 36 lines
COMMANDS = ["cat app/routes.py", "ls app", "grep -rn handler app", "sed -n 1,40p app/routes.py"]


def _result(kind: str, picks: list[int], novel: int) -> str:
    if kind == "empty":
        return ""
    if kind == "big":  # many lines seen before and one that never was: under 1 line in 20 new
        return "\n".join([*BIG, f"config entry novel{novel} = disabled"])
    return "\n".join(POOL[i] for i in picks)


STEP = st.tuples(
    st.sampled_from(["small", "small", "small", "big", "empty", "edit", "unrun"]),
    st.lists(st.integers(0, len(POOL) - 1), min_size=1, max_size=8),
    st.integers(0, 3),  # the command
    st.integers(0, 2),  # the novel line of a big result (few values: they come back)
    st.sampled_from(["", "", "coder", "tester"]),  # the agent
)


def _event(n: int, kind: str, picks: list[int], cmd: int, novel: int, agent: str) -> dict[str, Any]:
    ev: dict[str, Any] = {"step": n, "ts": 1_700_000_000.0 + 30 * n, "agent": agent}
    if kind == "edit":
        new = POOL[picks[0]].replace("route", "dispatch")
        inp = {"command": "str_replace", "path": "app/routes.py", "old_str": POOL[picks[0]], "new_str": new}
        return {
            **ev,
            "action": "str_replace_editor",
            "action_input": inp,
            "observation": "The file was edited.",
        }
    out = "ERROR: the previous command is still running; it was not executed" if kind == "unrun" else None
    return {
        **ev,
        "action": "execute_bash",
        "action_input": {"command": COMMANDS[cmd]},
        "observation": out if out is not None else _result(kind, picks, novel),
    }


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, min_size=4, max_size=40))
def test_every_count_in_a_floor_text_is_true_of_the_steps_it_names(steps):
    st_, exact = P.ProgressState(), Exact()
    for n, s in enumerate(steps, start=1):
        f = extract(_event(n, *s), 20_000)
        exact.add(f)
        st_, found = P.observe(st_, f)
        if found is not None and found.text:
            assert check(found.text, exact.facts.get(f.agent, []), f.step) == [], found.text


def test_a_step_with_one_new_line_among_many_is_not_said_to_repeat():
    """The found case: a result that differs from every earlier one (a line the agent never
    saw, among 36 it had) is stale, and said to show almost nothing new, not to repeat."""
    st_, exact = P.ProgressState(), Exact()
    found = None
    for n in range(1, 7):
        f = extract(_event(n, "big", [0], 0, n, ""), 20_000)
        exact.add(f)
        st_, found = P.observe(st_, f)
    assert found is not None and found.fired and found.text
    assert "only repeated output" not in found.text
    assert "showed almost nothing new (under 1 line in 20)" in found.text
    assert "brought almost nothing new" in found.text
    assert check(found.text, exact.facts[""], 6) == []


def test_a_result_seen_whole_before_is_said_to_repeat():
    st_ = P.ProgressState()
    found = None
    for n in range(1, 6):
        cmd = ("ls", "ls -a")[n % 2]  # two calls, one answer: the streak's, not the very same call's
        ev = {"step": n, "action": "execute_bash", "action_input": {"command": cmd}, "observation": POOL[0]}
        st_, found = P.observe(st_, extract(ev, 20_000))
    assert found is not None and found.text and "only repeated output you had already seen" in found.text


def test_a_record_written_before_the_new_counts_is_read():
    """A run state from before OLD, FEW and RECENT: its agent records are padded, not refused."""
    st_, _ = P.observe(P.ProgressState(), extract({"step": 1, "action": "ls", "observation": "a"}, 20_000))
    old = P.ProgressState(st_.seen, st_.seen_old, st_.seen_n, [a[: P.OLD] for a in st_.agents])
    again, _ = P.observe(old, extract({"step": 2, "action": "ls", "observation": "a"}, 20_000))
    assert len(again.agents[0]) == P.RECENT + 1
