from __future__ import annotations

import pytest

from streams.core.events import Limits
from streams.core.retention import (
    EvictRequest,
    RunsHeld,
    evict_request,
    expiry,
    parse_evict,
    retention_clock,
    verified,
    version,
)
from streams.replay import Replayer
from tests.driving import sealed
from tests.factories import b, run_finish, run_start, step
from tests.models import semantics


@pytest.mark.parametrize(
    ("finished", "age", "expected"),
    [
        (True, 59.9, None),
        (True, 60.0, "finished"),
        (False, 60.0, None),  # unfinished runs go by the idle timeout
        (False, 299.9, None),
        (False, 300.0, "idle"),
    ],
)
def test_finished_runs_expire_after_retention_and_quiet_runs_after_the_idle_timeout(finished, age, expected):
    assert expiry(finished, 1000.0, 1000.0 + age, 60.0, 300.0) == expected


def test_zero_disables_each_rule():
    assert expiry(True, 0.0, 1e9, 0.0, 300.0) is None
    assert expiry(False, 0.0, 1e9, 60.0, 0.0) is None
    assert expiry(False, None, 1e9, 60.0, 300.0) is None


def test_the_clock_is_worker_time_not_the_agents_ts():
    states: dict = {}
    r = sealed(b(run_start("r", ts=5.0)), states.get, Limits(), 1000.0, semantics())
    assert r.state is not None and r.state.last_event_ts == 5.0
    assert retention_clock(r.state) == 1000.0
    states["r"] = r.state
    r2 = sealed(b(step("r", 1, ts=6.0)), states.get, Limits(), 1010.0, semantics())
    assert r2.state is not None and retention_clock(r2.state) == 1010.0
    assert retention_clock(states["r"]) == 1000.0  # the looked-up state is never changed
    r3 = sealed(b(step("r", 1, ts=7.0)), lambda _: r2.state, Limits(), 1020.0, semantics())
    assert r3.duplicate and r3.state is not r2.state and retention_clock(r2.state) == 1010.0


def test_every_applied_event_changes_the_version():
    states: dict = {}
    versions = []
    for ev in [run_start("r"), step("r", 1), step("r", 1), run_finish("r"), run_finish("r")]:
        r = sealed(b(ev), states.get, Limits(), 1.0, semantics())
        assert r.state is not None
        states["r"] = r.state
        versions.append(version(r.state))
    assert len(set(versions)) == len(versions)


def test_requests_round_trip_and_other_events_are_not_requests():
    raw = evict_request("run-é", (7, True, 1, 1_700_000_000.5))
    assert parse_evict(raw) == EvictRequest("run-é", (7, True, 1, 1_700_000_000.5))
    assert parse_evict(raw.decode()) == EvictRequest("run-é", (7, True, 1, 1_700_000_000.5))
    assert parse_evict(b(step("r", 1))) is None
    assert parse_evict(b'{"type":"rb.evict","run_id":"x"}') is None  # malformed: left to validation
    assert parse_evict(None) is None


def test_replay_applies_a_recorded_eviction_only_if_the_run_has_not_moved_on():
    rp = Replayer(sem=semantics(), clock=lambda: 1.0)
    for ev in [run_start("a"), step("a", 1), run_finish("a"), run_start("c"), step("c", 1)]:
        rp.feed(b(ev))
    stale = evict_request("c", version(rp.states["c"]))
    rp.feed(b(step("c", 2)))
    assert rp.feed(evict_request("a", version(rp.states["a"]))) == (None, None)
    assert rp.feed(stale) == (None, None)
    assert "a" not in rp.states and "c" in rp.states
    decision, dl = rp.feed(b(step("a", 2)))
    assert decision is None and dl is not None and dl["reason"] == "unknown_run"


def test_signed_requests_verify_only_under_their_key():
    raw = evict_request("r", (3, False, 0, None), key="k1")
    req = parse_evict(raw)
    assert req is not None and req.mac is not None
    assert verified(req, "k1") and not verified(req, "k2")
    assert verified(parse_evict(evict_request("r", (3, False, 0, None))), "")  # no key: not checked
    assert not verified(parse_evict(evict_request("r", (3, False, 0, None))), "k1")  # unsigned
    forged = parse_evict(raw.replace(b'"version":[3,', b'"version":[4,'))
    assert forged is not None and not verified(forged, "k1")


