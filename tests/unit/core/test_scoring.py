"""The `trajectory` difficulty scorer: reading observations, what raises and lowers a step's score,
bounded memory, and routing through the engine (the FSM itself is unchanged)."""

from __future__ import annotations

import functools
import itertools
import time
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.events import Limits
from streams.core.policy import Policy
from streams.core.reading import observation as obs
from streams.core.reading.features import extract
from streams.core.scoring import trajectory
from streams.core.scoring.heuristic import heuristic_score
from streams.core.scoring.trajectory import Weights
from streams.core.state import TraceState
from streams.local import simulate
from tests.driving import sealed
from tests.factories import b, run_start

LIMITS = Limits()
MAX = LIMITS.max_thought_chars


def ev(
    thought: str | None = "Let me look.",
    action: str | None = "bash",
    action_input: Any = "ls",
    observation: str | None = "README.md\nsrc",
    error: bool = False,
    **kw: Any,
) -> dict[str, Any]:
    return {
        "thought": thought,
        "action": action,
        "action_input": action_input,
        "observation": observation,
        "observation_is_error": error,
        **kw,
    }


DEFAULT_WEIGHTS = Weights()


def score(
    step: dict[str, Any], mem: dict[str, Any] | None, w: Weights = DEFAULT_WEIGHTS
) -> tuple[float, dict[str, Any]]:
    """The scorer on a step event, read the way the engine reads it."""
    return trajectory.score(extract(step, MAX), mem, w)


def scores(steps: list[dict[str, Any]], w: Weights = DEFAULT_WEIGHTS) -> list[float]:
    out: list[float] = []
    mem: dict[str, Any] | None = None
    for s in steps:
        d, mem = score(s, mem, w)
        out.append(d)
    return out


def quiet(k: int) -> dict[str, Any]:
    """A routine step on fresh ground: a new file read successfully."""
    return ev(
        "Open the next module.", "open", f"src/mod_{k}.py", f"[File: src/mod_{k}.py (40 lines)]\n1:import os"
    )


MISSING = ev(
    "Let me compile it.", "bash", "javac Main.java", "/bin/bash: line 7: javac: command not found", True
)


# --- reading observations -------------------------------------------------------------------


def test_command_not_found_is_a_blocking_failure() -> None:
    o = obs.read("/bin/bash: line 62215: javac: command not found", True)
    assert o.failed and o.kind == "missing" and o.severity == 1.0


def test_same_error_with_other_line_numbers_has_the_same_fingerprint() -> None:
    a = obs.read("/bin/bash: line 62215: javac: command not found", True)
    c = obs.read("/bin/bash: line 62230: javac: command not found", True)
    assert a.fingerprint == c.fingerprint


def test_python_traceback_is_a_crash_fingerprinted_by_its_exception_line() -> None:
    tb = (
        "Traceback (most recent call last):\n  File \"x.py\", line {n}, in <module>\nKeyError: 'expires_at'\n"
    )
    a, c = obs.read(tb.format(n=3), False), obs.read(tb.format(n=9), False)
    assert a.failed and a.kind == "crash" and a.fingerprint == c.fingerprint
    other = obs.read(tb.format(n=3).replace("KeyError: 'expires_at'", "TypeError: bad operand"), False)
    assert other.fingerprint != a.fingerprint


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("===== 2 failed, 30 passed, 1 warning in 1.23s =====", (2, 30)),
        ("1 failed in 0.50s", (1, 0)),
        ("41 passed in 3.10s", (0, 41)),
        ("Ran 20 tests in 0.4s\n\nFAILED (failures=2, errors=1)", (3, 17)),
        ("Ran 20 tests in 0.4s\n\nOK", (0, 20)),
        ("[ERROR] Tests run: 12, Failures: 2, Errors: 1, Skipped: 0", (3, 9)),
        ("Tests:       2 failed, 5 passed, 7 total", (2, 5)),
        ("test result: FAILED. 3 passed; 1 failed; 0 ignored", (1, 3)),
        ("  4 passing (20ms)\n  1 failing", (1, 4)),
        ("--- FAIL: TestParse (0.00s)\nFAIL\tpkg/parse\t0.01s", (1, 0)),
    ],
)
def test_test_runner_summaries_give_failed_and_passed_counts(text: str, counts: tuple[int, int]) -> None:
    assert obs.test_counts(text) == counts


