"""The monitors on steps shaped like real agents' (SWE-agent, mini-swe-agent, group chats): each
test is one failure class seen on real runs, where steering used to say something false."""

from __future__ import annotations

import random
import string

from .trajectories import Run, step

LOOP, SKIP, CONTRA, DRIFT, SPRAWL = (
    "semantic_loop",
    "verification_skip",
    "claim_contradiction",
    "silent_topic_drift",
    "late_sprawl",
)


def mini(cmd: str, out: str = "<returncode>0</returncode>\n<output>\n</output>", thought: str = "") -> dict:
    return step(thought, "bash", cmd, out)


def test_submit_after_running_the_reproduction_script_is_not_flagged(sem):
    run = Run(sem, task="Fix the HTML writer ignoring formats")
    run.feed(
        mini("cat <<'EOF' > reproduce_issue.py\nfrom astropy.table import Table\nprint(Table())\nEOF"),
        mini(
            "sed -i 's/self.data.cols = cols/self.data.cols = cols; self._set_formats()/' astropy/io/ascii/html.py"
        ),
        mini(
            "cd /testbed && python reproduce_issue.py",
            "<returncode>0</returncode>\n<output>\n1.24e-24\n</output>",
        ),
        mini("rm reproduce_issue.py"),
    )
    res = run.feed(
        step("Ready to submit.", "bash", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A")
    )
    assert SKIP not in res.fired


def test_submit_after_an_edit_whose_check_could_not_run_is_flagged_naming_the_open_file(sem):
    run = Run(sem, task="Fix the deserializer")
    run.feed(
        step(
            "Open the deserializer.",
            "open",
            "src/main/java/com/x/Deser.java",
            "[File: Deser.java (120 lines)]",
        ),
        step(
            "Apply the fix.",
            "edit",
            "75:81\nimport org.junit.jupiter.api.Test;\nimport java.io.File;\n",
            "[File: Deser.java (122 lines total)]",
        ),
        step(
            "Compile the reproduction.",
            "javac",
            "ReproduceIssue.java",
            "/bin/bash: line 62230: javac: command not found",
            error=True,
        ),
    )
    res = run.feed(step("The fix is in place, let's submit.", "submit", None, ""))
    assert SKIP in res.fired and res.final
    assert "`src/main/java/com/x/Deser.java`" in res.text
    assert "org.junit" not in res.text and "java.io" not in res.text
    assert "could not run" in res.text


def test_a_run_that_goes_on_after_an_unverified_submit_is_told_again(sem):
    run = Run(sem)
    run.feed(step("", "edit", "3:3\nx = 1\n", "ok"), step("Submit.", "submit", None, ""))
    res = run.feed(step("The submission was rejected; let me look again.", "open", "src/a.py", "1: x = 1"))
    assert SKIP in res.fired and not res.final and "step 2" in res.text


def test_reproduced_or_about_statements_are_no_root_causes(sem):
    run = Run(sem, task="file_move_safe leaves wrong permissions")
    run.feed(step("The root cause is that file_move_safe copies the temporary file's 0o600 permissions."))
    run.feed(step("The issue is reproduced."))
    run.feed(step("The issue is about the default of FILE_UPLOAD_PERMISSIONS."))
    assert not run.fired_anywhere(CONTRA)


def test_a_hedged_guess_or_a_refinement_is_no_contradiction(sem):
    run = Run(sem)
    run.feed(step("The root cause is in `ColormapRegistry`: names are not registered."))
    run.feed(step("Maybe the bug is due to pyplot caching the default colormap?"))
    run.feed(step("More precisely, the root cause is `ColormapRegistry.register` skipping aliases."))
    assert not run.fired_anywhere(CONTRA)


def test_two_subjects_with_opposite_findings_are_no_contradiction(sem):
    run = Run(sem)
    run.feed(step("So the main parser has `called_from_command_line=True`."))
    res = run.feed(step("So the subparser has `called_from_command_line=None`, not True."))
    assert CONTRA not in res.fired


def test_speaker_only_steps_never_claim_the_same_command_and_result(sem):
    run = Run(sem)
    for k in range(6):
        run.feed(step(f"Please check the table again, row {k}.", "Orchestrator (thought)", None, None))
    assert all("same input ()" not in (r.text or "") for r in run.results)


def test_an_agent_rewording_the_same_failing_instruction_is_a_loop_named_by_agent(sem):
    run = Run(sem)
    asks = [
        "Please search the web for the 2019 annual report of the museum and give me the visitor count.",
        "Search online for the museum's 2019 annual report and tell me its visitor count.",
        "Please look up the 2019 annual report of the museum on the web and find the visitor count.",
    ]
    reply = "I could not find that report on the museum's website."
    res = None
    for a in asks:
        run.feed({**step(a), "agent": "Orchestrator"})
        res = run.feed({**step(reply), "agent": "WebSurfer"})
    assert run.fired_anywhere(LOOP)
    fired = next(r for r in run.results if LOOP in r.fired)
    assert "`Orchestrator` has sent essentially the same message" in fired.text and res is not None


def test_an_agent_asking_again_with_new_facts_is_not_a_loop(sem):
    run = Run(sem)
    for year, seen in (("2017", "41,200"), ("2018", "43,900"), ("2019", "45,150"), ("2020", "12,480")):
        run.feed(
            {
                **step(f"Please find the visitor count in the museum's {year} annual report."),
                "agent": "Orchestrator",
            }
        )
        run.feed({**step(f"The {year} report lists {seen} visitors."), "agent": "WebSurfer"})
    assert not run.fired_anywhere(LOOP)


def test_distinct_strings_of_rare_tokens_are_not_the_same_message(sem):
    # the static model puts any two strings of unknown tokens close together (random ids: ~0.9)
    rng = random.Random(41)
    run = Run(sem)
    for _ in range(8):
        run.feed(step("".join(rng.choice(string.ascii_letters + string.digits) for _ in range(80))))
    assert not run.fired_anywhere(LOOP)


def test_a_message_repeated_around_a_new_command_output_is_not_a_loop(sem):
    run = Run(sem)
    run.feed(step("I'm doing well, thanks for asking."))
    run.feed(step("", "execute_bash", {"command": "storybook"}, "OK, I was stuck, but no more."))
    run.feed(step("I'm doing well, thanks for asking."))
    run.feed(step("I'm doing well, thanks for asking."))
    assert not run.fired_anywhere(LOOP)


def test_a_message_repeated_around_the_same_output_again_is_a_loop(sem):
    run = Run(sem)
    ask = "Let me check whether the service is up before going on."
    for _ in range(3):
        run.feed(step("", "execute_bash", {"command": "curl -s localhost:8080/health"}, "connection refused"))
        res = run.feed(step(ask))
    assert "essentially the same message 3 times" in (res.text or "")


def test_routing_messages_are_neither_drift_nor_sprawl_nor_loop(sem):
    run = Run(sem, task="How many clients get the sunset awning design?")
    for _ in range(8):
        run.feed({**step("Next speaker: WebSurfer"), "agent": "Orchestrator"})
        run.feed({**step("TERMINATE"), "agent": "Orchestrator"})
    assert not (run.fired_anywhere(DRIFT) or run.fired_anywhere(SPRAWL) or run.fired_anywhere(LOOP))


def test_the_same_edit_applied_again_and_again_is_a_loop(sem):
    run = Run(sem)
    body = "194:194\n      if (responseException.getContent() != null) {\n"
    for n in (267, 278, 289):
        run.feed(
            step("Apply the edit.", "edit", body, f"[File: RegistryEndpointCaller.java ({n} lines total)]")
        )
    assert LOOP in run.results[-1].fired and "same change" in run.results[-1].text


def test_a_missing_compiler_retried_with_changing_line_numbers_is_a_loop(sem):
    run = Run(sem)
    for line in (62230, 62245, 62260):
        run.feed(
            step(
                "Compile it.",
                "javac",
                "-cp . Test.java",
                f"/bin/bash: line {line}: javac: command not found",
                error=True,
            )
        )
    assert LOOP in run.results[-1].fired and "javac: command not found" in run.results[-1].text


def test_test_runs_on_different_targets_are_not_reworded_searches(sem):
    run = Run(sem)
    for target in ("expressions_window", "expressions", "queries", "aggregation"):
        run.feed(mini(f"python3 tests/runtests.py {target}", "Ran 12 tests in 0.3s\n\nOK"))
    assert not run.fired_anywhere(LOOP)


def test_grepping_other_files_for_a_name_is_exploration(sem):
    run = Run(sem)
    for path in (
        "django/db/models/sql/compiler.py",
        "django/db/models/sql/query.py",
        "django/db/models/expressions.py",
    ):
        run.feed(mini(f'grep "ResolvedOuterRef" {path}', "<returncode>1</returncode>\n<output>\n</output>"))
    assert not run.fired_anywhere(LOOP)


def test_dotted_identifiers_are_not_counted_as_new_files(sem):
    run = Run(sem, task="Fix the HTML writer")
    for k in range(30):
        run.feed(
            mini(
                f"python -c 'import t; t.write({k}); new_col.info; self.data'",
                "ok",
                thought=f"Check the writer output variant {k}.",
            )
        )
    # no monitor names it as a file (the loop floor may quote the command that holds it: thirty
    # one-liners that each print "ok" bring nothing new)
    assert all("t.write" not in text for r in run.results for m, text in r.said if m != "semantic_loop")


def test_reading_the_tests_of_the_function_to_fix_is_not_drift(sem):
    task = "Class methods from nested classes cannot be used as Field.default in MigrationWriter serializer"
    run = Run(sem, task=task)
    for k in range(6):
        run.feed(
            mini(
                f"nl -ba django/db/migrations/serializer.py | sed -n '{k * 40},{k * 40 + 40}p'",
                "class FunctionTypeSerializer",
                thought="Read the serializer for nested class methods.",
            )
        )
    for k in range(12):
        run.feed(
            mini(
                f"grep -n serializer tests/migrations/test_writer_{k}.py",
                "def test_serialize_nested",
                thought=f"`test_writer.py` tests `MigrationWriter`; the HTML of example {k} renders oddly.",
            )
        )
    assert not run.fired_anywhere(DRIFT)


def test_looking_up_different_ids_with_one_tool_is_not_a_reworded_loop(sem):
    run = Run(sem)
    for order in ("#W4597054", "#W4836353", "#W7773202", "#W9300146"):
        run.feed(step("", "get_order_details", {"order_id": order}, '{"status": "delivered", "items": []}'))
    assert not run.fired_anywhere(LOOP)


# Magentic-One-shaped chats: the user asks, the orchestrator plans in notes, instructs its
# agents ("Orchestrator (-> WebSurfer)"), a browsing agent reports the page it sees, and the
# orchestrator gives the final answer ("Orchestrator (final answer)").
M1_TASK = (
    "According to the USGS, in what year was the clownfish first found as a nonnative species in the US?"
)


def _page(action: str, title: str, text: str) -> str:
    return (
        f"{action}\n\nHere is a screenshot of [{title}](https://nas.er.usgs.gov/queries/FactSheet.aspx). "
        "The viewport shows 31% of the webpage, and is positioned at the top of the page.\n"
        f"Automatic OCR of the page screenshot has detected the following text:\n\n{text}"
    )


def _m1_chat(sem, page_text: str, answer: str) -> Run:
    run = Run(sem, task=M1_TASK, profile="qa")
    for agent, text in (
        ("human", M1_TASK),
        (
            "Orchestrator (thought)",
            "Initial plan:\n\nWe are working to address the following user request: ...",
        ),
        (
            "Orchestrator (-> WebSurfer)",
            "Please open the USGS fact sheet for the clownfish (Amphiprion ocellaris).",
        ),
        (
            "WebSurfer",
            _page("I clicked 'clown anemonefish - Species Profile'.", "Species Profile", page_text),
        ),
        ("Orchestrator (thought)", "Request satisfied."),
        ("Orchestrator (final answer)", answer),
    ):
        run.feed({**step(text), "agent": agent})
    return run


def test_a_chat_answer_that_no_page_shows_is_flagged_at_the_orchestrators_final_answer(sem):
    run = _m1_chat(
        sem,
        "Nonindigenous Occurrences: the first record is from Florida.",
        "The clownfish was first found as a nonnative species in the US in 2018.",
    )
    last = run.results[-1]
    assert last.final and SKIP in last.fired
    assert "`2018`" in (last.text or "") and "No tool produced any output" not in (last.text or "")


def test_a_chat_answer_the_browsing_agents_page_shows_is_not_flagged(sem):
    run = _m1_chat(
        sem,
        "Nonindigenous Occurrences: the first record, from Florida, dates from 2018.",
        "The clownfish was first found as a nonnative species in the US in 2018.",
    )
    assert run.results[-1].final and not run.fired_anywhere(SKIP)


def test_the_user_who_asked_never_leads_and_a_qualified_speaker_is_its_agent():
    from streams.core.reading.features import extract, speaker

    assert speaker("Orchestrator (-> WebSurfer)") == ("Orchestrator", "")
    assert speaker("Orchestrator (thought)") == ("Orchestrator", "note")
    assert speaker("Orchestrator (final answer)") == ("Orchestrator", "final")
    assert speaker("Coder") == ("Coder", "")
    note = extract(
        {"step": 2, "agent": "Orchestrator (thought)", "thought": "We are stuck; try the archive."}, 8000
    )
    assert note.agent == "Orchestrator" and note.coordination
    assert extract({"step": 1, "agent": "user_proxy", "thought": "Solve it."}, 8000).by_user


HICCUP = "Can Hiccup Supply Enough Fish to Maintain a Dragon's Diet?"
RESULTS = (
    "About 2,340 results\nJournal of Interdisciplinary Science Topics - University of Leicester\n"
    f"journals.le.ac.uk\n{HICCUP} ... Toothless ... the fish ...\nRelated searches: dragon diet"
)


def _search_page(query: str, results: str) -> str:
    return (
        f"I typed '{query}' into '0 characters out of 2000'.\n\nHere is a screenshot of [{query} - Search]"
        f"(https://www.bing.com/search?q={query.replace(' ', '+')}). The viewport shows 40% of the webpage, "
        "and is positioned at the top of the page.\nAutomatic OCR of the page screenshot has detected the "
        f"following text:\n\n{results}"
    )


def test_a_browsing_agent_bringing_back_the_same_results_to_reworded_requests_is_a_loop(sem):
    run = Run(sem, task=f"What was the volume in m^3 of the fish bag in the paper '{HICCUP}'?")
    asks = [
        f"Please search for the paper '{HICCUP}' and find the fish bag volume.",
        "Search again for the Leicester paper about Hiccup and look for the volume of the fish bag.",
        "Please try another search for the Hiccup paper and report the fish bag volume.",
    ]
    queries = [
        "Hiccup Supply Enough Fish Dragon",
        "Leicester Hiccup fish bag volume",
        "Hiccup dragon diet paper pdf",
    ]
    for ask, query in zip(asks, queries, strict=True):
        run.feed({**step(ask), "agent": "Orchestrator (-> WebSurfer)"})
        run.feed({**step(_search_page(query, RESULTS)), "agent": "WebSurfer"})
    last = run.results[-1]
    assert LOOP in last.fired
    assert "`WebSurfer` has shown the same page content 3 times" in (last.text or "")


def test_a_browsing_agent_scrolling_through_new_text_or_finding_new_results_is_not_a_loop(sem):
    run = Run(sem, task="How many studio albums did Mercedes Sosa publish between 2000 and 2009?")
    sections = [
        "Early life\nSosa was born in San Miguel de Tucumán\nto a family of French descent\nher father worked",
        "Career\nIn 1950, at age fifteen, she won a singing competition\norganised by a local radio\nand a contract",
        "Nueva canción\nSosa and her first husband\nfounded a movement\nof Latin American folk songs",
        "Discography\nStudio albums\nCorazón Libre (2005)\nCantora 1 (2009)",
    ]
    for k, text in enumerate(sections):
        run.feed(
            {**step("Please scroll down to the Discography section."), "agent": "Orchestrator (-> WebSurfer)"}
        )
        page = _search_page(f"Mercedes Sosa page {k}", text).replace("I typed", "I scrolled down; I typed")
        run.feed({**step(page), "agent": "WebSurfer"})
    assert not run.fired_anywhere(LOOP)


GAME = "```python\n# main.py\nimport random\n\ndef roll():\n    return random.randint(1, 6)\n\nprint(roll())\n```"


def test_a_chat_that_ends_on_code_nothing_ran_is_flagged(sem):
    run = Run(sem, task="Write a dice game in Python.")
    run.feed({**step(f"Here is the game:\n{GAME}"), "agent": "Programmer"})
    run.feed({**step("The code looks fine to me. No further comments."), "agent": "Code_Reviewer"})
    res = run.feed({**step("The game is done. TERMINATE"), "agent": "Programmer"})
    assert SKIP in res.fired and "`import random`" in (res.text or "") and "never ran" in (res.text or "")


def test_a_chat_that_ends_on_code_that_ran_or_on_a_listing_of_it_is_not_flagged(sem):
    run = Run(sem, task="Write a dice game in Python.")
    run.feed({**step(f"Here is the game:\n{GAME}"), "agent": "Programmer"})
    run.feed({**step("exitcode: 0 (execution succeeded)\nCode output: 4"), "agent": "Computer_terminal"})
    run.feed({**step(f"It works. The final code:\n{GAME}"), "agent": "Programmer"})
    run.feed({**step("TERMINATE"), "agent": "Code_Reviewer"})
    assert not run.fired_anywhere(SKIP)


def test_a_quoted_text_in_an_untagged_fence_is_no_code_that_should_have_run(sem):
    run = Run(sem, task="Which stanza of the poem has indented lines?")
    poem = (
        "```\nI have not ever seen my father's grave.\n  and becomes less\nuntil there is nothing left\n```"
    )
    run.feed({**step(f"Here is the poem:\n{poem}"), "agent": "Poetry_Expert"})
    run.feed(
        {**step("exitcode: 0 (execution succeeded)\nCode output: stanza 3"), "agent": "Computer_terminal"}
    )
    run.feed({**step(f"Quoting it again:\n{poem}"), "agent": "Literature_Expert"})
    res = run.feed({**step("Stanza 3 has the indented lines. TERMINATE"), "agent": "Poetry_Expert"})
    assert "never ran" not in (res.text or "")


def test_agents_re_discussing_a_step_in_new_words_do_not_excuse_a_repeated_message(sem):
    run = Run(sem, task="Find the visitor count in the museum's 2019 annual report.")
    replies = [
        "I think we should look at the report again before we answer.",
        "Agreed, the report is where the number is; let us check it.",
        "Yes, checking the annual report seems like the right next step.",
    ]
    for reply in replies:
        run.feed({**step("Please check the 2019 annual report for the visitor count."), "agent": "Planner"})
        run.feed({**step(reply), "agent": "Analyst"})
    run.feed({**step("Please check the 2019 annual report for the visitor count."), "agent": "Planner"})
    assert run.fired_anywhere(LOOP)
