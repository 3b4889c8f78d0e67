"""Python cells read as code-writing agents write them (smolagents' CodeAgent, OpenHands'
IPython cell): what they change, check, read and run, in order; and the monitors on runs of
such cells, where "nothing changed in between" used to be said across edits made in code."""

from __future__ import annotations

import pytest

from streams.core.reading.features import extract
from streams.core.reading.pycode import analyse_cell, is_cell
from tests.unit.core.monitors.trajectories import Run, step

HTML = "/testbed/astropy/io/ascii/html.py"
READ_REPLACE_WRITE = (
    f"file_path = '{HTML}'\n"
    "content = open(file_path).read()\n"
    "content = content.replace({old!r}, {new!r})\n"
    "with open(file_path, 'w') as f:\n"
    "    f.write(content)\n"
    "print('edited')"
)
REPRO = (
    "import subprocess\n"
    "result = subprocess.run(['python', '/testbed/reproduce.py'], capture_output=True, text=True)\n"
    "print(result.stdout)\nprint(result.stderr)"
)


def test_a_read_replace_write_cell_changes_the_file_it_names():
    facts = analyse_cell(READ_REPLACE_WRITE.format(old="a", new="b"))
    assert facts.modifies and facts.modify_paths == (HTML,) and facts.read_paths == (HTML,)
    assert not facts.verifies and facts.ops == (("change", HTML),)


@pytest.mark.parametrize(
    ("cell", "runs"),
    [
        (REPRO, "python /testbed/reproduce.py"),
        ("import os\nos.system('cd /testbed && python -m pytest tests/test_html.py -q')", None),
        ("!pytest tests/test_html.py -q", "pytest tests/test_html.py -q"),
        ("%run reproduce.py", "python reproduce.py"),
        ("%%bash\ncd /testbed\npython -m pytest -x tests/test_html.py", None),
        ("import sys, subprocess\nsubprocess.check_output([sys.executable, 'repro.py'])", "python repro.py"),
        ("cmd = 'pytest -x tests/a.py'\nsubprocess.run(cmd, shell=True)", "pytest -x tests/a.py"),
    ],
)
def test_a_cell_that_runs_tests_or_a_script_verifies_and_is_named_by_its_command(cell, runs):
    facts = analyse_cell(cell)
    assert facts.verifies and ("check",) in facts.ops
    if runs:
        assert runs in facts.runs


@pytest.mark.parametrize(
    "cell",
    [
        "import pytest\npytest.main(['-x', 'tests/test_html.py'])",
        "import importlib, html_mod\nimportlib.reload(html_mod)",
        "exec(open('reproduce.py').read())",
    ],
)
def test_in_process_test_runs_and_reloads_verify(cell):
    assert analyse_cell(cell).verifies


def test_edits_and_checks_keep_their_order_within_a_cell():
    cell = (
        "from pathlib import Path\n"
        "Path('src/pkg/core.py').write_text(new_source)\n"
        "subprocess.run(['python', '-m', 'pytest', 'tests/test_core.py'])\n"
        "open(os.path.join(root, 'pkg', 'util.py'), 'w').write(s)"
    )
    assert analyse_cell(cell).ops == (("change", "src/pkg/core.py"), ("check",), ("change",))


def test_editor_functions_called_from_a_cell_change_or_read_their_file():
    cell = (
        "open_file('/workspace/django/db/models/query.py', 120)\n"
        "edit_file_by_replace('/workspace/django/db/models/query.py', to_replace='a', new_content='b')\n"
        "shutil.copy('setup.py', 'setup.py.bak')"
    )
    facts = analyse_cell(cell)
    assert facts.read_paths == ("/workspace/django/db/models/query.py",)
    assert facts.ops[0] == ("change", "/workspace/django/db/models/query.py")
    assert facts.ops[1] == ("cp", "setup.py", "setup.py.bak")


def test_saving_data_or_notes_or_reading_files_is_no_change_to_verify():
    cell = (
        "import pandas as pd\ndf = pd.read_excel('data/sales.xlsx')\ndf.to_csv('out.csv')\n"
        "with open('notes.txt', 'w') as f:\n    f.write(str(df.sum()))\n"
        "print(open('/testbed/setup.py').read())\nresults = web_search(query='open(x, \"w\")')"
    )
    facts = analyse_cell(cell)
    assert not facts.modifies and not facts.verifies and facts.reads


def test_only_a_top_level_final_answer_call_submits():
    assert analyse_cell("answer = 42\nfinal_answer(answer)").submits
    assert not analyse_cell("if found:\n    final_answer(x)\nprint('no')").submits


def test_a_final_answer_cell_that_failed_finishes_nothing():
    cell = "count = len(slides)\nfinal_answer(count)"
    ok = extract({"step": 3, "action": "python_interpreter", "action_input": cell, "observation": "3"}, 8000)
    failed = extract(
        {
            "step": 3,
            "action": "python_interpreter",
            "action_input": cell,
            "observation": "AgentExecutionError: NameError: name 'slides' is not defined",
            "observation_is_error": True,
        },
        8000,
    )
    assert ok.finishes and not failed.finishes


