"""The no-progress signal (`monitors/progress.py`): stale steps are found by what came back,
whatever the wording or the call class; results that keep changing are progress; what cannot be
known is not counted; state and work per step stay bounded."""

from __future__ import annotations

import time
from typing import Any

import orjson

from streams.core.monitors import progress as P
from streams.core.monitors.base import Finding
from streams.core.reading.features import extract

FILE = "\n".join(f"def handler_{i}(request):\n    return route(request, {i})" for i in range(12))


def call(action: str, inp: Any, out: str | None, error: bool = False, **kw: Any) -> dict[str, Any]:
    return {"action": action, "action_input": inp, "observation": out, "observation_is_error": error, **kw}


def bash(cmd: str, out: str, **kw: Any) -> dict[str, Any]:
    return call("execute_bash", {"command": cmd}, out, **kw)


def say(agent: str, text: str) -> dict[str, Any]:
    return {"agent": agent, "thought": text}


def drive(*steps: dict[str, Any]) -> tuple[P.ProgressState, list[Finding | None]]:
    st = P.ProgressState()
    found: list[Finding | None] = []
    for n, s in enumerate(steps, start=1):
        st, f = P.observe(st, extract({"step": n, "ts": 1_700_000_000.0 + n, **s}, 20_000))
        found.append(f)
    return st, found


def first_fire(found: list[Finding | None]) -> int | None:
    return next((n for n, f in enumerate(found, start=1) if f is not None and f.fired), None)


def numbered(text: str, sep: str = "\t") -> str:
    return "\n".join(f"{i:6}{sep}{ln}" for i, ln in enumerate(text.splitlines(), start=1))


# --- stale, whatever the wording or the call class


def test_ls_eight_times_with_the_same_empty_output_is_stale():
    _, found = drive(*(bash("ls", "") for _ in range(8)))
    assert first_fire(found) is not None and first_fire(found) <= 4
    last = found[-1]
    assert last is not None and "brought back nothing at all" in (last.text or "")


def test_one_file_read_seven_ways_is_stale_from_the_second_read_on():
    reads = [
        bash("cat app/routes.py", FILE),
        bash("sed -n '1,12p' app/routes.py", "\n".join(FILE.splitlines()[:12])),
        bash("head -n 20 app/routes.py", "\n".join(FILE.splitlines()[:20])),
        bash("nl app/routes.py", numbered(FILE)),
        call("read_file", {"path": "app/routes.py"}, numbered(FILE)),
        bash("git show HEAD:app/routes.py", FILE),
        call("str_replace_editor", {"command": "view", "path": "app/routes.py"}, numbered(FILE)),
    ]
    _, found = drive(*reads)
    fired = first_fire(found)
    assert fired is not None and fired <= 6
    text = found[-1].text or ""  # type: ignore[union-attr]
    assert "only repeated output you had already seen" in text and "none of them changed anything" in text


def test_reworded_searches_returning_the_same_single_hit_are_stale():
    queries = [
        "session timeout",
        "session expiry config",
        "where is the session expiration set",
        "token lifetime setting",
        "SESSION_TTL",
        "how long do sessions last",
    ]
    hit = "src/auth/session.py:42: SESSION_TTL = 3600"
    _, found = drive(*(call("search_code", {"query": q}, f"Results for '{q}':\n{hit}") for q in queries))
    assert first_fire(found) is not None and first_fire(found) <= 6


def test_the_same_result_three_calls_in_a_row_is_said_at_the_third():
    _, found = drive(*(call("read_file", {"path": "src/main.ts"}, "1\trun()\n") for _ in range(3)))
    assert first_fire(found) == 3
    assert "3 times in a row" in (found[-1].text or "")  # type: ignore[union-attr]


# --- progress: results that change


def test_paging_through_a_document_is_progress():
    pages = [
        call("page_down", {}, f"Page {i}:\n" + "\n".join(f"line {i}-{k} of the report" for k in range(8)))
        for i in range(10)
    ]
    _, found = drive(*pages)
    assert first_fire(found) is None


def test_polling_a_changing_state_is_progress():
    _, found = drive(*(bash("curl -s localhost/job/7", f'{{"done": {i * 10}}}') for i in range(10)))
    assert first_fire(found) is None


