"""verification_skip: completion claims over unverified changes."""

from __future__ import annotations

from streams.core.reading import grounding

from .trajectories import Run, bash, edit, finish, step, view

SKIP = "verification_skip"


def test_finish_after_edit_without_any_check_fires_and_names_the_file(sem):
    run = Run(sem, task="Fix the off-by-one in pagination")
    run.feed(view("api/pagination.py"), edit("api/pagination.py", "page * size", "(page - 1) * size"))
    res = run.feed(finish("I fixed the off-by-one error in the pagination offset."))
    assert SKIP in res.fired
    assert "api/pagination.py" in res.text


def test_claiming_tests_pass_without_running_them_fires_mid_run_and_scores_highest_at_finish(sem):
    run = Run(sem)
    run.feed(edit("src/cache.py", "ttl=60", "ttl=300"))
    res = run.feed(step("All tests pass now, the cache TTL is fixed."))
    assert SKIP in res.fired and "no test has run" in res.text
    res = run.feed(finish("All tests pass now, the cache TTL is fixed."))
    assert run.score(SKIP) == 1.0


def test_running_the_tests_after_the_change_verifies_it(sem):
    run = Run(sem)
    run.feed(
        edit("src/cache.py", "ttl=60", "ttl=300"),
        bash("python -m pytest tests/test_cache.py -q", "4 passed in 0.12s"),
    )
    assert SKIP not in run.feed(finish("Done: the cache TTL is fixed and all tests pass.")).fired


def test_a_documentation_only_change_needs_no_test_run(sem):
    run = Run(sem)
    run.feed(edit("docs/README.md", "Instal", "Install"))
    assert SKIP not in run.feed(finish("The typo is fixed.")).fired


def test_rereading_a_changed_source_file_is_not_a_verification(sem):
    run = Run(sem)
    run.feed(edit("src/a.py", "x", "y"), view("src/a.py", "1  y = 1"))
    assert SKIP in run.feed(finish("Done.")).fired


def test_rereading_another_file_does_not_verify_the_change(sem):
    run = Run(sem)
    run.feed(edit("src/a.py", "x", "y"), edit("src/b.py", "x", "y"), view("src/a.py"))
    res = run.feed(finish("Both changes are done."))
    assert SKIP in res.fired and "src/b.py" in res.text


def test_shell_changes_count_as_modifications(sem):
    run = Run(sem)
    run.feed(bash("sed -i 's/DEBUG = True/DEBUG = False/' settings.py", ""))
    res = run.feed(finish("That should fix it."))
    assert SKIP in res.fired and "`settings.py`" in res.text


def test_hedged_or_planned_completion_mid_run_is_not_a_claim(sem):
    run = Run(sem)
    run.feed(bash("sed -i 's/DEBUG = True/DEBUG = False/' settings.py", ""))
    assert SKIP not in run.feed(step("That should fix it. Let me run the reproduction script.")).fired


def test_a_change_after_the_last_test_run_is_unverified_again(sem):
    run = Run(sem)
    run.feed(
        edit("src/x.py", "a", "b"),
        bash("pytest -q", "3 passed"),
        edit("src/x.py", "b", "c"),
    )
    assert SKIP in run.feed(finish()).fired


def test_qa_agent_answering_without_changes_never_fires(sem):
    run = Run(sem, task="What port does the admin service listen on?", profile="qa")
    run.feed(
        bash("grep -rn ADMIN_PORT deploy/", "deploy/admin.env:3: ADMIN_PORT=8443"),
        finish("Final answer: the admin service listens on port 8443."),
    )
    assert not run.fired_anywhere(SKIP)


def test_future_or_negated_completion_language_is_not_a_claim(sem):
    run = Run(sem)
    run.feed(edit("src/x.py", "a", "b"))
    run.feed(step("Once this is fixed I will run the tests."))
    run.feed(step("It is not done yet: the second call site still needs the new argument."))
    run.feed(step("I need to make sure all tests pass before finishing."))
    assert not run.fired_anywhere(SKIP)


# -- the order of a compound command (a check after the changes of one line covers them) --


def test_a_check_after_the_change_in_one_command_verifies_it(sem):
    run = Run(sem)
    run.feed(bash("sed -i 's/a/b/' src/f.py && python repro.py", "ok"))
    assert SKIP not in run.feed(finish("Fixed.")).fired


def test_a_change_after_the_check_in_one_command_is_unverified(sem):
    run = Run(sem)
    run.feed(bash("python repro.py && sed -i 's/a/b/' src/f.py", "ok"))
    res = run.feed(finish("Fixed."))
    assert SKIP in res.fired and "`src/f.py`" in res.text


