"""What a real agent's command line does: verify, modify, read, submit, and which files it names."""

from __future__ import annotations

import pytest

from streams.core.reading.features import extract
from streams.core.reading.shell import analyse, could_not_run, is_file_path, split_segments


@pytest.mark.parametrize(
    "token", ["src/a.py", "Foo.java", "tests/model_fields/", "astropy/io/ascii/html.py:351", "docs/releases"]
)
def test_file_shaped_tokens_are_files(token):
    assert is_file_path(token)


@pytest.mark.parametrize(
    "token",
    [
        "self.data",
        "org.junit",
        "jupiter.api",
        "java.io",
        "t.write",
        "e.g",
        "h.cards",
        "new_col.info",
        "s/Default",
        "-n",
        "https://example.org/a.py",
        "TestConfig.class",
    ],
)
def test_identifiers_sed_scripts_options_and_urls_are_not_files(token):
    assert not is_file_path(token)


def test_a_chained_reproduction_run_verifies():
    facts = analyse("cd /testbed && python reproduce_issue.py")
    assert facts.verifies and not facts.modifies and facts.verify_paths == ("reproduce_issue.py",)


@pytest.mark.parametrize(
    "cmd",
    [
        "./tests/runtests.py expressions",
        "python -m pytest tests/test_x.py -q 2>&1 | tail -5",
        "python -m unittest tests.test_x",
        "mvn test -Dtest=FooTest",
        "./gradlew test",
        "javac Foo.java && java Foo",
        "npm test",
        "go test ./...",
        "cargo test",
        "make test",
        "bin/test sympy/core",
    ],
)
def test_what_real_agents_run_to_check_their_work_verifies(cmd):
    assert analyse(cmd).verifies


def test_a_heredoc_writes_its_target_and_its_body_is_not_read_as_commands():
    facts = analyse("cat <<'EOF' > reproduce.py\nimport os\nrm -rf /tmp/x\npython other.py\nEOF")
    assert facts.modifies and facts.modify_paths == ("reproduce.py",) and not facts.verifies


def test_sed_in_place_names_the_file_not_the_script():
    facts = analyse("sed -i 's/self.data/self.cols/' astropy/io/ascii/html.py")
    assert facts.modifies and facts.modify_paths == ("astropy/io/ascii/html.py",)


def test_a_newline_inside_a_quoted_sed_script_does_not_split_the_command():
    facts = analyse("sed -i '/File Uploads/a \\\n* The default is now 0o644' docs/releases/3.0.txt")
    assert facts.modify_paths == ("docs/releases/3.0.txt",)


def test_housekeeping_and_reverts_change_nothing_to_verify():
    assert not analyse("rm reproduce_issue.py test_x.py").modifies
    assert not analyse("git checkout sklearn/utils/tests/test_set_output.py").modifies


def test_a_submit_command_is_recognised():
    assert analyse("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached").submits


def test_a_verification_that_could_not_run_is_detected():
    assert could_not_run("/bin/bash: line 62230: javac: command not found")
    assert could_not_run("python: can't open file '/testbed/repro.py': [Errno 2] No such file or directory")
    assert not could_not_run("FAILED tests/test_x.py::test_a - AssertionError\n1 failed in 0.2s")


def test_swe_agent_program_actions_are_shell_commands():
    f = extract(
        {
            "step": 1,
            "action": "javac",
            "action_input": "ReproduceIssue.java",
            "observation": "/bin/bash: line 5: javac: command not found",
            "observation_is_error": True,
        },
        8000,
    )
    assert not f.verifies and f.could_not_run
    f = extract({"step": 2, "action": "mvn", "action_input": "test", "observation": "BUILD SUCCESS"}, 8000)
    assert f.verifies


def test_an_edit_body_is_code_not_file_names():
    f = extract(
        {
            "step": 1,
            "action": "edit",
            "action_input": "10:12\nimport org.junit.jupiter.api.Test;\nimport java.io.File;\n",
            "observation": "[File: /repo/src/Foo.java (80 lines total)]",
        },
        8000,
    )
    assert f.modifies and f.paths == () and f.current_file_edit