def test_iterative_debugging_with_changing_failures_is_progress():
    steps = []
    for i in range(6):
        steps.append(
            call(
                "str_replace_editor",
                {"command": "str_replace", "path": "a.py", "old_str": f"x{i}", "new_str": f"x{i + 1}"},
                "The file a.py has been edited.",
            )
        )
        steps.append(bash("pytest -q", f"{6 - i} failed, {i} passed\nFAILED test_a.py::test_{i}"))
    _, found = drive(*steps)
    assert first_fire(found) is None


def test_edits_that_leave_a_check_printing_the_same_are_stale_and_said_so():
    steps = []
    for i in range(5):
        steps.append(
            call(
                "str_replace_editor",
                {"command": "str_replace", "path": "a.py", "old_str": f"x{i}", "new_str": f"x{i + 1}"},
                "The file a.py has been edited.",
            )
        )
        steps.append(
            bash("python repro.py", "Traceback (most recent call last):\nValueError: bad shape (3, 4)")
        )
    _, found = drive(*steps)
    assert first_fire(found) is not None
    text = next(f.text for f in found if f is not None and f.fired) or ""
    assert "changes made in between" in text and "none of them changed anything" not in text


def test_each_successful_write_is_a_change_even_with_the_same_input():
    """Three transfers of 10,000 asked for as three: each moved money; nothing says "the same"."""
    pay = call(
        "send_money",
        {"recipient": "US12", "amount": 10000},
        "{'message': 'Transaction to US12 for 10000 sent.'}",
    )
    _, found = drive(pay, pay, pay, pay)
    assert first_fire(found) is None


def test_the_same_lookup_on_new_targets_is_not_stale():
    """Listing the members of each channel: the names recur, which channel holds them is news."""
    members = "- Alice\n- Bob\n- Charlie"
    _, found = drive(
        *(
            call("get_users_in_channel", {"channel": c}, members)
            for c in ("general", "random", "private", "ops", "dev")
        )
    )
    assert first_fire(found) is None


# --- unknown is not "the same"


def test_cut_outputs_whose_sent_part_is_old_are_not_counted():
    head = "collecting ...\n" + "x" * 1985  # 2,000 characters: cut by its producer
    _, found = drive(*(bash("pytest -q", head) for _ in range(8)))
    assert first_fire(found) is None


def test_commands_that_did_not_run_are_not_counted():
    busy = '[Your command "ls" is NOT executed. The previous command is still running]'
    _, found = drive(*(bash("ls", busy) for _ in range(8)))
    assert first_fire(found) is None


def test_pending_answers_spaced_out_in_time_are_waiting():
    st = P.ProgressState()
    found = []
    for n in range(1, 9):
        ev = {
            "step": n,
            "ts": 1_700_000_000.0 + 30 * n,
            **bash("gh run view 1 --json status", '{"status": "in_progress"}'),
        }
        st, f = P.observe(st, extract(ev, 20_000))
        found.append(f)
    assert first_fire(found) is None


def test_a_reply_to_the_user_that_ends_the_run_is_not_empty():
    _, found = drive(*(call("respond", f"answer {i}", None, thought=f"answer {i}") for i in range(6)))
    assert first_fire(found) is None


# --- chats


def test_an_orchestrator_reissuing_an_instruction_whose_replies_add_nothing_is_stale():
    page = "Address: https://example.org/dissertation\nViewport position: top\nNo dissertation record found for Lauria 2014"
    steps = []
    for i in range(5):
        steps.append(
            say(
                "Orchestrator",
                f"Please look up the dissertation of Federico Lauria again ({['try harder', 'once more', 'carefully', 'again', 'please'][i]}).",
            )
        )
        steps.append(say("WebSurfer", f"I searched again.\n{page}"))
    _, found = drive(*steps)
    who = {f.text.split(" ", 1)[0] for f in found if f is not None and f.fired and f.text}
    assert who, "a fire"
    assert any("Orchestrator" in w or "WebSurfer" in w for w in who)


def test_a_sub_agent_bringing_new_pages_keeps_the_orchestrator_progressing():
    steps = []
    for i in range(6):
        steps.append(say("Orchestrator", "Please scroll down."))
        steps.append(
            say(
                "WebSurfer",
                f"I scrolled down.\nAddress: https://example.org/doc\nSection {i}: findings number {i * 7} of the survey",
            )
        )
    _, found = drive(*steps)
    assert first_fire(found) is None