def test_any_make_target_builds_and_checks_but_make_clean_alone_does_not(sem):
    run = Run(sem)
    run.feed(
        edit("src/ext/autodoc.py", "x", "y"), bash("cd repro && make clean && make html", "build succeeded.")
    )
    assert SKIP not in run.feed(finish("The cross-references render now.")).fired
    run = Run(sem)
    run.feed(edit("src/ext/autodoc.py", "x", "y"), bash("make clean", "removed _build"))
    assert SKIP in run.feed(finish("Done.")).fired


def test_restoring_a_copy_taken_after_the_last_check_is_not_a_change(sem):
    run = Run(sem)
    run.feed(
        edit("pkg/mod.py", "a", "b"),
        bash("pytest tests/test_mod.py", "1 failed"),
        bash("cp pkg/mod.py pkg/mod.py.modified && git checkout pkg/mod.py", "Updated 1 path"),
        bash("pytest tests/test_mod.py", "1 failed"),  # the same failure without the change
        bash("mv pkg/mod.py.modified pkg/mod.py", ""),
    )
    res = run.feed(finish("The failure is unrelated to my change."))
    assert SKIP not in res.fired


def test_moving_a_newly_written_file_into_place_is_a_change_named_without_the_backup(sem):
    run = Run(sem)
    run.feed(
        bash("pytest -q", "3 passed"),
        bash("cat <<'EOF' > pkg/lookups.py.new\ndef f(): pass\nEOF", ""),
        bash("mv pkg/lookups.py.new pkg/lookups.py", ""),
    )
    res = run.feed(finish("Done."))
    assert SKIP in res.fired and "`pkg/lookups.py`" in res.text and ".new" not in res.text


def test_putting_an_unchecked_copy_back_is_a_change(sem):
    run = Run(sem)
    run.feed(
        edit("pkg/mod.py", "a", "b"),
        bash("cp pkg/mod.py pkg/mod.py.bak && git checkout pkg/mod.py", ""),
        bash("pytest -q", "3 passed"),  # checks the original, not the edit set aside
        bash("mv pkg/mod.py.bak pkg/mod.py", ""),
    )
    res = run.feed(finish("Done."))
    assert SKIP in res.fired and "`pkg/mod.py`" in res.text and ".bak" not in res.text


# -- the run-level check of a chat's or a manager's answer --


def msg(agent: str, text: str) -> dict:
    return {"agent": agent, "thought": text}


def code(agent: str, text: str, source: str, output: str) -> dict:
    return {
        "agent": agent,
        "thought": text,
        "action": "execute_code",
        "action_input": source,
        "observation": output,
    }


def test_a_chat_ending_on_figures_no_tool_produced_fires_and_names_them(sem):
    run = Run(sem, task="Which of the two listed homes sold for more in 2022, and for how much?")
    run.feed(
        msg("Planner", "Let us find the sale prices of both homes."),
        msg("RealEstate_Expert", "Home A sold for 850000 and home B sold for 950000."),
        msg("Checker", "I verified the figures: home B sold for more, at **950000**."),
    )
    res = run.feed(msg("Planner", "TERMINATE"))
    assert SKIP in res.fired
    assert (
        "`950000`" in res.text and "no tool output" in res.text and "No tool produced any output" in res.text
    )


def test_a_chat_whose_answer_a_tool_computed_is_quiet(sem):
    run = Run(sem, task="How many clients have an even street number?")
    run.feed(
        msg("Planner", "Load the sheet and count the even street numbers."),
        code(
            "Analyst",
            "Counting them.",
            "import pandas as pd\nprint(count_even('clients.xlsx'))",
            "exitcode: 0\n4127\n",
        ),
        msg("Checker", "The code printed 4127, so **4127** clients have an even street number."),
    )
    assert not run.feed(msg("Planner", "TERMINATE")).fired


def test_printing_back_the_call_s_own_literal_confirms_nothing(sem):
    run = Run(sem, task="In what year was the species first recorded west of the river?")
    run.feed(
        msg("manager", "Plan: ask the search agent for the record."),
        code(
            "manager",
            "Asking.",
            'task = "Please find the first record west of the river"\nprint(task)',
            "Please find the first record west of the river",
        ),
        code("manager", "Answering.", 'final_answer("1937")', "Last output from code snippet:\n1937"),
    )
    res = run.feed(msg("manager", "FINAL ANSWER: 1937"))
    assert SKIP in res.fired and "`1937`" in res.text and "only printed back" in res.text


