"""observation.not_run: a result that says the call itself never ran."""

from __future__ import annotations

import pytest

from streams.core.reading.observation import NOT_RUN_CHARS, cell_unparsed, not_run


@pytest.mark.parametrize(
    "text",
    [
        '[Below is the output of the previous command.]\n\n[Your command "rm x.py" is NOT executed. '
        "The previous command is still running - You CANNOT send new commands until the previous "
        "command is completed.]",
        "Please always provide EXACTLY ONE action in triple backticks, found 3 actions.",
        "AgentParsingError: Error in code parsing:\nYour code snippet is invalid, because the regex "
        "pattern ```(?:py|python)?\\n(.*?)\\n``` was not found in it.",
        "rb-streams steering: The call to `send_money` was refused: it carries a value a tool result introduced.",
    ],
)
def test_a_result_saying_the_call_never_ran_is_read_as_not_run(text):
    assert not_run(text)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "============ 3 passed in 0.12s ============",
        "rm: cannot remove 'x.py': No such file or directory",
        "bash: pytest: command not found",  # it ran: the shell answered (`shell.could_not_run`)
        "x" * NOT_RUN_CHARS + " is NOT executed",  # printed far down by the program itself
    ],
)
def test_a_result_of_a_call_that_ran_is_not_read_as_not_run(text):
    assert not not_run(text)


def test_a_cell_ipython_could_not_parse_never_ran_but_a_cell_that_raised_did():
    unparsed = '  Cell In[3], line 12\n    to_replace="""def total(\n    ^\nSyntaxError: incomplete input\n'
    raised = (
        "---------------------------------------------------------------------------\n"
        "SyntaxError                               Traceback (most recent call last)\n"
        "Cell In[4], line 1\n----> 1 compile('x = (', 'f', 'exec')\nSyntaxError: '(' was never closed\n"
    )
    assert cell_unparsed(unparsed) and not_run(unparsed)
    assert cell_unparsed("  Cell In[9], line 2\n    return x\n    ^\nIndentationError: unexpected indent")
    assert not cell_unparsed(raised) and not not_run(raised)
    assert not cell_unparsed("SyntaxError: invalid syntax") and not cell_unparsed(None)
