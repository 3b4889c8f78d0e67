"""Re-map multi-agent group-chat runs recorded before steps could name their agent.

The CaptainAgent dev files put the speaker in `action` (no input, no output) and the message
in `thought`. With the step's `agent` field the same chat maps as the wire format means it:

- the speaker goes to `agent`; a message step has no `action`;
- a message that asks the code executor to run code becomes a tool step: `action` =
  `execute_code`, `action_input` = the code blocks (a fence that holds no code, such as an
  answer or a quoted text, is not a request to run, unless the executor ran it), and the executor's reply
  (`Computer_terminal`: "exitcode: 1 ... Code output: ...") is its `observation`
  (`observation_is_error` when the exit code is not 0), not a step of its own.

    .venv/bin/python -m bench.captainagent_convert ../shared/data/real-dev/captainagent.jsonl -o out.jsonl
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

# --compare copies this file into older commits' worktrees: grounding lived in core/monitors
# before core/reading (issue 41)
try:
    _grounding = importlib.import_module("streams.core.reading.grounding")
except ImportError:
    _grounding = importlib.import_module("streams.core.monitors.grounding")
is_code: Callable[[str, str], bool] = _grounding.is_code

EXECUTORS = frozenset({"Computer_terminal"})
CODE_BLOCK = re.compile(r"```[ \t]*(\w*)[^\n]*\n(.*?)```", re.DOTALL)
EXIT_CODE = re.compile(r"exitcode:\s*(-?\d+)")


def is_legacy(events: list[dict[str, Any]]) -> bool:
    """Speaker-in-action form: steps with an action but never an input or an output."""
    steps = [e for e in events if e.get("type") == "step"]
    return bool(steps) and all(
        e.get("action")
        and e.get("action_input") is None
        and e.get("observation") is None
        and "agent" not in e
        for e in steps
    )


def _code_of(text: str, ran: bool = False) -> str | None:
    """The code blocks of a message; when the executor replied (`ran`), every fenced block,
    since it ran them."""
    blocks = [
        body.strip()
        for lang, body in CODE_BLOCK.findall(text)
        if body.strip() and (ran or is_code(lang, body))
    ]
    return "\n\n".join(blocks) if blocks else None


def convert_run(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One run's events (run_start, steps, run_finish) in the agent-field form."""
    return _convert(events)[0]


def step_numbers(events: list[dict[str, Any]]) -> dict[int, int]:
    """Recorded step -> its step in the converted run (an executor's reply -> the step that ran
    the code), so labels in the recorded numbering (a mistake step) apply to either form."""
    return _convert(events)[1] if is_legacy(events) else {}


def _convert(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, int]]:
    out: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    renumber: dict[int, int] = {}
    for i, ev in enumerate(events):
        if ev.get("type") != "step":
            if ev.get("type") == "run_finish":
                out.extend(steps)
                steps = []
            out.append(ev)
            continue
        speaker, text = ev.get("action"), ev.get("thought") or ""
        prev = steps[-1] if steps else None
        if (
            speaker in EXECUTORS
            and prev is not None
            and prev.get("action") == "execute_code"
            and (prev.get("observation") is None)
        ):
            prev["observation"] = text
            m = EXIT_CODE.search(text)
            prev["observation_is_error"] = bool(m and m.group(1) != "0")
            _note(renumber, ev, len(steps))
            continue
        new = {k: v for k, v in ev.items() if k not in ("action", "action_input", "observation")}
        new["agent"] = speaker
        nxt = events[i + 1] if i + 1 < len(events) else {}
        ran = (
            nxt.get("type") == "step"
            and nxt.get("action") in EXECUTORS
            and bool(EXIT_CODE.search(nxt.get("thought") or ""))
        )
        code = _code_of(text, ran) if speaker not in EXECUTORS else None
        if code is not None:
            new["action"], new["action_input"] = "execute_code", code
        steps.append(new)
        _note(renumber, ev, len(steps))
    out.extend(steps)
    k = 0
    for ev in out:
        if ev.get("type") == "step":
            k += 1
            ev["step"] = k
    return out, renumber


def _note(renumber: dict[int, int], ev: dict[str, Any], new_step: int) -> None:
    if isinstance(ev.get("step"), int):
        renumber[ev["step"]] = new_step


def runs_of(lines: Iterable[bytes]) -> Iterator[list[dict[str, Any]]]:
    run: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        ev = orjson.loads(line)
        if ev.get("type") == "run_start" and run:
            yield run
            run = []
        run.append(ev)
    if run:
        yield run


def convert_lines(lines: Iterable[bytes]) -> Iterator[bytes]:
    """Every run re-mapped when it is in the legacy form; other runs pass unchanged."""
    for run in runs_of(lines):
        for ev in convert_run(run) if is_legacy(run) else run:
            yield orjson.dumps(ev)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("src", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True)
    a = p.parse_args(argv)
    if not a.src.exists():
        print(f"captainagent_convert: {a.src}: no such file", file=sys.stderr)
        return 2
    n = 0
    with a.output.open("wb") as fh:
        for line in convert_lines(a.src.read_bytes().splitlines()):
            fh.write(line + b"\n")
            n += 1
    print(f"wrote {n} events to {a.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