def test_an_answer_the_task_itself_gives_needs_no_check(sem):
    run = Run(sem, task="Read the letters THESE AGULL GLIDE in order and write the sentence.")
    run.feed(msg("manager", "Plan: read the rows in order."))
    assert not run.feed(msg("manager", "FINAL ANSWER: THE SEAGULL GLIDE")).fired


def test_a_fenced_answer_is_not_code_so_the_next_message_is_not_its_output(sem):
    run = Run(sem, task="Which of the two albums got no letter grade?")
    run.feed(
        msg("Planner", "Let us check the critic's grades for both albums."),
        msg("Critic_Expert", "The album without a grade is:\n```\nSilverline\n```"),
        msg("Checker", "I checked the critic's site: Silverline has no grade, so it is **Silverline**."),
    )
    res = run.feed(msg("Planner", "TERMINATE"))
    assert SKIP in res.fired and "`Silverline`" in res.text


def test_code_in_an_unlabelled_fence_is_still_code(sem):
    assert grounding.code_of("Run it:\n```\nrows = load('sales.csv')\nprint(len(rows))\n```")
    assert grounding.code_of("```\nls -la data/\n```")
    assert not grounding.code_of("The answer:\n```\nSilverline\n```")
    assert not grounding.code_of("```text\nthe first line of the poem\nand the second\n```")
    assert not grounding.code_of("```python\n# nothing to run here\n```")


def _long_search_output(fact_line: str) -> str:
    filler = [
        f"Result {i}: the {w} archive lists record {i} of the river survey." for i, w in enumerate(WORDS_LONG)
    ]
    return "exitcode: 0\nCode output:\n" + "\n".join([*filler[:40], fact_line, *filler[40:]])


WORDS_LONG = [
    f"{a}{b}"
    for a in ("north", "south", "east", "west", "upper", "lower")
    for b in (
        "gate",
        "ford",
        "mill",
        "weir",
        "lock",
        "bank",
        "pier",
        "dock",
        "quay",
        "yard",
        "wharf",
        "marsh",
        "moor",
        "fen",
    )
]


def test_a_fact_in_the_middle_of_a_long_output_confirms_the_answer(sem):
    out = _long_search_output("Result 99: the gauge at Kellswater read 18,767 on that day.")
    assert len(out) > 4000 and 1500 < out.index("18,767") < len(out) - 500
    run = Run(sem, task="What did the river gauge read on the day of the flood?")
    run.feed(
        msg("Planner", "Search the survey for the gauge reading."),
        code("Analyst", "Searching.", "print(search_survey('gauge reading'))", out),
        msg("Checker", "The gauge read **18,767** that day."),
    )
    assert SKIP not in run.feed(msg("Planner", "TERMINATE")).fired


def test_a_long_output_is_remembered_within_the_filter_s_bound():
    found = grounding.tokens(" ".join(f"word{i} {i * 7919}" for i in range(3000)))
    kept = grounding.kept_hashes(found)
    assert len(kept) <= grounding.TOKENS_PER_STEP
    assert kept == grounding.kept_hashes(set(sorted(found)))  # the same whatever the set's order
    numbers = sum(1 for t in found if t[0].isdigit())
    assert numbers >= grounding.TOKENS_PER_STEP and len(kept) == grounding.TOKENS_PER_STEP  # numbers first
    cur, old, n = grounding.rotate("current", "older", grounding.GENERATION - 10, len(kept))
    assert (cur, old, n) == ("", "current", 0)  # a filter is never filled past GENERATION
    assert grounding.rotate("current", "older", 10, len(kept)) == ("current", "older", 10)


def test_a_highlighted_value_changed_after_the_tool_result_is_unchecked(sem):
    run = Run(sem, task="Which two birthplace cities are farthest apart?")
    run.feed(
        msg("Planner", "Compute the pairwise distances."),
        code(
            "Geo_Expert", "Computing.", "print(farthest(cities))", "exitcode: 0\nBraintree, Honolulu 8199.05"
        ),
        msg("Checker", "The distance 8199.05 is right, so the answer is **Honolulu, Quincy**."),
    )
    res = run.feed(msg("Planner", "TERMINATE"))
    assert SKIP in res.fired and "`Honolulu, Quincy`" in res.text


def test_a_sub_agent_s_hand_off_and_a_quoted_terminate_do_not_end_the_run(sem):
    run = Run(sem, task="Find the year.")
    run.feed(
        msg("manager", "Plan: delegate the search."),
        {"agent": "search_agent", "action": "final_answer", "action_input": {"answer": "It is 1954."}},
    )  # the worker's hand-off: the manager goes on
    assert not run.fired_anywhere(SKIP)
    run.feed(msg("Executor", 'No code to run. Reply me only with "TERMINATE"'))
    assert not run.fired_anywhere(SKIP)