def test_a_speaker_in_action_without_input_or_result_is_a_message_of_that_agent():
    f = extract(
        {
            "step": 3,
            "action": "Verification_Expert",
            "action_input": None,
            "observation": None,
            "thought": "Let us verify the count again.",
        },
        8000,
    )
    assert f.message and f.agent == "Verification_Expert" and f.action is None and f.sig == ""


@pytest.mark.parametrize(
    "text",
    [
        "Next speaker: WebSurfer",
        "TERMINATE",
        '{"is_request_satisfied": {"answer": false}, "next_speaker": "Coder"}',
        "There is no code from the last 1 message for me to execute. Group chat manager should let other "
        "participants continue the conversation.",
    ],
)
def test_routing_and_ledger_messages_are_coordination(text):
    f = extract({"step": 1, "agent": "Orchestrator", "thought": text}, 8000)
    assert f.coordination


def test_deeply_nested_input_is_read_without_recursion_errors():
    deep: object = "leaf"
    for _ in range(5000):
        deep = {"a": [deep]}
    f = extract({"step": 1, "action": "tool", "action_input": deep, "observation": "ok"}, 8000)
    assert "leaf" in f.act_text or f.act_text.startswith("tool")


@pytest.mark.parametrize(
    ("command", "segments"),
    [
        ("a && b || c; d\ne | f", ["a ", " b ", " c", " d", "e ", " f"]),
        ("echo 'x && y' \"p; q\" done", ["echo 'x && y' \"p; q\" done"]),
        ('echo "a \\" ; b" ; c', ['echo "a \\" ; b" ', " c"]),  # an escaped quote stays inside
        ("sleep 1 & wait", ["sleep 1 & wait"]),  # a lone & backgrounds, it does not separate
        ("echo x >| out", ["echo x >| out"]),  # `>|` writes a file, it is not a pipe
        ("a >|| b", ["a >", " b"]),  # but `||` is still "or"
        ("echo 'unclosed ; x", ["echo 'unclosed ; x"]),
    ],
)
def test_a_command_splits_on_separators_outside_quotes_only(command, segments):
    assert split_segments(command) == segments


def test_the_segments_of_a_line_keep_their_order():
    assert analyse("sed -i 's/a/b/' f.py && python repro.py").ops == (("change", "f.py"), ("check",))
    assert analyse("python repro.py; sed -i 's/a/b/' f.py").ops == (("check",), ("change", "f.py"))


def test_a_two_file_copy_or_move_is_kept_as_a_pair_with_backup_names_as_files():
    assert analyse("cp pkg/mod.py pkg/mod.py.modified").ops == (("cp", "pkg/mod.py", "pkg/mod.py.modified"),)
    assert analyse("mv lookups.py.new lookups.py").ops == (("mv", "lookups.py.new", "lookups.py"),)
    assert is_file_path("related_lookups.py.new") and is_file_path("conf.py.bak")


@pytest.mark.parametrize(
    "cmd", ["make html", "make -C docs html", "make", "cmake --build build", "ninja -C out"]
)
def test_any_make_target_or_project_build_checks(cmd):
    assert analyse(cmd).verifies


def test_make_clean_alone_checks_nothing():
    assert not analyse("make clean").verifies
    assert analyse("make clean && make html").ops == (("check",),)


@pytest.mark.parametrize(
    "text",
    [
        "### 1. Facts given in the task\n- The task asks for the year.",
        'final_answer: {\n  "1. Facts given in the task": ["x"]}',
        "Here is the updated list of facts that I know:",
        "We are working to address the following user request: ...",
    ],
)
def test_scheduled_fact_surveys_and_plan_updates_are_coordination(text):
    assert extract({"step": 1, "agent": "manager", "thought": text}, 8000).coordination


def test_a_result_message_is_not_coordination():
    assert not extract(
        {"step": 1, "agent": "Checker", "thought": "The plan worked: 42 rows."}, 8000
    ).coordination


def test_a_command_line_analysed_again_gives_the_same_facts_and_only_its_head_counts():
    cmd = "cd /testbed && python -m pytest tests/test_store.py -q"
    assert analyse(cmd) == analyse(str(cmd + " ")[:-1])  # an equal text, not the same object
    long = cmd + " " + "x" * 5000
    assert analyse(long) == analyse(long[:4000])