def test_more_failing_tests_are_a_more_severe_failure() -> None:
    one = obs.read("1 failed, 9 passed in 1.0s", False)
    four = obs.read("4 failed, 6 passed in 1.0s", False)
    assert one.failed and four.failed and one.severity < four.severity <= 1.0


def test_a_timeout_is_the_most_severe_failure() -> None:
    o = obs.read("Command timed out after 120 seconds", True)
    assert o.kind == "timeout" and o.severity == 1.0


def test_grep_that_matched_nothing_is_not_found_not_a_failure() -> None:
    o = obs.read("<returncode>1</returncode>\n<output>\n</output>", False)
    assert not o.failed and o.kind == "not_found" and o.severity < obs.SEV_EXIT


def test_an_exit_code_of_zero_outweighs_warning_text() -> None:
    o = obs.read("<returncode>0</returncode>\nWARNING: No module named 'example'\nbuild succeeded.", False)
    assert not o.failed and o.kind == "ok"


def test_a_code_listing_mentioning_exceptions_is_not_a_failure() -> None:
    listing = '[File: Foo.java (80 lines total)]\n41:    if (x == null) {\n42:        throw new IllegalArgumentException("x");\n'
    assert obs.read(listing, False) == obs.OK


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("/bin/bash: line 3: syntax error near unexpected token `}'", "crash"),
        ("sh: 1: mvn: not found", "missing"),
        ("zsh: command not found: gradle", "missing"),
        ("/usr/bin/python3: No module named pytest", "missing"),
        ("cp: cannot create regular file 'out/x': Permission denied", "crash"),
        ("python: can't open file '/testbed/repro.py': [Errno 2] No such file or directory", "crash"),
        ("[INFO] BUILD FAILURE\n[INFO] Total time: 3 s", "crash"),
        ("Segmentation fault (core dumped)", "crash"),
        ("total 4\n-rw-r--r-- 1 root root 0 a.py\n\n[Command finished with exit code 2]", "exit"),
    ],
)
def test_failure_messages_in_the_tools_own_format_are_recognised(text: str, kind: str) -> None:
    o = obs.read(text, False)
    assert o.failed and o.kind == kind


@pytest.mark.parametrize(
    "text",
    [
        "src/auth.py:10:        raise PermissionError('permission denied')",
        "scripts/setup.sh:3:echo 'gradle: command not found, install it first'",
        "tests/test_parse.py:41:    assert msg == 'syntax error'",
        "docs/cli.md:12:The CLI returns a non-zero status (exit code 1) when a check fails.\n"
        + "line\n" * 200,
    ],
)
def test_search_results_that_merely_mention_an_error_are_not_failures(text: str) -> None:
    assert not obs.read(text, False).failed


def test_adversarial_lines_are_read_in_linear_time() -> None:
    nasty = ("1: " * 3000 + "x\n") + ("a: " * 3000 + "line 9: \n") + ("[X] " * 3000 + "\n")
    t = time.perf_counter()
    obs.read(nasty * 2, False)
    assert time.perf_counter() - t < 0.5


def test_the_flag_alone_marks_a_failure() -> None:
    o = obs.read("Please always provide EXACTLY ONE action.", True)
    assert o.failed and o.kind == "flagged" and o.severity == obs.SEV_FLAGGED


def test_a_summary_at_the_end_of_a_huge_output_is_still_read() -> None:
    huge = (
        "collected 3000 items\n" + ("." * 100 + "\n") * 20_000 + "===== 5 failed, 2995 passed in 60.00s ====="
    )
    assert len(obs.window(huge)) <= obs.HEAD_CHARS + obs.TAIL_CHARS + 1
    assert obs.read(huge, False).tests == (5, 2995)


# --- what raises and lowers the score -------------------------------------------------------


def test_a_quiet_successful_step_scores_no_more_than_its_thought() -> None:
    s = ev("I will open the settings module and read how the timeout is configured.")
    assert scores([s])[0] <= heuristic_score(s["thought"])


