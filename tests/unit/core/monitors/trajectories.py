"""Builders for realistic agent steps (coding, QA and review agents) fed to the monitors."""

from __future__ import annotations

from typing import Any

from streams.core.monitors import MonitorResult, MonitorState, Semantics, evaluate
from streams.core.policy import Policy
from streams.core.reading.features import extract


def step(
    thought: str = "",
    action: str | None = None,
    action_input: Any = None,
    observation: str | None = None,
    error: bool = False,
) -> dict[str, Any]:
    return {
        "thought": thought,
        "action": action,
        "action_input": action_input,
        "observation": observation,
        "observation_is_error": error,
    }


def bash(cmd: str, out: str, thought: str = "", error: bool = False) -> dict[str, Any]:
    return step(thought, "execute_bash", {"command": cmd}, out, error)


def edit(path: str, old: str, new: str, thought: str = "") -> dict[str, Any]:
    return step(
        thought,
        "str_replace_editor",
        {"command": "str_replace", "path": path, "old_str": old, "new_str": new},
        f"The file {path} has been edited.",
    )


def view(path: str, out: str = "", thought: str = "") -> dict[str, Any]:
    return step(thought, "str_replace_editor", {"command": "view", "path": path}, out or f"1\t# {path}\n")


def finish(thought: str = "I have completed the task.") -> dict[str, Any]:
    return step(thought, "finish", {"message": thought}, None)


class Run:
    """Feeds steps through the monitor suite, as the engine does, keeping every result."""

    def __init__(
        self, sem: Semantics, task: str | None = None, profile: str = "coding", max_chars: int = 20_000
    ) -> None:
        self.sem = sem
        self.task = task
        self.weights = Policy().weights(profile, None)
        self.state = MonitorState()
        self.results: list[MonitorResult] = []
        self.max_chars = max_chars
        self.steps = 0

    def feed(self, *steps: dict[str, Any]) -> MonitorResult:
        for s in steps:
            self.steps += 1
            ev = {"step": self.steps, **s}
            self.state, res = evaluate(
                self.state, extract(ev, self.max_chars), self.weights, self.task, self.sem
            )
            self.results.append(res)
        return self.results[-1]

    def score(self, monitor: str) -> float:
        return self.results[-1].scores[monitor]

    def max_score(self, monitor: str) -> float:
        return max(r.scores[monitor] for r in self.results)

    def fired_anywhere(self, monitor: str) -> bool:
        return any(monitor in r.fired for r in self.results)
