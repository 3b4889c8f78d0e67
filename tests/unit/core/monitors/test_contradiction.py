"""claim_contradiction: one agent asserting and denying the same finding with nothing new between;
a claim revised after new evidence, a plan, a place or a new failure after a fix is an update."""

from __future__ import annotations

from typing import Any

from streams.core.monitors import contradiction
from streams.core.monitors.base import Context, Finding
from streams.core.monitors.contradiction import ContradictionState, claims_of, is_mechanism
from streams.core.reading.features import extract

from .trajectories import Run, bash, edit, step, view

CONTRA = "claim_contradiction"
PRESENT = "I confirmed that the index on orders.created_at is present."
MISSING = "So the index on orders.created_at is missing."


def test_claims_are_extracted_with_polarity_and_cause():
    claims = claims_of(
        "I ran the query. I confirmed that the index is missing on orders.created_at. Let me check more."
    )
    assert len(claims) == 1
    topic, polarity, is_cause, _ = claims[0]
    assert polarity == -1 and "present" in topic and not is_cause
    ((_, pol, cause, _),) = claims_of("The root cause is the connection pool being exhausted.")
    assert cause and pol == 1


def test_a_finding_denied_with_nothing_run_between_fires_quoting_both(sem):
    run = Run(sem, task="Find why the orders report is slow")
    run.feed(step(PRESENT))
    res = run.feed(step(MISSING))
    assert CONTRA in res.fired
    assert "At step 1" in res.text and "is present" in res.text and "is missing" in res.text
    assert "Nothing ran between the two" in res.text


def test_a_command_that_returned_only_old_output_between_is_named_as_no_news(sem):
    run = Run(sem)
    run.feed(bash("psql -c '\\d orders'", "Indexes: orders_created_at_idx"))
    run.feed(bash("psql -c '\\d orders'", "Indexes: orders_created_at_idx", thought=PRESENT))
    res = run.feed(step(MISSING))
    assert CONTRA in res.fired
    assert "Nothing new came in between: `execute_bash` (step 2) returned no new output" in res.text


def test_a_new_result_between_the_claims_makes_the_later_one_an_update(sem):
    run = Run(sem)
    run.feed(step(PRESENT))
    run.feed(bash("psql -c 'EXPLAIN SELECT ...'", "Seq Scan on orders"))
    res = run.feed(step(MISSING))
    assert CONTRA not in res.fired


def test_a_file_read_or_an_edit_between_the_claims_is_new_evidence(sem):
    for between in (view("db/schema.sql", "12  CREATE INDEX ..."), edit("db/schema.sql", "a", "b")):
        run = Run(sem)
        run.feed(step(PRESENT), between)
        assert CONTRA not in run.feed(step(MISSING)).fired


def test_an_edit_without_output_still_changes_what_can_be_concluded(sem):
    run = Run(sem)
    run.feed(bash("sed -i 's/a/b/' db/schema.sql", "", thought=PRESENT))
    assert CONTRA not in run.feed(step(MISSING)).fired


def test_sentences_of_one_thought_are_thinking_aloud_not_a_contradiction(sem):
    run = Run(sem)
    assert CONTRA not in run.feed(step(f"{PRESENT} {MISSING}")).fired


def test_another_agent_speaking_between_is_news_to_the_first(sem):
    run = Run(sem)
    run.feed({**step(PRESENT), "agent": "Analyst"})
    run.feed({**step("The DBA dump lists no index on orders."), "agent": "DBA"})
    assert CONTRA not in run.feed({**step(MISSING), "agent": "Analyst"}).fired


def test_one_agent_contradicting_itself_in_a_chat_fires_and_says_no_one_spoke(sem):
    run = Run(sem)
    run.feed({**step("Let us look at the orders table."), "agent": "DBA"})
    run.feed({**step(PRESENT), "agent": "Analyst"})
    res = run.feed({**step(MISSING), "agent": "Analyst"})
    assert CONTRA in res.fired and "no one else spoke" in res.text