def test_a_tool_call_without_any_text_is_routine_not_unknown() -> None:
    (d,) = scores(
        [ev(thought="", action="get_order_details", action_input={"order_id": "#W1"}, observation="{}")]
    )
    assert d < 0.2


def test_an_empty_step_scores_one_half() -> None:
    assert scores([ev(thought=None, action=None, action_input=None, observation=None)]) == [0.5]


def test_a_hard_failure_with_a_confident_thought_is_already_hard() -> None:
    (d,) = scores([MISSING])
    assert heuristic_score(MISSING["thought"]) < 0.2 < 0.6 < d


def test_consecutive_failures_escalate() -> None:
    steps = [
        ev(
            "Run the test again.",
            "bash",
            f"pytest -k case{k}",
            f"E   AssertionError: case {k}\n1 failed in 0.2s",
            True,
        )
        for k in range(5)
    ]
    d = scores(steps)
    assert all(a < c for a, c in itertools.pairwise(d))


def test_the_same_error_again_weighs_more_than_a_new_one() -> None:
    first = ev("Build it.", "bash", "make", "src/a.c:3:1: error: expected ';'", True)
    again = scores([quiet(1), first, quiet(2), first])[-1]
    other = ev("Build it.", "bash", "make", "src/b.c:9:4: error: unknown type name 'foo'", True)
    fresh = scores([quiet(1), first, quiet(2), other])[-1]
    assert again > fresh


def test_tests_passing_more_lower_the_score() -> None:
    before = ev("Run the tests.", "bash", "pytest -q", "3 failed, 7 passed in 1.0s", True)
    better = ev("Run the tests.", "bash", "pytest -q", "1 failed, 9 passed in 1.0s", True)
    same = ev("Run the tests.", "bash", "pytest -q", "3 failed, 7 passed in 2.0s", True)
    green = ev("Run the tests.", "bash", "pytest -q", "10 passed in 1.0s")
    assert scores([before, better])[-1] < scores([before, same])[-1]
    assert scores([before, green])[-1] < 0.2


def test_a_failed_call_that_now_succeeds_ends_the_struggle() -> None:
    fail = ev("Compile.", "bash", "javac Main.java", "Main.java:3: error: ';' expected", True)
    ok = ev("Compile.", "bash", "javac Main.java", "")
    d, mem = 0.0, None
    for s in (fail, fail, fail, ok):
        d, mem = score(s, mem)
    assert mem is not None and mem["struggle"] == 0.0 and d < 0.5


def test_an_anticipated_reproduction_failure_stays_low() -> None:
    repro = ev(
        "I'll run the reproduction script to confirm the bug.",
        "bash",
        "python repro.py",
        'Traceback (most recent call last):\n  File "repro.py", line 4\nValueError: bad',
        True,
    )
    (d,) = scores([repro])
    assert d < 0.2


def test_running_the_reproduction_to_check_a_fix_is_not_an_anticipated_failure() -> None:
    check = ev(
        "The fix is in place. Let's verify it with the reproduction script.",
        "bash",
        "python repro.py",
        'Traceback (most recent call last):\n  File "repro.py", line 4\nValueError: bad',
        True,
    )
    assert scores([check])[0] > 0.6


def test_a_missing_command_is_never_an_anticipated_failure() -> None:
    s = dict(MISSING, thought="Compile and run the reproduction to confirm the bug.")
    assert scores([s])[0] > 0.6


def test_a_loop_of_the_same_successful_call_keeps_the_run_out_of_fast_but_below_slow() -> None:
    same = ev("Search for the parser class.", "find_file", '"Parser"', 'No matches found for "Parser"')
    d = scores([same] * 20)
    assert all(0.3 < x < 0.6 for x in d[2:])


def test_plain_messages_are_not_tool_calls_and_do_not_make_a_loop() -> None:
    msg = ev(
        "Address: https://example.org/page\nTitle: Page",
        action=None,
        action_input=None,
        observation=None,
        agent="WebSurfer",
    )
    d = scores([msg] * 6)
    assert len(set(d)) == 1
    # the older multi-agent form: the speaker in `action`, no input, no output
    legacy = dict(msg, action="WebSurfer", agent=None)
    assert len(set(scores([legacy] * 6))) == 1


