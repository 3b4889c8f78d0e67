"""claim_contradiction: conclusions that contradict earlier ones."""

from __future__ import annotations

from streams.core.monitors.contradiction import claims_of

from .trajectories import Run, bash, step

CONTRA = "claim_contradiction"


def test_claims_are_extracted_with_polarity_and_cause():
    claims = claims_of(
        "I ran the query. I confirmed that the index is missing on orders.created_at. Let me check more."
    )
    assert len(claims) == 1
    topic, polarity, is_cause, _ = claims[0]
    assert polarity == -1 and "present" in topic and not is_cause
    ((_, pol, cause, _),) = claims_of("The root cause is the connection pool being exhausted.")
    assert cause and pol == 1


def test_opposite_conclusion_on_the_same_fact_fires(sem):
    run = Run(sem, task="Find why the orders report is slow")
    run.feed(step("I checked the schema. I confirmed that the index on orders.created_at is present."))
    run.feed(bash("psql -c 'EXPLAIN ...'", "Seq Scan on orders"))
    res = run.feed(step("Looking at the plan, I found that the index on orders.created_at is missing."))
    assert CONTRA in res.fired
    assert "step 1" in res.text


def test_mutually_exclusive_root_causes_fire(sem):
    run = Run(sem, task="Users are logged out after 5 minutes")
    run.feed(step("The root cause is the session TTL being set to 300 seconds in settings.py."))
    run.feed(bash("grep -rn TTL src/", "src/settings.py:4: SESSION_TTL = 3600"))
    res = run.feed(step("The root cause is a race condition in the Redis connection pool during failover."))
    assert CONTRA in res.fired
    assert "root cause" in res.text


def test_acknowledged_revision_is_not_a_contradiction(sem):
    run = Run(sem)
    run.feed(step("The root cause is the session TTL being set to 300 seconds in settings.py."))
    res = run.feed(
        step("Actually, I was wrong: the root cause is a race condition in the Redis connection pool.")
    )
    assert CONTRA not in res.fired


def test_consistent_conclusions_do_not_fire(sem):
    run = Run(sem)
    run.feed(step("I confirmed that the migration adds the created_at index."))
    run.feed(step("This means the report query can use the index."))
    run.feed(step("So the slowness comes from the N+1 queries in the serializer."))
    assert not run.fired_anywhere(CONTRA)


def test_unrelated_conclusions_with_opposite_polarity_do_not_fire(sem):
    run = Run(sem)
    run.feed(step("I confirmed that the feature flag is enabled in production."))
    res = run.feed(step("I found that the CSV export is missing the header row."))
    assert CONTRA not in res.fired
