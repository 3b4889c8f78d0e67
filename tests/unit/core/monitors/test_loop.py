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
    for i in range(2):
        run.feed(bash("pytest tests/test_auth.py", PYTEST_FAIL, thought=f"Let me run the tests again ({i})."))
        assert LOOP not in run.results[-1].fired
    # the third run with the very same result: the no-progress floor (as Cline, Roo Code, Goose)
    res = run.feed(bash("pytest tests/test_auth.py", PYTEST_FAIL, thought="Let me run the tests again (2)."))
    assert LOOP in res.fired and "3 times in a row" in res.text and "very same result" in res.text
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


# --- progress: a rerun after an edit is a check, not a retry ------------------------------------
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "repro.py", line 4, in <module>\n'
    "    print(parse('2024-13-01'))\n"
    "ValueError: month must be in 1..12\n"
)


def _rerun_after_each_edit(sem, edits: int, out: str = TRACE, error: bool = True) -> Run:
    run = Run(sem, task="Make parse() reject bad months with a clear message")
    run.feed(bash("python repro.py", out, error=error))
    for i in range(edits):
        run.feed(edit("src/dates/parse.py", f"old{i}", f"new{i}", thought="Adjust the month check."))
        run.feed(bash("python repro.py", out, thought="Run the reproduction again.", error=error))
    return run


def test_reruns_after_edits_are_never_called_retries(sem):
    run = _rerun_after_each_edit(sem, edits=3)
    texts = [r.text or "" for r in run.results]
    assert not any("Running it again" in t or "retrying" in t for t in texts)


def test_three_edits_that_leave_a_check_failing_the_same_way_are_named(sem):
    run = _rerun_after_each_edit(sem, edits=3)
    res = run.results[-1]
    assert LOOP in res.fired
    assert "Your last 3 edits (`parse.py`) left `python repro.py` failing with the same error" in res.text
    assert "ValueError: month must be in 1..12" in res.text and "reach the code that runs" in res.text


def test_other_test_cases_failing_with_one_error_after_each_edit_are_named(sem):
    run = Run(sem, task="Fix the token expiry check")
    run.feed(
        bash("pytest tests/test_auth.py -k case0", "E   KeyError: 'expires_at'\n1 failed in 0.4s", error=True)
    )
    for k in range(1, 4):
        run.feed(edit("src/auth/session.py", f"old{k}", f"new{k}"))
        out = f"E   KeyError: 'expires_at'\n1 failed in 0.{k}s"
        run.feed(bash(f"pytest tests/test_auth.py -k case{k}", out, error=True))
    res = run.results[-1]
    assert (
        LOOP in res.fired and "Your last 3 edits (`session.py`) left every check run since step 1" in res.text
    )
    assert "KeyError: 'expires_at'" in res.text and "Running it again" not in res.text


def test_one_or_two_edits_between_equal_results_say_nothing(sem):
    assert not _rerun_after_each_edit(sem, edits=2).fired_anywhere(LOOP)


def test_a_check_that_passes_after_each_edit_is_no_loop(sem):
    ok = "collected 4 items\n\ntests/test_parse.py ....\n\n============ 4 passed in 0.12s ============"
    assert not _rerun_after_each_edit(sem, edits=4, out=ok, error=False).fired_anywhere(LOOP)


def test_outputs_that_differ_only_in_numbers_and_addresses_are_the_same_result(sem):
    run = Run(sem)
    for i in range(4):
        if i:
            run.feed(edit("src/cache.py", f"a{i}", f"b{i}"))
        body = "\n".join(
            f"entry {k}: <CacheEntry object at 0x7f{i}a{k}c0> hits={k * i} id={1000 + i}" for k in range(30)
        )
        run.feed(bash("python inspect_cache.py", body))
    res = run.results[-1]
    assert LOOP in res.fired and "printing the same output" in res.text


