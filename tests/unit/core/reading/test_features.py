"""The one reading of a step: the error line a text quotes, planning updates, final answers."""

from __future__ import annotations

import pytest

from streams.core.reading.features import _error_line, extract


def test_a_bare_error_label_is_read_with_the_message_on_the_next_line():
    line = _error_line("ERROR:\nParameter `old_str` is required for command: str_replace.")
    assert line.startswith("ERROR:") and "`old_str` is required" in line


def test_the_innermost_raised_error_of_a_chain_is_the_error_line():
    obs = (
        "ToolCallError: calling scroll with {'': ''} failed: TypeError: Scroll.run() got an "
        "unexpected keyword argument ''\nCall this tool with the inputs it takes."
    )
    assert _error_line(obs) == "TypeError: Scroll.run() got an unexpected keyword argument ''"


def test_warnings_and_traceback_frames_are_never_the_error_line():
    obs = (
        "shop.Order: (models.W042) Auto-created primary key used when not defining a primary key type.\n"
        "Traceback (most recent call last):\n"
        '  File "check_totals.py", line 14, in compute\n'
        "    total = sum(prices)\n"
        "/usr/lib/python3/site.py:12: DeprecationWarning: the imp module is deprecated\n"
        "ValueError: prices must not be empty\n"
    )
    assert _error_line(obs) == "ValueError: prices must not be empty"


def test_a_traceback_cut_before_its_error_has_no_error_line():
    obs = 'Traceback (most recent call last):\n  File "run.py", line 9, in <module>\n    main()\n  File "run.py", line 5'
    assert _error_line(obs) == ""


def test_a_heading_that_opens_a_log_is_no_error():
    assert _error_line("Operations to perform:\n  Apply all migrations: shop\nRunning migrations:\n") == ""


def test_a_framework_complaint_is_its_first_line():
    obs = "Reply with exactly one command block; found 3.\n\nUse the format shown in the example:\n```\n<cmd>\n```"
    assert _error_line(obs) == "Reply with exactly one command block; found 3."


@pytest.mark.parametrize(
    "text",
    [
        "### 1. Facts given in the task\n- The report is from 2021.\n### 2. Facts to look up\n- Its page count.",
        'final_answer:\n{\n  "1. Facts given in the task": "a report from 2021",\n  "2. Facts that we have learned": ""}',
        "Here is the updated list of facts based on what we found so far:\n1. The report exists.",
    ],
)
def test_facts_and_plan_updates_are_coordination_and_end_nothing(text):
    f = extract({"step": 4, "agent": "researcher", "thought": text}, 8000)
    assert f.coordination and not f.finishes


def test_a_final_answer_message_still_finishes():
    assert extract({"step": 9, "agent": "lead", "thought": "FINAL ANSWER: 42"}, 8000).finishes


def test_a_text_input_at_a_round_length_reads_as_cut_by_its_producer():
    def create(n: int) -> dict[str, object]:
        text = ("x = 1\n" * 1000)[:n]
        return {
            "step": 1,
            "action": "editor",
            "action_input": {"command": "create", "path": "a.py", "file_text": text},
        }

    assert extract(create(4000), 20_000).input_cut
    assert not extract(create(3999), 20_000).input_cut
    assert extract(
        {"step": 1, "action": "bash", "action_input": "ls", "observation": "a" * 2000}, 20_000
    ).observation_cut


def test_the_monitor_only_readings_are_computed_once_on_first_use():
    f = extract({"step": 1, "action": "bash", "action_input": "ls", "observation": "Error: boom"}, 4000)
    assert "outcome" not in f.__dict__  # not computed by extract
    first = f.outcome
    assert f.outcome is first and f.__dict__["outcome"] is first
    assert f.error_line == f.__dict__["error_line"]