def test_weights_are_adjustable_by_a_variant_in_the_policy() -> None:
    policy = Policy().with_scorer(
        "test_no_failures", functools.partial(trajectory.score, w=Weights(failure=0.0, streak=0.0))
    )
    d, _ = policy.scorer("test_no_failures")(extract(MISSING, MAX), None)
    assert d < scores([MISSING])[0]


# --- purity and bounded memory --------------------------------------------------------------


def test_memory_survives_a_json_round_trip_with_identical_scores() -> None:
    steps = [
        quiet(1),
        MISSING,
        MISSING,
        quiet(2),
        ev("Run tests.", "bash", "pytest", "2 failed, 3 passed in 1s", True),
    ]
    direct = scores(steps)
    mem: dict[str, Any] | None = None
    via_json: list[float] = []
    for s in steps:
        d, mem = score(s, mem)
        mem = orjson.loads(orjson.dumps(mem))
        via_json.append(d)
    assert via_json == direct


def test_memory_of_an_unknown_version_starts_afresh() -> None:
    assert score(MISSING, {"v": 999, "fails": 50, "struggle": 1.0}) == score(MISSING, None)


def test_memory_stays_bounded_over_5000_varied_steps() -> None:
    mem: dict[str, Any] | None = None
    sizes: list[int] = []
    for k in range(5000):
        s = ev(f"Step {k}.", "bash", f"cat src/f{k}.py && ./run {k}", f"out {k}", error=k % 7 == 0)
        _, mem = score(s, mem)
        sizes.append(len(orjson.dumps(mem)))
    assert max(sizes[1000:]) <= max(sizes[:1000]) + 16
    assert mem is not None
    assert len(mem["calls"]) <= trajectory.ACTION_WINDOW and len(mem["files"]) <= trajectory.FILES_KEPT


step_strategy = st.fixed_dictionaries(
    {
        "thought": st.one_of(st.none(), st.text(max_size=300)),
        "action": st.one_of(st.none(), st.sampled_from(["bash", "edit", "open", "submit"])),
        "action_input": st.one_of(
            st.none(),
            st.text(max_size=80),
            st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=3),
        ),
        "observation": st.one_of(
            st.none(),
            st.text(max_size=300),
            st.sampled_from(["1 failed in 1s", "Traceback (most recent call last):", "x: command not found"]),
        ),
        "observation_is_error": st.booleans(),
    }
)


@settings(max_examples=150, deadline=None)
@given(st.lists(step_strategy, max_size=12))
def test_scores_stay_within_bounds_and_are_deterministic(steps: list[dict[str, Any]]) -> None:
    a = scores(steps)
    assert a == scores(steps)
    assert all(0.0 <= x <= 1.0 for x in a)


# --- through the engine ---------------------------------------------------------------------


class Store(dict[str, TraceState]):
    def feed(self, event: dict[str, Any]) -> dict[str, Any] | None:
        res = sealed(b(event), self.get, LIMITS, 1.0)
        if res.state is not None:
            self[res.state.run_id] = res.state
        return res.decision


def run(steps: list[dict[str, Any]], **start: Any) -> list[dict[str, Any]]:
    s = Store()
    s.feed(run_start("r", monitors_enabled=False, e_traces_enabled=False, **start))
    out = []
    for k, step in enumerate(steps, start=1):
        d = s.feed({"type": "step", "schema_version": 1, "run_id": "r", "step": k, **step})
        assert d is not None
        out.append(d)
    return out


def test_trajectory_is_the_default_scorer() -> None:
    s = Store()
    s.feed(run_start("r"))
    assert s["r"].config.scorer == "trajectory"


def test_five_failures_in_a_row_with_confident_thoughts_reach_slow() -> None:
    steps = [quiet(k) for k in range(8)]
    steps += [dict(MISSING, thought="Let me run the test again.")] * 5
    states = [d["fsm_state"] for d in run(steps, model_routing={"FAST": "small", "SLOW": "big"})]
    assert "FAST" in states[:8]
    assert states[8] != "FAST"  # the first failure already leaves FAST
    assert states[12] == "SLOW"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_healthy_synthetic_run_spends_most_steps_in_fast(seed: int) -> None:
    _, gen = simulate.trajectory("healthy", 40, seed)
    states = [d["fsm_state"] for d in run(list(gen))]
    assert states.count("FAST") >= 0.6 * len(states) and "SLOW" not in states


