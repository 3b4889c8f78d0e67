"""semantic_loop under missing evidence (issue 41 item 2): a result cut where it was sent, or a
call that never ran (a busy terminal, a format error, a refused call), is unknown, never "the
same" and never "nothing"; the texts state only what the events show."""

from __future__ import annotations

from streams.core.monitors.loop.signal import Entry

from .trajectories import Run, bash, edit, step

LOOP = "semantic_loop"
BUSY = (
    "[Below is the output of the previous command.]\n\n"
    '[Your command "{cmd}" is NOT executed. The previous command is still running - You CANNOT '
    "send new commands until the previous command is completed. By setting `is_input` to `true`, "
    "you can interact with the current process.]"
)
FORMAT_ERROR = (
    "Please always provide EXACTLY ONE action in triple backticks, found {n} actions.\n\n"
    "Please format your action in triple backticks as shown in <response_example>."
)
# pytest's header and first results, cut by the producer at 2,000 characters: the same on every
# run whatever the edits did to the tail (where the summary sits)
PYTEST_HEAD = (
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.9.20, pytest-7.4.0\nrootdir: /workspace/repo\ncollected 212 items\n\n"
    + "".join(f"tests/test_units.py::test_case_{k} PASSED{' ' * 30}[{k:3d}%]\n" for k in range(40))
)[:2000]


def _texts(run: Run) -> str:
    return " ".join(r.text or "" for r in run.results)


def test_cut_outputs_rerun_after_each_edit_are_not_reported_as_the_same_output(sem):
    run = Run(sem, task="Fix the unit conversion")
    run.feed(bash("python -m pytest tests/test_units.py", PYTEST_HEAD))
    for i in range(4):
        run.feed(edit("src/units.py", f"old{i}", f"new{i}"))
        run.feed(bash("python -m pytest tests/test_units.py", PYTEST_HEAD))
    text = _texts(run)
    assert "the same output" not in text and "the same result" not in text and "printing the same" not in text
    # what the events do show: the part sent was identical, and the rest is unseen
    assert run.fired_anywhere(LOOP) and "that part identical every time" in text and "past the cut" in text


