"""A redelivered copy of the step a run's state last decided re-sends that decision, byte for
byte (issue 38: a worker restarted on its own data directory found a state whose decision had
died in the producer's buffer, and answered its redelivered step with nothing)."""

from __future__ import annotations

import orjson

from streams.core.engine import Engine
from streams.core.events import Limits
from streams.core.state import TraceState
from streams.replay import Replayer
from tests.driving import sealed
from tests.factories import b, run_finish, run_start, step
from tests.models import semantics
from tests.unit.core.test_boundary import RAISING

LIMITS = Limits()
SEM = semantics()


class Table(dict[str, TraceState]):
    """The worker's local store: what `seal` gives is stored, as bytes, as RocksDB holds it."""

    def __init__(self, engine: Engine | None = None) -> None:
        super().__init__()
        self.policy = engine.policy if engine else None

    def feed(self, ev: dict, now: float):
        res = sealed(b(ev), self.get, LIMITS, now, SEM, policy=self.policy)
        if res.state_bytes is not None:
            self[res.run_id] = TraceState.decode(res.state_bytes)
        return res


def test_a_copy_of_the_last_step_resends_its_decision_byte_for_byte_and_the_run_goes_on_unchanged():
    crashed, clean = Table(), Table()
    events = [run_start("r"), *(step("r", k, difficulty=0.1 * k) for k in range(1, 6))]
    sent: list[bytes] = []
    for k, ev in enumerate(events[:4]):
        sent.append(crashed.feed(ev, now=10.0 + k).decision_bytes)
        clean.feed(ev, now=10.0 + k)
    # Killed here: step 3's state is in the local store, its decision never left the producer.
    # The restarted worker reads step 3 again, later (another processed_ts if recomputed).
    again = crashed.feed(events[3], now=99.0)
    assert again.duplicate and again.rejection is None
    assert again.decision_bytes == sent[3]  # step 3's decision as first made, processed_ts too
    assert again.decision == orjson.loads(sent[3]) and again.decision["step"] == 3
    assert crashed["r"].duplicates == 1 and crashed["r"].last_step == 3
    # Steps 4 and 5 get exactly the decisions of a run nobody killed.
    for k, ev in enumerate(events[4:], start=4):
        assert crashed.feed(ev, now=10.0 + k).decision_bytes == clean.feed(ev, now=10.0 + k).decision_bytes


def test_a_copy_of_the_run_start_before_any_step_resends_decision_zero():
    t = Table()
    first = t.feed(run_start("r", token_budget=500), now=1.0).decision_bytes
    again = t.feed(run_start("r", token_budget=500), now=2.0)
    assert again.duplicate and again.decision_bytes == first
    t.feed(step("r", 1), now=3.0)
    assert t.feed(run_start("r"), now=4.0).decision_bytes is None  # step 1 came: 0 went out


def test_a_copy_of_an_older_step_gets_nothing_it_was_answered_before_the_next_step_came():
    t = Table()
    for k, ev in enumerate([run_start("r"), step("r", 1), step("r", 2)]):
        t.feed(ev, now=float(k))
    res = t.feed(step("r", 1), now=9.0)
    assert res.duplicate and res.decision is None and res.decision_bytes is None


def test_copies_after_run_finish_are_copies_the_last_resent_and_only_a_new_step_refused():
    t = Table()
    for k, ev in enumerate([run_start("r"), step("r", 1), step("r", 2)]):
        last = t.feed(ev, now=float(k)).decision_bytes
    assert t.feed(run_finish("r"), now=5.0).finishes_run
    assert t.feed(step("r", 2), now=6.0).decision_bytes == last
    # A worker restarted from an old commit reads the run's earlier steps again: copies, no
    # dead-letters; a step the run never had is still refused.
    old = t.feed(step("r", 1), now=7.0)
    assert old.duplicate and old.rejection is None and old.decision_bytes is None
    assert t.feed(step("r", 3), now=8.0).rejection.reason == "run_finished"


def test_a_copy_of_a_step_that_failed_internally_resends_no_other_steps_decision():
    t = Table(Engine(RAISING, SEM, LIMITS))
    t.feed(run_start("r", fsm_transition="unit-raises-at-0.5"), now=1.0)
    assert t.feed(step("r", 1, difficulty=0.1), now=2.0).decision["step"] == 1
    assert t.feed(step("r", 2, difficulty=0.5), now=3.0).rejection.reason == "internal_error"
    again = t.feed(step("r", 2, difficulty=0.5), now=4.0)  # its number is used up: a copy
    assert again.duplicate and again.decision_bytes is None  # not step 1's decision


def test_a_state_from_before_the_field_decodes_and_its_copies_get_nothing():
    t = Table()
    for k, ev in enumerate([run_start("r"), step("r", 1)]):
        t.feed(ev, now=float(k))
    old = orjson.loads(t["r"].encode())
    del old["last_decision"]
    t["r"] = TraceState.decode(orjson.dumps(old))
    assert t["r"].last_decision is None
    assert t.feed(step("r", 1), now=5.0).decision_bytes is None
    assert t.feed(step("r", 2), now=6.0).decision["step"] == 2
    assert t.feed(step("r", 2), now=7.0).decision["step"] == 2  # kept again from here on


def test_replay_resends_the_same_copy_the_worker_does():
    lines = [b(run_start("r")), b(step("r", 1)), b(step("r", 2)), b(step("r", 2)), b(step("r", 1))]
    clock = iter(float(i) for i in range(10))
    rp = Replayer(sem=SEM, clock=lambda: next(clock))
    out = [d for d, _ in rp.run(lines)]
    assert [None if d is None else d["step"] for d in out] == [0, 1, 2, 2, None]
    assert orjson.dumps(out[3]) == orjson.dumps(out[2])  # processed_ts of the first copy


def test_a_decision_that_would_put_the_state_over_its_cap_is_sent_but_not_kept():
    t = Table()
    t.feed(run_start("r"), now=1.0)
    with_it = sealed(b(step("r", 1)), t.get, LIMITS, 2.0, SEM)
    cap = len(with_it.state_bytes) - 1  # room for the state, not for the decision in it too
    small = Limits(max_state_bytes=cap)
    res = sealed(b(step("r", 1)), t.get, small, 2.0, SEM)
    assert res.rejection is None and res.decision_bytes == with_it.decision_bytes
    assert res.state.last_decision is None and len(res.state_bytes) <= cap
    t["r"] = res.state
    assert sealed(b(step("r", 1)), t.get, small, 3.0, SEM).decision_bytes is None  # as before
