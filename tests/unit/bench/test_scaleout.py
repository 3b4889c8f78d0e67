"""bench.scaleout's bookkeeping: every valid event's decision counted once per (run, step),
re-sends compared byte for byte (and but for the wall clock), the longest pause in a
partition's decisions."""

from __future__ import annotations

import orjson

from bench.scaleout import Tally, expected_keys, longest_gap


def test_expected_keys_are_each_runs_start_and_steps() -> None:
    assert expected_keys("r0", 2, 2) == {(f"r0-{i}", k) for i in range(2) for k in (0, 1, 2)}


def test_a_complete_drain_has_nothing_missing_duplicated_or_differing() -> None:
    t = Tally()
    for key in sorted(expected_keys("r", 3, 4)):
        assert t.add(key, f"{key}".encode())
    got = t.check(expected_keys("r", 3, 4))
    assert got["expected"] == got["decided"] == 15
    assert (got["missing"], got["unexpected"], got["duplicates"], got["differing"]) == (0, 0, 0, 0)


def d(step: int, ts: float = 1.0, inject: bool = False) -> bytes:
    return orjson.dumps({"run_id": "r-0", "step": step, "inject": inject, "processed_ts": ts})


def test_re_sends_are_identical_restamped_or_differing() -> None:
    t = Tally()
    assert t.add(("r-0", 0), d(0))
    assert t.add(("r-0", 1), d(1))
    assert t.add(("r-0", 2), d(2))
    assert not t.add(("r-0", 1), d(1))  # re-sent from the stored state: byte-identical
    assert not t.add(("r-0", 2), d(2, ts=9.0))  # computed again: only the wall clock differs
    assert not t.add(("r-0", 0), d(0, ts=9.0, inject=True))  # another decision
    got = t.check({("r-0", 0), ("r-0", 1), ("r-0", 2), ("r-0", 3)})
    assert (got["duplicates"], got["identical"], got["restamped"]) == (3, 1, 1)
    assert got["differing"] == 1 and got["differing_examples"] == [("r-0", 0)]
    assert got["missing"] == 1 and got["missing_examples"] == [("r-0", 3)]
    assert t.first[("r-0", 0)] == d(0)  # the first copy is what is kept


def test_a_decision_nobody_expected_is_counted_apart() -> None:
    t = Tally()
    t.add(("r-9", 3), b"x")
    got = t.check({("r-0", 0)})
    assert (got["unexpected"], got["missing"], got["decided"]) == (1, 1, 0)


def test_longest_gap_is_the_longest_pause_between_sorted_stamps() -> None:
    assert longest_gap([]) == longest_gap([5.0]) == 0.0
    assert longest_gap([3.0, 1.0, 1.5, 9.0, 9.5]) == 6.0