def test_requests_with_inexact_versions_are_not_requests():
    assert parse_evict(b'{"type":"rb.evict","run_id":"r","version":[1.0,false,0]}') is None
    assert parse_evict(b'{"type":"rb.evict","run_id":"r","version":[1,0,0]}') is None
    assert parse_evict(b'{"type":"rb.evict","run_id":7,"version":[1,false,0]}') is None


def test_replay_under_a_control_key_refuses_unsigned_and_wrongly_keyed_requests():
    rp = Replayer(sem=semantics(), clock=lambda: 1.0, control_key="k")
    rp.feed(b(run_start("a")))
    ver = version(rp.states["a"])
    decision, dl = rp.feed(evict_request("a", ver))
    assert decision is None and dl["reason"] == "invalid_control" and "RB_CONTROL_KEY" in dl["detail"]
    decision, dl = rp.feed(evict_request("a", ver, key="k"), key=b"other")
    assert dl["reason"] == "invalid_control" and "not keyed" in dl["detail"]
    assert "a" in rp.states
    assert rp.feed(evict_request("a", ver, key="k"), key=b"a") == (None, None)
    assert "a" not in rp.states


def test_runs_held_split_the_cap_over_partitions_and_rebuild_from_the_table():
    held = RunsHeld(5, lambda rid: int(rid[-1]) % 2, partitions=2)
    assert held.per_partition == 3  # ceil(5 / 2)
    for rid in ("a0", "b0", "c0"):
        assert held.refusal("acme", rid) is None
        held.add(rid, "acme")
    assert held.refusal("acme", "d0") is not None and held.refusal("acme", "d1") is None
    held.reset({"a0": "acme", "x1": "globex"})
    assert held.held("acme") == 1 and held.held("globex") == 1
    assert RunsHeld(0, lambda rid: 0, partitions=8).refusal("acme", "r") is None  # 0: no cap


def test_a_flood_of_distinct_orgs_is_stopped_by_the_overall_cap_per_partition():
    """One run per org passes any per-org cap: the overall cap counts every org together."""
    held = RunsHeld(10_000, lambda rid: int(rid.rsplit("-", 1)[1]) % 4, partitions=4, max_runs=10)
    assert held.total_per_partition == 3 and held.capacity == 12  # ceil(10 / 4) per partition
    refused = []
    for i in range(40):
        rid, org = f"flood-{i}", f"org-{i}"
        why = held.refusal(org, rid)
        if why is None:
            held.add(rid, org)
        else:
            refused.append(why)
    assert len(held) == 12 and len(refused) == 28  # 3 per partition, whatever the orgs
    assert {r for r, _ in refused} == {"table_full"}
    assert "RB_MAX_RUNS" in refused[0][1] and "3 per partition" in refused[0][1]
    held.remove("flood-0")  # an eviction frees its partition's share, and only that one
    assert held.refusal("org-new", "new-4") is None and held.refusal("org-new", "new-1") is not None
    held.add("new-4", "org-new")
    assert held.refusal("org-new", "again-0") is not None
    held.reset({"a-0": "x", "b-0": "y"})  # rebuilt from the table after a recovery: counts too
    assert held.refusal("z", "c-0") is None
    held.add("c-0", "z")
    full = held.refusal("w", "d-0")
    assert full is not None and full[0] == "table_full"


def test_the_per_org_cap_is_named_first_when_both_caps_are_full():
    held = RunsHeld(1, lambda rid: 0, partitions=1, max_runs=1)
    held.add("a", "acme")
    assert held.refusal("acme", "b")[0] == "too_many_runs"  # type: ignore[index]
    assert held.refusal("globex", "b")[0] == "table_full"  # type: ignore[index]
    assert RunsHeld(0, lambda rid: 0, partitions=8, max_runs=0).capacity == 0  # 0: no cap