def test_the_answer_check_is_said_once_and_again_if_the_chat_goes_on(sem):
    run = Run(sem, task="What did the ticket cost?")
    run.feed(
        msg("Planner", "Find the price."), msg("Pricing_Expert", "The ticket cost **$60** in 2024. TERMINATE")
    )
    assert run.score(SKIP) >= 0.6 and "`$60`" not in run.results[-1].text
    res = run.feed(msg("Checker", "Let me double-check that."))
    assert SKIP in res.fired and "goes on" in res.text
    assert SKIP not in run.feed(msg("Planner", "TERMINATE")).fired  # the same facts: said already


def test_a_single_agent_run_or_one_that_edits_files_gets_no_answer_check(sem):
    run = Run(sem, task="What port does the admin service listen on?")
    run.feed(step("", "search", {"query": "admin port"}, "no matches"))
    assert SKIP not in run.feed(finish("Final answer: 8443")).fired
    run = Run(sem, task="Fix the port.")
    run.feed(msg("Planner", "Plan."), edit("cfg/admin.py", "80", "8443"), bash("pytest -q", "2 passed"))
    assert SKIP not in run.feed(msg("Coder", "The admin port is now **8443**. TERMINATE")).fired


# -- MAST's "no verification": a team ending while no check of anything succeeded --


def test_a_chat_ending_after_its_only_check_failed_fires_naming_the_step_not_the_words(sem):
    run = Run(sem, task="Which contributor shares a name with a former head of government?")
    run.feed(
        msg("Planner", "Let us list the contributors and compare the names."),
        {
            **code("Search_Expert", "Searching.", "print(search('names'))", "TypeError"),
            "observation_is_error": True,
        },
    )
    run.feed(
        msg(
            "Verification_Expert", "I agree, it looks correct: none of the contributors matches any of them."
        ),
    )
    res = run.feed(msg("Planner", "TERMINATE"))
    assert SKIP in res.fired
    assert "the only tool run in this chat failed (the last at step 2)" in res.text
    assert "looks correct" not in res.text and "contributors" not in res.text


def test_a_chat_where_nothing_ran_and_the_verifier_only_agrees_fires(sem):
    run = Run(sem, task="Which contributor shares a name with a former head of government?")
    run.feed(
        msg("Planner", "Let us list the contributors and compare the names."),
        msg("Expert", "None of the contributors matches any former head of government."),
        msg("Verification_Expert", "I agree with the conclusion; it looks correct."),
    )
    res = run.feed(msg("Planner", "TERMINATE"))
    assert SKIP in res.fired and "no tool ran in this chat" in res.text


def test_a_chat_whose_verifier_ran_a_check_that_succeeded_is_quiet(sem):
    run = Run(sem, task="Which contributor shares a name with a former head of government?")
    run.feed(
        msg("Planner", "Let us list the contributors and compare the names."),
        msg("Expert", "None of the contributors matches any former head of government."),
        code(
            "Verification_Expert",
            "Re-checking.",
            "print(compare(contributors, heads))",
            "exitcode: 0\nmatches: []",
        ),
    )
    assert SKIP not in run.feed(msg("Planner", "None matches. TERMINATE")).fired


def test_an_executor_s_failed_run_as_a_message_checks_nothing_and_a_successful_one_does(sem):
    def chat(status: str) -> list[dict]:
        return [
            msg("Planner", "Count the rows.\n```python\nprint(len(rows))\n```"),
            msg("Computer_terminal", f"exitcode: {status}\nCode output: "),
            msg("Checker", "I agree, the table has no rows left to count."),
        ]

    failed = Run(sem, task="Are any rows left in the sheet?")
    failed.feed(*chat("1 (execution failed)"))
    res = failed.feed(msg("Planner", "TERMINATE"))
    assert SKIP in res.fired and "failed (the last at step 2)" in res.text
    ok = Run(sem, task="Are any rows left in the sheet?")
    ok.feed(*chat("0 (execution succeeded)"))
    assert SKIP not in ok.feed(msg("Planner", "TERMINATE")).fired


def test_the_no_check_finding_is_said_once_per_chat(sem):
    run = Run(sem, task="Which contributor shares a name with a former head of government?")
    run.feed(msg("Planner", "Compare the names."), msg("Expert", "None of them matches."))
    assert SKIP in run.feed(msg("Planner", "TERMINATE")).fired
    assert SKIP not in run.feed(msg("Expert", "TERMINATE")).fired