def test_a_result_cut_by_its_producer_is_never_called_the_same_output(sem):
    """Equal heads of cut outputs (a test runner's header) say nothing of what the edits did
    (tests/unit/core/monitors/test_loop_evidence.py has the rest of item 2's cases)."""
    long_out = ("INFO loading plugin registry ... done\n" * 60)[:2000]
    run = _rerun_after_each_edit(sem, edits=3, out=long_out, error=False)
    texts = " ".join(r.text or "" for r in run.results)
    assert "printing the same" not in texts and "the same result" not in texts and "past the cut" in texts


CASE_ONE = (
    "case one: rebuilt connector AND (expected OR)",
    "case one children: [x]",
    "case one negated: False",
)
CASE_TWO = ("case two: rebuilt connector AND (expected OR)", "case two children: [x, y]")


def test_code_edits_that_change_no_line_while_the_script_gains_cases_are_named(sem):
    run = Run(sem, task="Keep the connector when a query object is rebuilt")
    out = "\n".join(CASE_ONE)
    run.feed(bash("python check.py", out))
    for i in range(1, 4):
        run.feed(edit("src/query.py", f"old{i}", f"new{i}", thought="Keep the connector."))
        if i == 2:  # the check gains a case; what it printed before stays as it was
            run.feed(edit("check.py", "# cases", "# cases and case two"))
            out = "\n".join(CASE_ONE + CASE_TWO)
        res = run.feed(bash("python check.py", out))
    assert LOOP in res.fired
    assert (
        "Your last 4 edits (`query.py`, `check.py`) changed nothing that `python check.py` printed at step 1"
        in (res.text)
    )
    assert "later ones only adding lines" in res.text and "Running it again" not in res.text


def test_a_wider_view_of_the_same_check_counts_as_the_same_run(sem):
    rendered = [f"<dt>{w}</dt><dd>{w} type</dd>" for w in ("alpha", "beta", "gamma", "delta", "epsilon")]
    run = Run(sem, task="Render the parameter types")
    run.feed(bash("python build_docs.py && grep -A 3 Parameters out.html", "\n".join(rendered[:3])))
    for i in range(3):
        run.feed(edit("src/render.py", f"old{i}", f"new{i}"))
        res = run.feed(bash("python build_docs.py && grep -A 5 Parameters out.html", "\n".join(rendered)))
    assert LOOP in res.fired
    assert "changed nothing that" in res.text and "printed at step 1: its 4 runs" in res.text


def test_more_lines_from_an_unchanged_script_after_a_code_edit_are_its_effect(sem):
    run = Run(sem, task="Find every plugin")
    found = ["found: alpha plugin", "found: beta plugin", "found: gamma plugin"]
    run.feed(bash("python list_plugins.py", "\n".join(found)))
    for i in range(3):  # the first edit finds one more plugin; the next two change nothing
        run.feed(edit("src/loader.py", f"old{i}", f"new{i}"))
        run.feed(bash("python list_plugins.py", "\n".join([*found, "found: delta plugin"])))
    assert all("changed nothing that" not in (r.text or "") for r in run.results)


# --- content, not the frame around it -----------------------------------------------------------
FOOTER = "\n[Command exited with code {code}]\n[Working directory: /repo]"


def test_a_framework_footer_does_not_make_different_results_the_same(sem):
    run = Run(sem, task="Find where the retry limit is read")
    for pattern, hit in (
        ("retry limit", "config/defaults.yaml:12: retry limit: 3"),
        ("retry_limit", "src/client.py:40: self.retry_limit = cfg.retry_limit"),
        ("max retries", "docs/ops.md:7: Max retries default to 3"),
        ("retries setting", "src/settings.py:88: RETRIES = env('RETRIES', 3)"),
    ):
        run.feed(bash(f'grep -rn "{pattern}" .', hit + FOOTER.format(code=0)))
    assert not run.fired_anywhere(LOOP)