def test_streaks_are_per_agent():
    steps = []
    for i in range(6):
        steps.append(
            call("web_search", {"query": f"q{i}"}, "Only hit: https://a.org/x", agent="search_agent")
        )
        steps.append(call("python_interpreter", f"print({i} * 3)", str(i * 3), agent="manager"))
    _, found = drive(*steps)
    fired = [f for f in found if f is not None and f.fired]
    assert fired and all((f.text or "").startswith("`search_agent`") for f in fired)


# --- bounded and linear


def test_state_stays_bounded_over_a_long_run_of_new_results():
    st = P.ProgressState()
    sizes = []
    for n in range(1, 3001):
        out = "\n".join(f"row {n}-{k} value {n * k}" for k in range(30))
        st, _ = P.observe(st, extract({"step": n, "agent": f"a{n % 20}", **bash(f"query {n}", out)}, 20_000))
        sizes.append(len(orjson.dumps(st.__dict__)))
    assert max(sizes) < 8_000
    assert sizes[-1] <= max(sizes[100:200]) * 1.1
    assert len(st.agents) <= P.AGENTS_KEPT


def test_work_per_step_does_not_grow_with_the_run_or_the_output():
    def per_step(n_steps: int, lines: int) -> float:
        st = P.ProgressState()
        feats = [
            extract({"step": n, **bash(f"q {n}", "\n".join(f"r {n} {k}" for k in range(lines)))}, 20_000)
            for n in range(1, n_steps + 1)
        ]
        t = time.perf_counter()
        for f in feats:
            st, _ = P.observe(st, f)
        return (time.perf_counter() - t) / n_steps

    short, long = min(per_step(200, 20) for _ in range(3)), min(per_step(2000, 20) for _ in range(3))
    assert long < short * 2
    # a 1 MB output reads no more than its head and tail
    huge = extract(
        {"step": 1, **bash("cat big.log", "y" * 100 + "\n" + ("z" * 90 + "\n") * 11_000)}, 2_000_000
    )
    t = time.perf_counter()
    P.observe(P.ProgressState(), huge)
    assert time.perf_counter() - t < 0.05


def test_hostile_lines_are_read_in_linear_time():
    evil = ("1" * 50_000 + ":" + " " * 50_000 + "\t") * 2
    t = time.perf_counter()
    P.observe(P.ProgressState(), extract({"step": 1, **bash("cat x", evil)}, 400_000))
    assert time.perf_counter() - t < 0.05


def test_the_worked_example_of_the_docs():
    """docs/monitors.md, "The no-progress floor": the same setting looked up seven ways."""
    lines = [f"# session settings line {i}" for i in range(1, 41)] + ["", "SESSION_TTL = 3600"]
    lines += [f"REFRESH_{i} = {i}" for i in range(43, 52)]
    hit = "src/auth/session.py:42: SESSION_TTL = 3600"

    def search(q: str) -> dict[str, Any]:
        return call("search_code", {"query": q}, f"Results for '{q}':\n{hit}")

    _, found = drive(
        search("session timeout"),
        search("session expiry config"),
        bash("cat src/auth/session.py", "\n".join(lines)),
        bash("nl src/auth/session.py", "\n".join(f"{i:6}\t{ln}" for i, ln in enumerate(lines, 1))),
        bash("sed -n '40,45p' src/auth/session.py", "\n".join(lines[39:45])),
        bash("grep -n TTL src/auth/session.py", "42:SESSION_TTL = 3600"),
        search("how long do sessions last"),
    )
    assert first_fire(found) == 7
    assert (found[-1].text or "").startswith(  # type: ignore[union-attr]
        "You have taken 4 steps since step 4 (`execute_bash: nl src/auth/session.py`"
    )


def test_a_response_repeating_one_sentence_is_chanting():
    text = "I will not output any text. I will just end the turn. " * 12
    _, found = drive({"thought": text})
    assert found[0] is not None and found[0].fired
    assert "12 times in one response" in (found[0].text or "")


def test_repetition_in_code_lists_and_far_apart_is_not_chanting():
    loop_body = "```\n" + "for (let i = 0; i < 10; i++) { console.log(i); }\n" * 20 + "```"
    listing = "".join(f"- projects/p/locations/us/services/{i}\n" for i in range(15))
    far = "".join(
        "The cache is warm now. " + " ".join(f"word{k}{j}" for j in range(40)) + ". " for k in range(10)
    )
    for text in (loop_body, listing, "-" * 750, far):
        assert P.chanting(text) is None
