"""E-trace retrieval rules (SPEC section 8), one by one, through the pure core."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from streams.core import etrace_rules
from streams.core.engine import Engine
from streams.core.etrace_rules import Answer, Hit, Query
from streams.core.events import Limits
from streams.core.render import MARKER
from streams.core.results import Decided, Finished
from streams.core.state import TraceState
from tests.driving import outcome

LIMITS = Limits()


def hit(pid: str, sim: float | None, tier: str = "e2", **payload: Any) -> Hit:
    return Hit(pid, sim, {"tier": tier, "pattern_id": pid, "title": pid, "guidance": f"do {pid}", **payload})


# -- model family -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("anthropic:claude-sonnet-4-5", "anthropic"),
        ("claude-3-5-haiku-latest", "anthropic"),
        ("openai:gpt-4.1-mini", "openai"),
        ("gpt-4o", "openai"),
        ("o3-mini", "openai"),
        ("google_genai:gemini-2.5-pro", "google"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta"),
        ("mistralai:mistral-large-latest", "mistral"),
        ("my-inhouse-model", "generic"),
        (None, "generic"),
    ],
)
def test_model_family_follows_the_model_id(model: str | None, family: str) -> None:
    assert etrace_rules.model_family(model) == family


# -- E1 gate ------------------------------------------------------------------------------


def test_e1_gate_opens_on_a_fire_now_or_composite_above_015() -> None:
    assert etrace_rules.e1_gate_open(True, ["semantic_loop"], 0.0, [])
    assert etrace_rules.e1_gate_open(True, [], 0.1501, [])
    assert not etrace_rules.e1_gate_open(True, [], 0.15, [])  # strictly above


def test_e1_gate_stays_open_two_steps_after_a_fire_then_closes() -> None:
    assert etrace_rules.e1_gate_open(True, [], 0.0, [["semantic_loop"], []])  # two steps ago
    assert etrace_rules.e1_gate_open(True, [], 0.0, [[], ["late_sprawl"]])  # previous step
    assert not etrace_rules.e1_gate_open(True, [], 0.0, [["semantic_loop"], [], []])  # three ago
    assert not etrace_rules.e1_gate_open(True, [], 0.0, [[], []])


def test_e1_gate_is_always_open_when_the_run_disabled_monitors() -> None:
    assert etrace_rules.e1_gate_open(False, [], 0.0, [])


# -- planning -----------------------------------------------------------------------------


def plan(**kw: Any) -> etrace_rules.Plan:
    args: dict[str, Any] = {
        "enabled": True,
        "fsm_state": "NORMAL",
        "org_id": "acme",
        "thoughts": [f"t{i}" for i in range(1, 6)],
        "e1_calls": 0,
        "e2_calls": 0,
        "gate_open": True,
        "failure_type": None,
        "family": "generic",
    }
    args.update(kw)
    return etrace_rules.plan_step(**args)


def test_e1_queries_the_last_3_thoughts_top_1_at_08_in_the_runs_org() -> None:
    (q1, q2) = plan().queries
    assert q1 == Query("e1", "t3\nt4\nt5", "acme", None, 1, 0.8)
    assert q2 == Query("e2", "t1\nt2\nt3\nt4\nt5", None, None, 2, 0.7)


def test_e2_is_narrowed_to_the_current_failure_type() -> None:
    (q,) = plan(gate_open=False, failure_type="loop").queries
    assert q.tier == "e2" and q.failure_type == "loop"


def test_nothing_is_queried_in_fast_or_when_e_traces_are_disabled() -> None:
    assert not plan(fsm_state="FAST")
    assert not plan(fsm_state="END")
    assert not plan(enabled=False)


def test_each_tier_is_called_at_most_once_per_run() -> None:
    assert [q.tier for q in plan(e1_calls=1).queries] == ["e2"]
    assert [q.tier for q in plan(e2_calls=1).queries] == ["e1"]
    assert not plan(e1_calls=1, e2_calls=1)


def test_closed_gate_means_no_e1_query() -> None:
    assert [q.tier for q in plan(gate_open=False).queries] == ["e2"]


def test_e3_only_on_the_first_call() -> None:
    (q,) = etrace_rules.plan_first_call(0, True, "generic").queries
    assert q == Query("e3", None, None, None, 32, None)
    assert not etrace_rules.plan_first_call(1, True, "generic")
    assert not etrace_rules.plan_first_call(0, False, "generic")


def test_thought_window_is_bounded_and_truncated() -> None:
    window: list[str] = []
    for i in range(50):
        window = etrace_rules.remember_thought(window, f"thought {i} " + "x" * 1000)
    assert len(window) == etrace_rules.THOUGHTS_KEPT
    assert all(len(t) <= etrace_rules.THOUGHT_CHARS_KEPT for t in window)
    assert window[-1].startswith("thought 49")
    assert etrace_rules.remember_thought(window, None) is window
    assert etrace_rules.remember_thought(window, "   ") is window


# -- selection ----------------------------------------------------------------------------

E1 = Query("e1", "q", "acme", None, 1, 0.8)
E2 = Query("e2", "q", None, None, 2, 0.7)


def test_e1_threshold_is_inclusive_at_08() -> None:
    assert [
        h.pattern_id for h in etrace_rules.select(E1, [hit("a", 0.8, "e1", org_id="acme")], "generic")
    ] == ["a"]
    assert etrace_rules.select(E1, [hit("a", 0.7999, "e1", org_id="acme")], "generic") == []


def test_e1_respects_the_patterns_own_gate_threshold() -> None:
    h = hit("a", 0.84, "e1", org_id="acme", gate_threshold=0.85)
    assert etrace_rules.select(E1, [h], "generic") == []
    h = hit("a", 0.86, "e1", org_id="acme", gate_threshold=0.85)
    assert len(etrace_rules.select(E1, [h], "generic")) == 1


def test_e1_never_returns_another_orgs_pattern_whatever_the_similarity() -> None:
    hits = [hit("g", 0.99, "e1", org_id="globex"), hit("a", 0.81, "e1", org_id="acme")]
    assert [h.pattern_id for h in etrace_rules.select(E1, hits, "generic")] == ["a"]
    assert etrace_rules.select(E1, [hit("g", 1.0, "e1", org_id="globex")], "generic") == []


def test_e1_top_1_and_e2_top_2_by_similarity() -> None:
    e1 = [hit(p, s, "e1", org_id="acme") for p, s in (("a", 0.81), ("b", 0.95), ("c", 0.9))]
    assert [h.pattern_id for h in etrace_rules.select(E1, e1, "generic")] == ["b"]
    e2 = [hit(p, s) for p, s in (("a", 0.71), ("b", 0.95), ("c", 0.9), ("d", 0.69))]
    assert [h.pattern_id for h in etrace_rules.select(E2, e2, "generic")] == ["b", "c"]


def test_e2_threshold_is_inclusive_at_07_and_filters_failure_type() -> None:
    assert len(etrace_rules.select(E2, [hit("a", 0.7)], "generic")) == 1
    assert etrace_rules.select(E2, [hit("a", 0.6999)], "generic") == []
    typed = Query("e2", "q", None, "loop", 2, 0.7)
    hits = [hit("x", 0.9, failure_type="drift"), hit("y", 0.8, failure_type="loop"), hit("z", 0.95)]
    assert [h.pattern_id for h in etrace_rules.select(typed, hits, "generic")] == ["y"]


def test_model_specific_patterns_apply_only_to_their_family() -> None:
    hits = [hit("a", 0.9, model_family="openai"), hit("b", 0.8, model_family="anthropic"), hit("c", 0.75)]
    assert [h.pattern_id for h in etrace_rules.select(E2, hits, "anthropic")] == ["b", "c"]


def test_e3_takes_up_to_32_rules_in_store_order() -> None:
    rules = [hit(f"r{i:02d}", None, "e3") for i in range(40)]
    got = etrace_rules.select(Query("e3", None, None, None, 32, None), rules, "generic")
    assert [h.pattern_id for h in got] == [f"r{i:02d}" for i in range(32)]


# -- rendering ----------------------------------------------------------------------------


def test_patterns_render_per_model_family() -> None:
    p = {
        "title": "Re-run fails",
        "guidance": "Change one thing per run.",
        "dead_ends": ["re-running"],
        "unlock": "read the diff",
    }
    xml = etrace_rules.render_pattern("e2", p, "anthropic")
    assert (
        xml.startswith('<guidance source="e2" title="Re-run fails">')
        and "<dead_ends>re-running</dead_ends>" in xml
    )
    md = etrace_rules.render_pattern("e2", p, "openai")
    assert (
        md.startswith("**Guidance for this situation: Re-run fails**")
        and "Known dead ends: re-running." in md
    )
    assert etrace_rules.render_pattern("e3", p, "openai") == "- Re-run fails: Change one thing per run."
    assert (
        etrace_rules.render_pattern("e3", p, "anthropic")
        == '<rule title="Re-run fails">Change one thing per run.</rule>'
    )


# -- through the engine -------------------------------------------------------------------


def start(run_id: str = "r1", **kw: Any) -> bytes:
    return orjson.dumps({"type": "run_start", "schema_version": 1, "run_id": run_id, **kw})


def step(k: int, thought: str = "Let me look at the failing test.", run_id: str = "r1", **kw: Any) -> bytes:
    return orjson.dumps(
        {"type": "step", "schema_version": 1, "run_id": run_id, "step": k, "thought": thought, **kw}
    )


class Run:
    """Drives one run through the engine (step, then seal) with scripted store answers.

    `plans[k]`: the tiers answered for decision k; `planned[k]`: the tiers decision k's step
    planned (kept pending, answered for decision k + 1)."""

    def __init__(self, sem: Any) -> None:
        self.states: dict[str, TraceState] = {}
        self.sem = sem
        self.plans: list[list[str]] = []
        self.planned: list[list[str]] = []

    def feed(self, raw: bytes, answer: Any = None) -> dict[str, Any]:
        out = outcome(raw, self.states.get, LIMITS, 0.0, self.sem)
        assert isinstance(out, Decided)
        plan, prefetch = out.effects.answer_now, out.effects.prefetch
        self.plans.append([q.tier for q in plan.queries] if plan else [])
        self.planned.append([q.tier for q in prefetch.queries] if prefetch else [])
        answers = (answer(plan) if answer else [Answer(q.tier) for q in plan.queries]) if plan else []
        r = Engine(None, self.sem, LIMITS).seal(out, answers)
        assert r.state is not None and r.decision is not None
        self.states[r.run_id or ""] = r.state
        return r.decision


def test_first_call_gets_e3_rules_in_one_reasonblocks_block(sem: Any) -> None:
    run = Run(sem)
    rules = (hit("r1", None, "e3"), hit("r2", None, "e3"))
    d = run.feed(start(model="gpt-4.1"), lambda p: [Answer("e3", rules)])
    assert run.plans == [["e3"]]
    assert d["inject"] and [i["source"] for i in d["injections"]] == ["e3", "e3"]
    assert d["injection_text"] == f"{MARKER}\n- r1: do r1\n\n- r2: do r2"
    assert d["injections"][0] == {
        "source": "e3",
        "text": "- r1: do r1",
        "pattern_id": "r1",
        "similarity": None,
    }
    assert run.states["r1"].e3_calls == 1 and run.states["r1"].injections_by_source == {"e3": 2}


def test_e2_planned_on_the_first_scored_step_is_injected_on_the_next_decision_then_never_again(
    sem: Any,
) -> None:
    run = Run(sem)
    run.feed(start(model="claude-sonnet-4-5", monitors_enabled=False))
    d1 = run.feed(step(1))
    assert run.planned[1] == ["e1", "e2"] and run.plans[1] == []  # monitors disabled: E1 gate open
    assert not d1["inject"]
    assert d1["skipped_reason"] == "e-traces E1, E2 retrieving: their guidance comes with the next decision"
    assert [q[0] for q in run.states["r1"].etraces_pending] == ["e1", "e2"]
    d = run.feed(
        step(2), lambda p: [Answer(q.tier, (hit("p", 0.75),) if q.tier == "e2" else ()) for q in p.queries]
    )
    assert run.plans[2] == ["e1", "e2"] and run.planned[2] == []
    assert [(i["source"], i["pattern_id"], i["similarity"]) for i in d["injections"]] == [("e2", "p", 0.75)]
    assert d["injection_text"].startswith(MARKER + '\n<guidance source="e2"')
    assert d["skipped_reason"] is None
    for k in range(3, 6):
        run.feed(step(k))
    assert run.plans[3:] == [[], [], []] and run.planned[3:] == [[], [], []]
    st = run.states["r1"]
    assert (st.e1_calls, st.e2_calls) == (1, 1) and st.recent_thoughts == []  # window dropped
    assert st.etraces_pending == []
    assert st.step_log[2][4] == ["e2"]  # the step log records the E-trace source


def test_pending_queries_are_those_of_the_thoughts_up_to_the_planning_step(sem: Any) -> None:
    run = Run(sem)
    run.feed(start())
    run.feed(step(1, "First I read the session module."))
    seen: list[Query] = []

    def answer(p: etrace_rules.Plan) -> list[Answer]:
        seen.extend(p.queries)
        return [Answer(q.tier) for q in p.queries]

    run.feed(step(2, "Now the token expiry check."), answer)
    assert [(q.tier, q.text) for q in seen] == [("e2", "First I read the session module.")]


def test_a_run_that_ends_drops_its_pending_queries(sem: Any) -> None:
    run = Run(sem)
    run.feed(start())
    run.feed(step(1))
    assert run.states["r1"].etraces_pending
    r = outcome(
        orjson.dumps({"type": "run_finish", "schema_version": 1, "run_id": "r1", "outcome": "success"}),
        run.states.get,
        LIMITS,
        0.0,
        sem,
    )
    assert isinstance(r, Finished)  # no decision, nothing to answer or start


def test_a_failed_query_says_why_and_does_not_use_up_the_call(sem: Any) -> None:
    run = Run(sem)
    run.feed(start())
    run.feed(step(1))
    d = run.feed(step(2), lambda p: [Answer(q.tier, error="timeout after 150 ms") for q in p.queries])
    assert run.plans[2] == ["e2"] and run.planned[2] == []  # not planned again while pending
    assert d["skipped_reason"] == "e-traces unavailable for E2: timeout after 150 ms"
    assert not d["inject"] and run.states["r1"].e2_calls == 0
    d = run.feed(step(3, "Reading the token module next."))  # planned again on the next step ...
    assert "e2" in run.planned[3]
    d = run.feed(step(4, "The expiry check compares naive datetimes."))  # ... answered on the next
    assert "e2" in run.plans[4] and "unavailable" not in (d["skipped_reason"] or "")
    assert run.states["r1"].e2_calls == 1


def test_e_traces_disabled_for_the_run_plans_nothing(sem: Any) -> None:
    run = Run(sem)
    run.feed(start(e_traces_enabled=False))
    for k in range(1, 4):
        run.feed(step(k))
    assert run.plans == [[], [], [], []] and run.planned == [[], [], [], []]
    assert run.states["r1"].recent_thoughts == []


def test_fast_decisions_say_e_traces_were_skipped(sem: Any) -> None:
    run = Run(sem)
    run.feed(start())
    ds = [run.feed(step(k, difficulty=0.05)) for k in range(1, 10)]
    fast = [d for d in ds if d["fsm_state"] == "FAST"]
    assert fast and all(d["skipped_reason"] == "FSM=FAST, e-traces skipped" for d in fast)
    assert all(run.planned[d["step"]] == [] for d in fast)


def test_e1_waits_for_its_gate_and_uses_the_runs_org(sem: Any) -> None:
    run = Run(sem)
    run.feed(start(org_id="acme"))
    run.feed(step(1))  # healthy first step: gate closed, only E2
    assert run.planned[1] == ["e2"]
    seen: list[Query] = []

    def answer(p: etrace_rules.Plan) -> list[Answer]:
        seen.extend(p.queries)
        return [Answer(q.tier) for q in p.queries]

    # the same failing command with the same error: semantic_loop fires by step 4
    for k in range(2, 8):
        run.feed(
            step(
                k,
                "Running the tests again.",
                action="execute_bash",
                action_input={"command": "pytest tests/test_a.py"},
                observation="E   KeyError: 'expires_at'\n1 failed",
                observation_is_error=True,
            ),
            answer,
        )
    e1 = [q for q in seen if q.tier == "e1"]
    assert len(e1) == 1 and e1[0].org_id == "acme"
