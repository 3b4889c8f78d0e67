"""Re-mapping recorded group chats: labels in the recorded step numbering follow the steps."""

from __future__ import annotations

from typing import Any

from bench.captainagent_convert import convert_run, step_numbers
from bench.quality import _renumbered


def _run(said: list[tuple[str, str]]) -> list[dict[str, Any]]:
    steps = [
        {
            "type": "step",
            "run_id": "c",
            "step": k,
            "action": who,
            "action_input": None,
            "observation": None,
            "thought": t,
        }
        for k, (who, t) in enumerate(said, start=1)
    ]
    return [{"type": "run_start", "run_id": "c"}, *steps, {"type": "run_finish", "run_id": "c"}]


def _chat() -> list[dict[str, Any]]:
    return _run(
        [
            ("Planner", "Let us compute it.\n```python\nprint(6 * 7)\n```"),
            ("Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: 42"),
            ("Checker", "The answer is 42."),
        ]
    )


def test_an_executor_reply_maps_to_the_step_that_ran_the_code() -> None:
    assert step_numbers(_chat()) == {1: 1, 2: 1, 3: 2}
    assert [e["step"] for e in convert_run(_chat()) if e["type"] == "step"] == [1, 2]


def test_runs_already_naming_their_agent_keep_their_numbers() -> None:
    run = _chat()
    for e in run:
        if e["type"] == "step":
            e["agent"] = e.pop("action")
    assert step_numbers(run) == {}


def test_a_mistake_step_label_moves_with_its_step() -> None:
    labels = {
        "c": {"outcome": "failure", "mistake_step": 3},
        "other": {"outcome": "failure", "mistake_step": 3},
    }
    moved = _renumbered(labels, {"c": step_numbers(_chat())})
    assert moved["c"]["mistake_step"] == 2 and moved["c"]["mistake_step_recorded"] == 3
    assert moved["other"] == labels["other"] and labels["c"]["mistake_step"] == 3


def _actions(run: list[dict[str, Any]]) -> list[Any]:
    return [e.get("action") for e in convert_run(run) if e["type"] == "step"]


def test_a_fenced_answer_is_a_message_not_code_to_run() -> None:
    run = _run(
        [
            ("Critic", "The album without a grade is:\n```\nSilverline\n```\nTERMINATE"),
            ("Checker", "Agreed.\n```text\nthe first line of the poem\nand the second\n```"),
        ]
    )
    assert _actions(run) == [None, None]


def test_unlabelled_fences_that_read_as_code_are_still_code() -> None:
    run = _run(
        [
            ("Analyst", "Run this:\n```\nrows = load('sales.csv')\n```"),
            ("Analyst", "And this:\n```\nls -la data/\n```"),
            ("Analyst", "```python\n# nothing to run here\n```"),
        ]
    )
    assert _actions(run) == ["execute_code", "execute_code", None]


def test_a_fence_the_executor_ran_is_code_whatever_it_holds() -> None:
    run = _run(
        [
            ("Analyst", "```\nSilverline\n```"),
            ("Computer_terminal", "exitcode: 1 (execution failed)\nCode output: unknown language"),
        ]
    )
    steps = [e for e in convert_run(run) if e["type"] == "step"]
    assert [e.get("action") for e in steps] == ["execute_code"]
    assert steps[0]["observation_is_error"] is True