def test_two_agents_disagreeing_is_not_a_self_contradiction(sem):
    run = Run(sem)
    run.feed({**step(PRESENT), "agent": "Analyst"})
    assert CONTRA not in run.feed({**step(MISSING), "agent": "Reviewer"}).fired


def test_acknowledged_revision_is_not_a_contradiction(sem):
    run = Run(sem)
    run.feed(step(PRESENT))
    res = run.feed(step("Actually, I was wrong: I found that the index on orders.created_at is missing."))
    assert CONTRA not in res.fired


def test_a_plan_is_not_a_finding_to_contradict():
    assert (
        claims_of("The problem is that we need to handle the dimensionless case in the Function branch.")
        == []
    )
    assert claims_of("The issue is how the leading gamma matrices are handled.") == []


def test_a_cause_must_state_a_mechanism_not_a_place():
    assert not is_mechanism("the `hash_lineset` function.")
    assert not is_mechanism("the `_iter_sims` method where it checks for duplicate code.")
    assert not is_mechanism("the interaction between the loader and the executor.")
    assert not is_mechanism("we need to modify how the AlterField operation is handled.")
    assert is_mechanism("the `lru_cache` keeps entries keyed on the argument only.")
    assert is_mechanism("when numbers are tiny, they're printed in scientific notation.")


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


def test_a_negation_inside_another_proposition_on_the_same_subject_is_no_flip(sem):
    run = Run(sem)
    run.feed(
        step("The problem is that we sort the centers, then take midpoints between consecutive centers.")
    )
    res = run.feed(step("The problem is that we sort the centers but do not clip the outer edges."))
    assert CONTRA not in res.fired


def _causes(sem: Any, *thoughts_and_steps: dict[str, Any]) -> Finding:
    """Feed steps through the monitor with the different-cause branch on; the last finding."""
    mon = contradiction.monitor(different_causes=True)
    st, found = ContradictionState(), Finding(0.0)
    for k, ev in enumerate(thoughts_and_steps, 1):
        st, found = mon.evaluate(st, extract({"step": k, **ev}, 20_000), Context(None, {}), sem)
    return found


TTL = "The root cause is that the session TTL is set to 300 seconds in settings.py."
RACE = "The root cause is that the Redis connection pool drops sessions during failover."


def test_different_root_causes_are_off_by_default(sem):
    run = Run(sem)
    run.feed(step(TTL))
    assert CONTRA not in run.feed(step(RACE)).fired


def test_different_root_causes_with_nothing_between_fire_when_turned_on(sem):
    found = _causes(sem, step(TTL), step(RACE))
    assert found.fired and "named the root cause" in found.text and "Nothing ran between" in found.text


def test_a_second_cause_after_new_evidence_or_about_our_fix_is_an_update(sem):
    grep = bash("grep -rn TTL src/", "src/settings.py:4: SESSION_TTL = 3600")
    assert not _causes(sem, step(TTL), grep, step(RACE)).fired
    ours = "The problem is that our previous fix drops the session when the pool reconnects."
    assert not _causes(sem, step(TTL), step(ours)).fired
    itself = "The issue is not with the TTL itself: the Redis pool drops sessions during failover."
    assert not _causes(sem, step(TTL), step(itself)).fired


def test_a_cause_naming_code_inside_the_earlier_one_is_a_refinement(sem):
    first = "The root cause is that `SessionStore.load` returns expired sessions."
    deeper = "The root cause is that `load` compares the expiry against naive local time."
    assert not _causes(sem, step(first), step(deeper)).fired


def test_state_stays_bounded_over_many_quiet_claims(sem):
    run = Run(sem)
    for k in range(60):
        run.feed(step(f"I confirmed that worker {k} handles the queue_{k} jobs."))
        run.feed(bash("uptime", "up 3 days"))
    st = run.state["contradiction"]
    assert len(st.claims) <= contradiction.MAX_CLAIMS and len(st.seen) <= contradiction.SEEN_KEPT
    assert len(st.quiet) <= contradiction.QUIET_KEPT
