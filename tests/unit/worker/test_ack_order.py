from __future__ import annotations

from streams.worker.ack_order import AckOrder


def test_in_order_completion_acks_each_event_at_once():
    a: AckOrder[str] = AckOrder()
    for o in (5, 6, 7):
        a.received("p0", o)
    assert a.done("p0", 5, "e5") == ["e5"]
    assert a.done("p0", 6, "e6") == ["e6"]
    assert a.done("p0", 7, "e7") == ["e7"] and a.waiting() == 0


def test_a_later_event_waits_for_a_pending_earlier_one():
    a: AckOrder[str] = AckOrder()
    for o in (10, 11, 12, 13):
        a.received("p0", o)
    assert a.done("p0", 11, "e11") == []  # 10 still waits on E-traces
    assert a.done("p0", 13, "e13") == []
    assert a.done("p0", 10, "e10") == ["e10", "e11"]
    assert a.done("p0", 12, "e12") == ["e12", "e13"]
    assert a.waiting() == 0


def test_partitions_are_independent():
    a: AckOrder[str] = AckOrder()
    a.received("p0", 1)
    a.received("p1", 1)
    assert a.done("p1", 1, "q1") == ["q1"]
    assert a.waiting() == 1


def test_revoked_partitions_are_forgotten_and_late_completions_pass_through():
    a: AckOrder[str] = AckOrder()
    a.received("p0", 1)
    a.received("p0", 2)
    a.forget({"p0"})
    assert a.waiting() == 0
    assert a.done("p0", 2, "e2") == ["e2"]


def test_the_oldest_held_event_ages_until_released():
    now = [100.0]
    a: AckOrder[str] = AckOrder(clock=lambda: now[0])
    a.received("p0", 7)
    now[0] = 101.0
    a.received("p0", 8)
    a.received("p1", 3)
    now[0] = 130.0
    assert a.oldest_age() == {"p0": 30.0, "p1": 29.0}
    assert a.done("p0", 8, "e8") == []  # 7 still holds the partition back
    assert a.oldest_age()["p0"] == 30.0 and a.next_unreleased("p0") == 7
    assert a.done("p0", 7, "e7") == ["e7", "e8"]
    assert "p0" not in a.oldest_age() and a.next_unreleased("p0") == 9
    assert a.next_unreleased("p9") is None
    a.forget({"p1"})
    assert a.oldest_age() == {}