def test_the_heuristic_stays_selectable_with_its_old_scores() -> None:
    steps = [quiet(1), MISSING, MISSING]
    got = [d["difficulty"] for d in run(steps, scorer="heuristic")]
    assert got == [heuristic_score(s["thought"]) for s in steps]


def test_agent_supplied_difficulty_wins_while_the_scorer_keeps_remembering() -> None:
    steps = [dict(MISSING, difficulty=0.0)] * 4 + [MISSING]
    d = run(steps)
    assert [x["difficulty"] for x in d[:4]] == [0.0] * 4
    assert all(x["difficulty_source"] == "agent" for x in d[:4])
    alone = run([MISSING])[0]["difficulty"]
    assert d[4]["difficulty_source"] == "scorer" and d[4]["difficulty"] > alone


# A state as the previous release wrote it (no scorer memory), captured from that code.
OLD_STATE = (
    b'{"run_id":"old-run","config":{"org_id":"default","project_id":null,"agent_name":null,"task":null,'
    b'"framework":null,"model":null,"task_profile":"coding","monitor_weights":null,"weights":'
    b'{"claim_contradiction":0.3,"semantic_loop":0.25,"verification_skip":0.15,"cyclic_compression":0.1,'
    b'"late_sprawl":0.1,"silent_topic_drift":0.1},"model_routing":{"SLOW":"big"},"token_budget":null,'
    b'"e_traces_enabled":false,"monitors_enabled":false,"fsm":{},"fsm_transition":"default",'
    b'"scorer":"heuristic"},"state":"NORMAL","history":[0.04783412323016055,0.04783412323016055],'
    b'"last_step":2,"scored_steps":2,"tokens_used":200,"monitor_injections":0,'
    b'"last_monitor_injection_step":null,"last_monitor_injection_text":null,"recent_fired":[],'
    b'"monitors":{"loop":{"window":[]},"verification":{"pending":[],"tested_since_change":true},'
    b'"contradiction":{"claims":[]},"compression":{"last_summary":null,"last_summary_step":null,'
    b'"progress_since":0,"cycles":0},"sprawl":{"steps":0,"tools":[],"files":[],"anchors":[],'
    b'"early_novelty":0,"counts":[],"recent_new":[]},"drift":{"focus":[],"recent":[],"steps":0,'
    b'"score":0.0,"text":null,"baseline":null,"last_full":-15,"full_fast":null,"low":0}},"e1_calls":0,'
    b'"e2_calls":0,"e3_calls":0,"recent_thoughts":[],"injections_by_source":{},"duplicates":0,'
    b'"step_log":[[0,"INIT",null,null,[],[],null,1700000100.0],[1,"NORMAL",0.04783412323016055,null,'
    b'[],[],null,1700000100.0],[2,"NORMAL",0.04783412323016055,null,[],[],null,1700000100.0]],'
    b'"finished":false,"outcome":null,"started_ts":1700000000.0,"last_event_ts":1700000002.0,'
    b'"updated_ts":1700000100.0}'
)


def test_a_state_written_before_scorer_memory_still_decodes_and_keeps_its_scorer() -> None:
    st_old = TraceState.decode(OLD_STATE)
    assert st_old.scorer_state is None and st_old.config.scorer == "heuristic"
    store = Store({"old-run": st_old})
    d = store.feed({"type": "step", "schema_version": 1, "run_id": "old-run", "step": 3, **MISSING})
    assert d is not None and d["difficulty"] == heuristic_score(MISSING["thought"])
    assert TraceState.decode(store["old-run"].encode()) == store["old-run"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('Found 10 matches for "Serializer" in /repo/src:\n/repo/src/a/Serializer.java (10 matches)', "ok"),
        ("grep: 20 matches, 1.0 matches per file", "ok"),
        ('Found 0 matches for "Serializer" in /repo/src', "not_found"),
        ("0 matches", "not_found"),
        ("No matches found for x", "not_found"),
    ],
)
def test_a_count_of_matches_is_nothing_found_only_when_it_is_zero(text: str, kind: str) -> None:
    assert obs.read(text, False).kind == kind