def test_a_wrapper_every_result_carries_is_learnt_and_left_out(sem):
    run = Run(sem, task="Compute the totals")
    wrap = "exitcode: 0 (execution succeeded)\nCode output:\n{}"
    for k in range(5):  # the tool's results, each different: the wrapper is what they share
        run.feed(step("", "execute_code", f"print(total({k}))", wrap.format(f"total {k} = {k * 17}")))
    for q in ("sum of the order values", "total of the order values", "order values summed"):
        run.feed(step("", "execute_code", f"# {q}\nprint(orders.total())", wrap.format(f"{q}: 512 rows")))
    assert not run.fired_anywhere(LOOP)


def test_reworded_searches_that_find_nothing_say_so(sem):
    run = Run(sem)
    for q in ("session timeout", "session expiry", "session token expiration"):
        run.feed(step("", "search_code", {"query": q}, "No matches found."))
    assert "none of them returned any result" in (run.results[-1].text or "")


def test_one_command_template_aimed_at_other_names_is_exploration(sem):
    run = Run(sem, task="Find the class that renders the signature")
    for cls in ("ASTBaseParser", "DefinitionParser", "SymbolLookupResult", "ASTDeclaration"):
        run.feed(bash(f'grep -n "class {cls}" sphinx/domains/cpp.py', "" + FOOTER.format(code=1)))
    assert not run.fired_anywhere(LOOP)


# --- the same edit ------------------------------------------------------------------------------
def test_a_move_of_a_file_written_since_is_a_new_change(sem):
    run = Run(sem)
    for i in range(3):
        run.feed(
            step(
                "",
                "editor",
                {"command": "create", "path": "app/views.py.new", "file_text": f"v = {i}\n"},
                "Created.",
            )
        )
        run.feed(bash("mv app/views.py.new app/views.py", ""))
    assert all("same change" not in (r.text or "") for r in run.results)


def test_an_input_cut_at_its_producers_length_cannot_prove_the_same_edit(sem):
    body = ("def handler(request):\n    return render(request)\n" * 200)[:4000]
    run = Run(sem)
    for _ in range(3):
        run.feed(
            step("", "editor", {"command": "create", "path": "app/views.py", "file_text": body}, "Created.")
        )
    assert all("same change" not in (r.text or "") for r in run.results)


# --- the same failing call ----------------------------------------------------------------------
SCROLL_ERR = (
    "ToolCallError: calling scroll_down with {'': {}} failed: TypeError: ScrollDown.run() got an "
    "unexpected keyword argument ''\nCall this tool with the inputs it takes: {}."
)


def test_a_call_that_already_failed_the_same_way_is_a_loop_at_its_second_try(sem):
    run = Run(sem)
    run.feed(step("", "scroll_down", {"": {}}, SCROLL_ERR, error=True))
    run.feed(step("", "open_url", {"url": "https://example.org/list"}, "Page 1 of 4: items ..."))
    run.feed(step("", "find_text", {"text": "total"}, "Found 'total' on page 1."))
    res = run.feed(step("", "scroll_down", {"": {}}, SCROLL_ERR, error=True))
    assert LOOP in res.fired
    assert "at step 1 and again now" in res.text
    assert "TypeError: ScrollDown.run() got an unexpected keyword argument ''" in res.text


def test_one_immediate_retry_of_a_failed_call_is_not_yet_a_loop(sem):
    run = Run(sem)
    run.feed(step("", "scroll_down", {"": {}}, SCROLL_ERR, error=True))
    assert LOOP not in run.feed(step("", "scroll_down", {"": {}}, SCROLL_ERR, error=True)).fired


def test_a_call_that_timed_out_may_be_tried_again(sem):
    run = Run(sem)
    timeout = "ReadTimeout: the server did not answer within 30s"
    run.feed(step("", "fetch", {"url": "https://example.org/a"}, timeout, error=True))
    run.feed(step("", "think_tool", {"note": "wait"}, "ok"))
    assert (
        LOOP not in run.feed(step("", "fetch", {"url": "https://example.org/a"}, timeout, error=True)).fired
    )