def test_the_answer_of_a_final_cell_is_its_literal_or_the_value_it_printed_last():
    from streams.core.reading.pycode import final_argument

    assert final_argument('x = 1\nfinal_answer("Guava")') == "Guava"
    assert final_argument("final_answer(count)") is None
    assert final_argument('final_answer("a" + b)') is None


@pytest.mark.parametrize(
    ("action", "action_input", "cell"),
    [
        ("python_interpreter", "print(1)", True),
        ("execute_ipython_cell", {"code": "!ls"}, True),
        ("python", "import re\nprint(re.__file__)", True),
        ("python", "reproduce.py", False),
        ("python", "-c 'print(1)'", False),
        ("bash", "python x.py", False),
    ],
)
def test_which_steps_are_python_cells(action, action_input, cell):
    code = action_input["code"] if isinstance(action_input, dict) else action_input
    assert is_cell(action, code) is cell


def test_a_hostile_cell_is_read_in_bounded_time_and_kept_bounded():
    cell = ("open(" * 3000) + ("x = '" + "a" * 5000 + "'\n") * 40 + "subprocess.run([" + "'a', " * 5000
    facts = analyse_cell(cell)
    assert len(facts.ops) <= 20 and len(facts.modify_paths) <= 4
    assert all(len(r) <= 400 for r in facts.runs)


def cell(code: str, out: str, error: bool = False) -> dict:
    return step("Thought: next.", "python_interpreter", code, out, error)


ERR_OUT = "Execution logs:\n<td>1.23875234858e-24</td>\n\nLast output from code snippet:\nNone"


def test_edits_made_in_code_between_identical_checks_are_no_unchanged_rerun(sem):
    run = Run(sem, task="Fix: the HTML writer ignores the formats argument")
    run.feed(cell(REPRO, ERR_OUT))
    edits = [("cols = ", "cols = self._fmt("), ("self.data.cols", "self.data._fill"), ("vals()", "vals(fmt)")]
    for old, new in edits:
        run.feed(cell(READ_REPLACE_WRITE.format(old=old, new=new), "Execution logs:\nedited"))
        run.feed(cell(REPRO, ERR_OUT))
    texts = [r.text or "" for r in run.results]
    assert not any("nothing changed in between" in t or "reworded inputs" in t for t in texts)
    last = run.results[-1]
    assert "semantic_loop" in last.fired
    assert "Your last 3 edits (`html.py`) left `python /testbed/reproduce.py`" in (last.text or "")


def test_an_unchanged_check_cell_rerun_without_edits_is_still_a_loop(sem):
    run = Run(sem, task="Fix: the HTML writer ignores the formats argument")
    for _ in range(4):
        run.feed(cell(REPRO, ERR_OUT))
    assert "semantic_loop" in run.results[-1].fired
    assert "same input (`python /testbed/reproduce.py`) 4 times" in (run.results[-1].text or "")


def test_an_edit_in_code_with_no_check_since_is_flagged_at_the_final_answer_cell(sem):
    run = Run(sem, task="Fix: the HTML writer ignores the formats argument")
    run.feed(cell(REPRO, ERR_OUT))
    run.feed(cell(READ_REPLACE_WRITE.format(old="a", new="b"), "Execution logs:\nedited"))
    res = run.feed(
        cell("final_answer('Fixed the writer.')", "Last output from code snippet:\nFixed the writer.")
    )
    assert "verification_skip" in res.fired and "`/testbed/astropy/io/ascii/html.py`" in (res.text or "")


def test_an_edit_in_code_checked_by_a_cell_is_not_flagged_at_the_final_answer_cell(sem):
    run = Run(sem, task="Fix: the HTML writer ignores the formats argument")
    run.feed(cell(READ_REPLACE_WRITE.format(old="a", new="b"), "Execution logs:\nedited"))
    run.feed(cell("!python -m pytest astropy/io/ascii/tests/test_html.py -q", "12 passed"))
    res = run.feed(
        cell("final_answer('Fixed the writer.')", "Last output from code snippet:\nFixed the writer.")
    )
    assert "verification_skip" not in res.fired


def test_a_manager_cell_answering_what_it_computed_is_confirmed_by_its_own_output(sem):
    run = Run(sem, task="How many slides mention crustaceans?", profile="qa")
    run.feed({**step("Plan: read the file and count.", None), "agent": "manager"})
    code = "slides = read_pptx('deck.pptx')\ncount = sum('crustacean' in s.lower() for s in slides)\nfinal_answer(count)"
    res = run.feed({**cell(code, "Execution logs:\n\nLast output from code snippet:\n4"), "agent": "manager"})
    assert res.final and "verification_skip" not in res.fired


def test_a_manager_cell_answering_a_literal_nothing_produced_is_flagged(sem):
    run = Run(sem, task="What are the EC numbers of the two chemicals?", profile="qa")
    run.feed({**step("Plan: answer.", None), "agent": "manager"})
    out = "Execution logs:\n\nLast output from code snippet:\n3.1.3.1;1.11.1.7"
    res = run.feed({**cell('final_answer("3.1.3.1;1.11.1.7")', out), "agent": "manager"})
    assert res.final and "verification_skip" in res.fired
    assert "only printed back its own call's text" in (res.text or "")
