"""semantic_loop: the stuck shapes, the paraphrase loop, and progress that must not count."""

from __future__ import annotations

from .trajectories import Run, bash, edit, step, view

LOOP = "semantic_loop"
PYTEST_FAIL = (
    "============================= test session starts ==============================\n"
    "collected 12 items\n\ntests/test_auth.py ..F.........\n\n"
    "FAILED tests/test_auth.py::test_session_refresh - AssertionError: expected 200, got 401\n"
    "========================= 1 failed, 11 passed in 0.42s =========================="
)


def test_same_action_same_observation_four_times_fires(sem):
    run = Run(sem, task="Fix the failing session refresh test")
    run.feed(view("src/auth/session.py", "def refresh(token): ..."))
    for i in range(3):
        run.feed(bash("pytest tests/test_auth.py", PYTEST_FAIL, thought=f"Let me run the tests again ({i})."))
        assert LOOP not in run.results[-1].fired
    res = run.feed(bash("pytest tests/test_auth.py", PYTEST_FAIL, thought="Running the tests once more."))
    assert LOOP in res.fired
    assert "pytest tests/test_auth.py" in res.text
    assert "4 times" in res.text


def test_repeated_command_with_progressing_output_does_not_fire(sem):
    run = Run(sem, task="Make the auth test suite pass")
    for failed in (5, 4, 3, 2, 1, 0):
        out = PYTEST_FAIL.replace("1 failed, 11 passed", f"{failed} failed, {12 - failed} passed")
        run.feed(edit("src/auth/session.py", f"x{failed}", f"y{failed}", thought="Fixing the next failure."))
        run.feed(bash("pytest tests/test_auth.py", out, thought="Re-running the suite."))
    assert not run.fired_anywhere(LOOP)


def test_same_error_three_times_fires_even_with_different_inputs(sem):
    err = '  File "app.py", line 14\n    def handler(request\n                   ^\nSyntaxError: unexpected EOF while parsing'
    run = Run(sem, task="Add a request handler to app.py")
    attempts = ["def handler(request", "def handler(request:", "def handler(request, ctx"]
    for i, src in enumerate(attempts):
        run.feed(step(f"Attempt {i} to fix the syntax.", "execute_ipython_cell", {"code": src}, err, True))
    res = run.results[-1]
    assert LOOP in res.fired
    assert "SyntaxError: unexpected EOF while parsing" in res.text
    assert "3 times in a row" in res.text


def test_same_message_three_times_without_tool_fires(sem):
    run = Run(sem, task="Review the PR")
    msg = "I need to look at the diff more carefully before I can comment on the locking change."
    run.feed(step(msg), step(msg))
    assert LOOP not in run.results[-1].fired
    assert LOOP in run.feed(step(msg)).fired


def test_a_b_alternation_over_six_steps_fires(sem):
    run = Run(sem, task="Find where the retry limit is configured")
    a = bash("grep -rn retry_limit config/", "config/defaults.yaml:12: retry_limit: 3")
    b = view("config/defaults.yaml", "12  retry_limit: 3")
    run.feed(a, b, a, b, a)
    assert LOOP not in run.results[-1].fired
    res = run.feed(b)
    assert LOOP in res.fired
    assert "alternating" in res.text


def test_three_empty_responses_fire(sem):
    run = Run(sem)
    run.feed(bash("ls", "src tests"), step(""), step(""))
    assert LOOP not in run.results[-1].fired
    assert LOOP in run.feed(step("")).fired


def test_ten_condensations_in_a_row_fire(sem):
    run = Run(sem, task="Refactor the billing module")
    run.feed(bash("ls billing", "invoice.py tax.py"))
    for i in range(9):
        run.feed(step("", "condense", None, f"Summary {i}: refactoring billing, nothing done yet."))
    assert LOOP not in run.results[-1].fired
    assert LOOP in run.feed(step("", "condense", None, "Summary 9: refactoring billing.")).fired


def test_condensations_with_work_between_do_not_fire(sem):
    run = Run(sem, task="Refactor the billing module")
    for i in range(12):
        run.feed(step("", "condense", None, f"Summary {i}"))
        run.feed(edit(f"billing/mod{i}.py", "a", "b"))
    assert not run.fired_anywhere(LOOP)


def test_reworded_searches_with_no_new_results_count_as_one_loop(sem):
    run = Run(sem, task="Find why users are logged out after 5 minutes")
    run.feed(view("src/auth/middleware.py", "class AuthMiddleware: ..."))
    for q in ("session timeout", "session expiry", "session token expiration"):
        run.feed(step(f"Let me search for {q}.", "search_code", {"query": q}, "No matches found."))
    res = run.results[-1]
    assert LOOP in res.fired
    assert "reworded" in res.text and "session expiry" in res.text


def test_reworded_searches_that_find_new_things_are_exploration(sem):
    run = Run(sem, task="Find why users are logged out after 5 minutes")
    hits = [
        "src/auth/session.py:40: SESSION_TIMEOUT = 300",
        "docs/ops.md:12: Session expiry is configured per tenant in tenants.yaml",
        "src/tenants/loader.py:88: token_expiration = tenant.get('ttl', 300)",
    ]
    for q, hit in zip(("session timeout", "session expiry", "session token expiration"), hits, strict=True):
        run.feed(step(f"Searching for {q}.", "search_code", {"query": q}, hit))
    assert not run.fired_anywhere(LOOP)


def test_distinct_actions_do_not_fire(sem):
    run = Run(sem, task="Add pagination to the list endpoint")
    run.feed(
        view("api/views.py"),
        bash("grep -n paginate -r api/", "api/utils.py:3: def paginate(qs, page):"),
        edit("api/views.py", "return qs", "return paginate(qs, page)"),
        bash("pytest tests/api -q", "8 passed in 0.31s"),
        view("api/utils.py"),
        bash("git diff --stat", " api/views.py | 2 +-"),
    )
    assert not run.fired_anywhere(LOOP)
    assert run.max_score(LOOP) < 0.6