def test_attempts_that_vary_only_the_quoted_bad_argument_fail_with_one_error(sem):
    run = Run(sem)
    for arg in ({"": {}}, {"args": {}}, {"": ""}):
        name = next(iter(arg))
        err = f"TypeError: ScrollDown.run() got an unexpected keyword argument '{name}'"
        res = run.feed(step("", "scroll_down", arg, err, error=True))
    assert LOOP in res.fired and "3 times in a row" in res.text


# --- searches, echoes and other agents ----------------------------------------------------------
def _hits(q: str) -> str:
    sites = ("city-archive", "museum-site", "annual-reports", "news-daily", "open-data")
    return "\n".join(f"[{q}](https://{s}.example.org/{len(q)}) what {s} says of it" for s in sites)


REWORDED_QUERIES = (
    "museum annual report 2019 visitors",
    "2019 museum report visitor count",
    "visitor numbers museum 2019 report",
)


def test_reworded_searches_with_no_result_opened_are_named(sem):
    run = Run(sem)
    for q in REWORDED_QUERIES:
        res = run.feed({**step("", "web_search", {"query": q}, _hits(q)), "agent": "researcher"})
    assert LOOP in res.fired and "without opening any of the results" in res.text and "researcher" in res.text


def test_searches_with_a_result_opened_between_are_research(sem):
    run = Run(sem)
    for q in REWORDED_QUERIES:
        run.feed(step("", "web_search", {"query": q}, _hits(q)))
        run.feed(step("", "visit_page", {"url": f"https://example.org/{q[:5]}"}, "The 2019 report lists ..."))
    assert not run.fired_anywhere(LOOP)


def test_printing_the_request_instead_of_sending_it_is_an_empty_result(sem):
    run = Run(sem)
    asks = (
        "Please find the 2019 visitor count in the museum's annual report.",
        "Could you look up how many visitors the museum had in 2019 (annual report)?",
        "Please retrieve the museum's 2019 annual report and its visitor count.",
    )
    for a in asks:
        code = f'request = (\n    "{a}"\n)\nprint(request)'
        res = run.feed(
            {**step("", "python", code, f"Execution logs:\n{a}\nLast output: None"), "agent": "lead"}
        )
    assert LOOP in res.fired and "only printed back the text of its own input" in res.text


def test_code_reissued_by_another_agent_after_it_brought_nothing(sem):
    code = 'rows = fetch_rows("sales_2019")\nprint(len(rows))'
    run = Run(sem)
    run.feed({**step("I will count the rows.", "execute_code", code, ""), "agent": "Analyst"})
    run.feed({**step("Let us try a different source."), "agent": "Reviewer"})
    res = run.feed({**step("Running it myself.", "execute_code", code, ""), "agent": "Checker"})
    assert LOOP in res.fired and "`Checker` re-issued `Analyst`'s `execute_code` call from step 1" in res.text


def test_scheduled_fact_and_plan_updates_are_not_repeated_messages(sem):
    run = Run(sem)
    for k in range(4):
        run.feed(
            {
                **step(
                    f"### 1. Facts given in the task\n- a report from 2019\n### 2. Facts to look up\n- item {k}"
                ),
                "agent": "researcher",
            }
        )
        run.feed({**step("", "web_search", {"query": f"report part {k}"}, f"hit {k}"), "agent": "researcher"})
    assert not run.fired_anywhere(LOOP)


def test_one_immediate_repeat_of_an_empty_search_is_not_yet_a_loop(sem):
    run = Run(sem)
    run.feed(step("Search the docs.", "search_docs", {"query": "refund policy"}, "No results."))
    assert (
        LOOP not in run.feed(step("Again.", "search_docs", {"query": "refund policy"}, "No results.")).fired
    )


# --- a cycle of the same few calls --------------------------------------------------------------
CYCLE = (
    step(
        "",
        "search_dir",
        '"XmlText" src',
        "Found 3 matches for XmlText in src:\nsrc/a.java\nsrc/b.java\nsrc/c.java",
    ),
    step("", "search_dir", '"RawValue" src', "Found 1 matches for RawValue in src:\nsrc/raw.java"),
    step("", "open", "src/a.java", "[File: src/a.java (120 lines total)]\n1:package x;\n2:class A {}"),
)