def _script_output(debug: str, moved: int = 1) -> str:
    """A script's prints cut at 2,000 characters: `moved` of its lines carry the agent's own
    debug wording, which its edits change; the rest is the same on every run."""
    names = [chr(97 + k // 26) + chr(97 + k % 26) for k in range(60)]  # digits are masked: words
    lines = [f"Trying to load translations from: /workspace/locale/{n}" for n in names]
    for j in range(moved):
        lines[3 + 2 * j] = f"This translation gives {debug} for {names[j]}"
    return "\n".join(lines)[:2000]


def test_cut_outputs_that_differ_in_a_line_or_two_after_each_edit_say_how_near_they_are(sem):
    """The agent's own debug print changes with its edits; the rest of the sent part does not,
    and the result is past the cut: the advice says so, and never "identical"."""
    run = Run(sem, task="Fix the translation precedence")
    run.feed(bash("python test_locale.py", _script_output("first")))
    for i in range(4):
        run.feed(edit("sphinx/locale/__init__.py", f"old{i}", f"new{i}"))
        run.feed(bash("python test_locale.py", _script_output("first" if i % 2 else f"wording {i}")))
    text = _texts(run)
    assert run.fired_anywhere(LOOP) and "past the cut" in text and "Read the end of the output" in text
    assert "that part nearly identical every time" in text and "The lines that differ aside" in text


def test_cut_outputs_whose_sent_part_moves_in_many_lines_are_not_called_nearly_the_same(sem):
    run = Run(sem, task="Fix the translation precedence")
    run.feed(bash("python test_locale.py", _script_output("first", moved=25)))
    for i in range(4):
        run.feed(edit("sphinx/locale/__init__.py", f"old{i}", f"new{i}"))
        run.feed(bash("python test_locale.py", _script_output(f"wording {'abcd'[i]}", moved=25)))
    assert "cut where it was sent" not in _texts(run)


def test_the_same_cell_that_ipython_cannot_parse_is_said_to_have_never_run(sem):
    """No edit in a cell that does not parse was applied: never "the same change"."""
    cell = 'edit_file_by_replace(\'book_store.py\', to_replace="""def total(basket):\n'
    run = Run(sem)
    for _ in range(4):
        obs = '  Cell In[1], line 10\n    to_replace="""def total(\n    ^\nSyntaxError: incomplete input\n'
        run.feed(step(action="execute_ipython_cell", action_input={"code": cell}, observation=obs))
    text = _texts(run)
    assert run.fired_anywhere(LOOP) and "never ran" in text and "SyntaxError: incomplete input" in text
    assert "the same change" not in text and "duplicates" not in text


def test_a_cell_refused_at_another_line_each_time_is_not_one_error_repeated(sem):
    """Where the parser stopped is part of a parse error: refused at line 10, 20, 30 and 40,
    the refusals differ (OpenHands' stuck detector: not stuck), so no loop is said."""
    cell = 'edit_file_by_replace(\'book_store.py\', to_replace="""def total(basket):\n'
    run = Run(sem)
    for n in range(4):
        obs = f'  Cell In[1], line {10 * n + 10}\n    to_replace="""def total(\n    ^\nSyntaxError: incomplete input\n'
        run.feed(step(action="execute_ipython_cell", action_input={"code": cell}, observation=obs))
    assert not run.fired_anywhere(LOOP)


def test_whole_outputs_rerun_after_each_edit_are_still_reported(sem):
    """The control: the same output sent in full after each edit is the edits not reaching it."""
    whole = PYTEST_HEAD[:1500] + "\n=========== 1 failed, 211 passed in 3.10s ===========\n"
    run = Run(sem, task="Fix the unit conversion")
    run.feed(bash("python -m pytest tests/test_units.py", whole))
    for i in range(4):
        run.feed(edit("src/units.py", f"old{i}", f"new{i}"))
        run.feed(bash("python -m pytest tests/test_units.py", whole))
    assert run.fired_anywhere(LOOP) and "the same" in _texts(run)


def test_a_cut_output_repeated_with_nothing_changed_says_the_rest_was_not_seen(sem):
    run = Run(sem)
    for _ in range(4):
        res = run.feed(bash("cat src/units.py", PYTEST_HEAD))
    assert LOOP in res.fired
    assert "nothing changed in between" in res.text and "past the cut was not seen" in res.text
    assert "got the same result" not in res.text


def test_a_command_that_never_ran_then_ran_silently_is_not_said_to_bring_nothing(sem):
    """The issue's `rm`: the first was refused by a busy terminal, the second worked (an `rm`
    that works prints nothing)."""
    run = Run(sem)
    run.feed(bash("python -m pytest tests/ -x", "collected 212 items\n"))
    run.feed(bash("rm reproduce.py", BUSY.format(cmd="rm reproduce.py")))
    run.feed(bash("", "^C\n[The command completed with exit code 130.]"))
    res = run.feed(bash("rm reproduce.py", ""))
    assert "brought no result" not in _texts(run) and "brought nothing" not in (res.text or "")


def test_a_silent_state_change_issued_again_is_not_said_to_bring_nothing(sem):
    run = Run(sem)
    run.feed(bash("mkdir -p build/out", ""))
    run.feed(bash("ls src", "units.py\nconvert.py\n"))
    run.feed(bash("mkdir -p build/out", ""))
    assert "brought nothing" not in _texts(run) and "brought no result" not in _texts(run)


def test_a_query_that_found_nothing_twice_is_still_said_to_bring_nothing(sem):
    """The control: both results known and empty."""
    run = Run(sem)
    run.feed(step("", "search_file", '"withObject(String)"', 'No matches found for "withObject(String)"'))
    run.feed(step("", "open", "src/Node.java", "1: class Node {}\n2: }\n"))
    res = run.feed(
        step("", "search_file", '"withObject(String)"', 'No matches found for "withObject(String)"')
    )
    assert LOOP in res.fired and "brought no result there and brought nothing here" in res.text


def test_commands_refused_by_a_busy_terminal_are_never_the_same_result(sem):
    run = Run(sem)
    run.feed(bash("python manage.py runserver", "Watching for file changes with StatReloader\n"))
    for _ in range(4):
        run.feed(bash("python reproduce.py", BUSY.format(cmd="python reproduce.py")))
    assert "got the same result" not in _texts(run) and "the same results" not in _texts(run)


def test_replies_refused_for_their_format_are_said_to_have_never_run(sem):
    run = Run(sem)
    cmds = ["sed -i 's/a/b/' f.py", "grep -n x f.py", "python3 -c 'print(1)'", "cat f.py"]
    for k, cmd in enumerate(cmds):
        res = run.feed(step("", "format_error", cmd, FORMAT_ERROR.format(n=k + 2), True))
    assert LOOP in res.fired
    assert "4 calls in a row that never ran" in res.text and "Nothing in them was executed" in res.text
    assert "tried `format_error`" not in res.text


def test_a_cycle_over_cut_results_is_not_reported_as_the_same_results(sem):
    run = Run(sem)
    calls = [("open", "src/A.java"), ("goto", "1260"), ("open", "src/B.java")]
    for _ in range(3):
        for tool, arg in calls:
            run.feed(step("", tool, arg, (f"[File: {arg}]\n" + "x = 1\n" * 400)[:2000]))
    assert "got the same results again" not in _texts(run)


def _last_entry(run: Run) -> list:
    st = run.state["loop"]
    return (st["window"] if isinstance(st, dict) else st.window)[-1]


def test_an_entry_written_before_unrun_existed_decodes_as_run(sem):
    run = Run(sem)
    run.feed(bash("ls", "a.py\n"))
    assert Entry.decode(_last_entry(run)[:-1]).unrun is False  # the encoding before the field
    run.feed(bash("ls", BUSY.format(cmd="ls")))
    assert Entry.decode(_last_entry(run)).unrun is True