def test_the_same_few_calls_reissued_in_order_with_the_same_results_are_a_cycle(sem):
    run = Run(sem, task="Find where XmlText values are written")
    run.feed(*CYCLE)
    res = run.feed(*CYCLE)
    assert LOOP in res.fired
    assert "re-issued 3 calls in the same order as at steps 1-3" in res.text
    assert '`search_dir` `"XmlText" src`' in res.text and "the same results again" in res.text


def test_a_cycle_with_an_edit_between_the_rounds_is_not_named(sem):
    run = Run(sem, task="Find where XmlText values are written")
    run.feed(*CYCLE, edit("src/a.java", "class A {}", "class A { int x; }"), *CYCLE)
    assert all("re-issued 3 calls" not in (r.text or "") for r in run.results)


def test_the_same_calls_bringing_new_results_are_not_a_cycle(sem):
    run = Run(sem, task="Watch the build queue")
    for k in range(2):
        run.feed(
            bash("ls queue/", f"job-{k}a job-{k}b"),
            bash("cat queue/status", f"{k} running"),
            bash("tail -n 3 build.log", f"building target {k}"),
        )
    assert all("re-issued" not in (r.text or "") for r in run.results)


def _on_page(url: str, body: str) -> str:
    return f"Address: {url}\nViewport position: Showing page 1 of 3.\n=======================\n{body}"


def test_a_find_on_page_repeated_on_a_newly_opened_page_is_a_new_call(sem):
    run = Run(sem)
    old, new = "https://example.org/annual-report", "https://example.com/archive/2019"
    find = {"search_string": "visitor count"}
    not_found = "The search string 'visitor count' was not found on this page."
    run.feed(step("", "visit_page", {"url": old}, _on_page(old, "Annual report, overview")))
    run.feed(step("", "find_on_page", find, _on_page(old, not_found)))
    run.feed(step("", "web_search", {"query": "museum 2019 visitor count archive"}, _hits("museum")))
    run.feed(step("", "visit_page", {"url": new}, _on_page(new, "Archive of 2019 reports")))
    res = run.feed(step("", "find_on_page", find, _on_page(new, not_found)))
    assert LOOP not in res.fired


def test_a_find_on_page_repeated_on_the_same_page_is_still_a_reissue(sem):
    run = Run(sem)
    url = "https://example.org/annual-report"
    find = {"search_string": "visitor count"}
    not_found = "The search string 'visitor count' was not found on this page."
    run.feed(step("", "visit_page", {"url": url}, _on_page(url, "Annual report, overview")))
    run.feed(step("", "find_on_page", find, _on_page(url, not_found)))
    run.feed(step("", "find_on_page", {"search_string": "2019"}, _on_page(url, "In 2019 the museum opened")))
    res = run.feed(step("", "find_on_page", find, _on_page(url, not_found)))
    assert LOOP in res.fired and "re-issued the `find_on_page` call from step 2" in res.text


def test_a_call_failing_on_an_argument_the_tool_does_not_take_is_told_to_drop_it(sem):
    err = (
        "Error when executing tool scroll_down with arguments {'page': 1}: "
        "TypeError: ScrollTool.forward() got an unexpected keyword argument 'page'"
    )
    run = Run(sem)
    run.feed(step("", "scroll_down", {"page": 1}, err, True))
    run.feed(step("Let me plan the next steps."))
    res = run.feed(step("", "scroll_down", {"page": 1}, err, True))
    assert LOOP in res.fired
    assert "`scroll_down` does not take the argument named `page` it was given: call it with only" in res.text


def test_a_script_s_own_unexpected_argument_is_not_the_tool_call_s_fault(sem):
    err = "Traceback (most recent call last):\nTypeError: parse() got an unexpected keyword argument 'strict'"
    run = Run(sem)
    for _ in range(3):
        res = run.feed(bash("python repro.py", err, error=True))
    assert LOOP in res.fired and "does not take the argument" not in res.text
