"""Scenarios from public loop and stuck detectors' own test suites, in our wire format.

Each case is one test of a peer project (repo, file and test name in `source`), with the verdict
that test asserts: `loop=True` where the peer detects a loop or a stuck agent, `loop=False` where
it asserts none. `by` is the step (1-based, counted over the run's steps) at which the peer's
test detects it; a loop case is caught when a loop-related monitor fires at that step or before.

Translation rules (the peers' tests are detector unit tests, so they often give calls without
results):
- A repeated call in a loop case gets the same result each time: the peer repeats it as a call
  that changed nothing. A peer's call with no result at all keeps `observation: None`.
- In a non-loop case each distinct call gets its own result; a call the peer repeats and still
  calls no loop (a scroll) gets the result the tool gives (the next part of the page).
- A step is one model call: the user's messages between them (which the peers' headless modes
  skip too) are not steps and are left out (`user(...)` marks where they were). Steps name no
  agent: these are single-agent runs.
- A peer's "below its threshold" case is taken as a non-loop only where every peer agrees (one
  immediate repeat of a call): the thresholds differ (Goose refuses the 3rd identical call,
  Roo Code the 4th, Gemini CLI flags the 5th), so the others are calibration, not verdicts.
- Gemini CLI's content detector reads one streamed response: its chanting cases are one step
  whose text repeats, its non-chanting ones one step too.
- `tolerance`: steps of grace past `by`, only where the peer's threshold is a setting that its
  test picked (the case then goes on one more identical call, which the peer refuses too).
- `disputed`: a non-loop verdict that rests on the peer's exact-match comparison (a moved line
  number in the same error); kept with the peer's verdict, and said so. A parse error's line is
  part of it (`loop.signal._error_key`): the same cell refused at another line each time is not
  one error repeated, so these pass.
- `missed`: what the current monitors miss on the case (the test is then a strict xfail).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

OPENHANDS = "All-Hands-AI/OpenHands tests/unit/test_is_stuck.py"
OPENHANDS_SDK = "OpenHands/software-agent-sdk test_stuck_detector.py (the SDK's StuckDetector)"
GEMINI = "google-gemini/gemini-cli packages/core/src/services/loopDetectionService.test.ts"
CLINE_LOOP = "cline/cline src/core/task/__tests__/loop-detection.test.ts"
CLINE_DOOM = "cline/cline src/core/task/__tests__/doom-loop-detection.test.ts"
ROO = "RooCodeInc/Roo-Code src/core/tools/__tests__/ToolRepetitionDetector.spec.ts"
GOOSE = "block/goose crates/goose/tests/repetition_inspector_tests.rs"
LANGCHAIN = (
    "langchain-ai/langchain libs/langchain_v1/tests/unit_tests/agents/middleware/implementations/"
    "test_tool_call_limit.py"
)

Step = dict[str, Any]


@dataclass(frozen=True)
class Case:
    id: str
    peer: str  # the project, for the QUALITY.md table
    source: str  # "<repo> <file> :: <test name>"
    loop: bool
    steps: tuple[Step, ...]
    by: int | None = None  # loop cases: the step the peer detects it at (default: the last)
    # steps of grace past `by`, only where the peer's threshold is a setting its test picked
    # (Goose's max_repetitions, LangChain's limits, Roo Code's limit 2 where its default is 3)
    tolerance: int = 0
    task: str | None = None
    disputed: str | None = None
    missed: str | None = None
    note: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(s for s in self.steps if s is not None))

    @property
    def detect_at(self) -> int:
        return self.by if self.by is not None else len(self.steps)


def call(
    action: str, action_input: Any, observation: str | None, *, thought: str = "", error: bool = False
) -> Step:
    return {
        "thought": thought,
        "action": action,
        "action_input": action_input,
        "observation": observation,
        "observation_is_error": error,
    }


def say(text: str) -> Step:
    """A message step (no tool call)."""
    return {"thought": text, "action": None, "action_input": None, "observation": None}


def user(text: str) -> Any:
    """Where the peer's test has a user message: not a model call, so not a step."""
    return None


def bash(cmd: str, out: str, **kw: Any) -> Step:
    return call("execute_bash", {"command": cmd}, out, **kw)


def read(path: str, content: str, **kw: Any) -> Step:
    return call("read_file", {"path": path}, content, **kw)


# --- OpenHands: StuckDetector -------------------------------------------------------------------
JUPYTER = "\n[Jupyter current working directory: /workspace]\n[Jupyter Python interpreter: /openhands/py/bin/python]"
CODE_SNIPPET = '\nedit_file_by_replace(\n    \'book_store.py\',\n    to_replace="""def total(basket):\n    if not basket:\n        return 0\n'


def _cell_errors(message: str, random_line: bool, incidents: int = 4) -> tuple[Step, ...]:
    """OpenHands' _impl_syntax_error_events: one cell run again and again, the same SyntaxError
    (`random_line`: at another line each time, with trailing blank lines)."""
    out = []
    for i in range(incidents):
        line = (i + 1) * 10 if random_line else 42
        extra = "\n" * (i + 1) if random_line else ""
        obs = (
            f'  Cell In[1], line {line}\nto_replace="""def largest(min_factor, max_factor):\n'
            f"            ^\n{message}{extra}{JUPYTER}"
        )
        out.append(call("execute_ipython_cell", {"code": CODE_SNIPPET}, obs))
    return tuple(out)


def _unterminated(random_line: bool, incidents: int = 4) -> tuple[Step, ...]:
    out = []
    for i in range(incidents):
        line = (i + 1) * 10 if random_line else 1
        obs = (
            f'print("  Cell In[1], line {line}\nhello\n       ^\n'
            f"SyntaxError: unterminated string literal (detected at line {line}){JUPYTER}"
        )
        out.append(call("execute_ipython_cell", {"code": CODE_SNIPPET}, obs))
    return tuple(out)


LS = "file1.txt\nfile2.txt"
DOING_WELL = "I'm doing well, thanks for asking."
TRIM = "Trimming prompt to meet context window limitations"

OPENHANDS_CASES = (
    Case(
        "openhands_repeating_action_observation",
        "OpenHands",
        f"{OPENHANDS} :: test_is_stuck_repeating_action_observation",
        True,
        (say("Hello"), bash("ls", ""), bash("ls", ""), user("Done"), bash("ls", ""), bash("ls", "")),
        note="the same `ls` with the same empty output 4 times, a user message between",
    ),
    Case(
        "openhands_four_identical_ls_headless",
        "OpenHands",
        f"{OPENHANDS} :: test_interactive_mode_resets_after_user_message (headless part)",
        True,
        tuple(bash("ls", "") for _ in range(4)),
    ),
    Case(
        "openhands_eight_ls_around_a_user_message",
        "OpenHands",
        f"{OPENHANDS} :: test_interactive_mode_resets_after_user_message",
        True,
        (*(bash("ls", "") for _ in range(4)), user("Hello"), *(bash("ls", "") for _ in range(4))),
        by=4,
        note="headless: stuck after the 4th `ls`; the user message does not reset it",
    ),
    Case(
        "openhands_repeating_action_error",
        "OpenHands",
        f"{OPENHANDS} :: test_is_stuck_repeating_action_error",
        True,
        (
            say("Hello"),
            bash("invalid_command", "Command not found", error=True),
            bash("invalid_command", "Command still not found or another error", error=True),
            user("Done"),
            bash("invalid_command", "Different error", error=True),
            bash("invalid_command", "Command not found", error=True),
        ),
        note="the same command failing 4 times, not necessarily with the same error",
    ),
    Case(
        "openhands_invalid_syntax_same_line",
        "OpenHands",
        f"{OPENHANDS} :: test_is_stuck_invalid_syntax_error",
        True,
        _cell_errors("SyntaxError: invalid syntax. Perhaps you forgot a comma?", random_line=False),
    ),
    Case(
        "openhands_incomplete_input_same_line",
        "OpenHands",
        f"{OPENHANDS} :: test_is_stuck_incomplete_input_error",
        True,
        _cell_errors("SyntaxError: incomplete input", random_line=False),
    ),
    Case(
        "openhands_unterminated_string_same_line",
        "OpenHands",
        f"{OPENHANDS} :: test_is_stuck_ipython_unterminated_string_error",
        True,
        _unterminated(random_line=False),
    ),
    Case(
        "openhands_action_observation_pattern",
        "OpenHands",
        f"{OPENHANDS} :: test_is_stuck_repeating_action_observation_pattern",
        True,
        (
            user("Come on"),
            bash("ls", LS),
            read("file1.txt", "File content"),
            bash("ls", LS),
            read("file1.txt", "File content"),
            user("Come on"),
            bash("ls", LS),
            read("file1.txt", "File content"),
        ),
        note="A, B, A, B, A, B with the same results",
    ),
    Case(
        "openhands_monologue",
        "OpenHands",
        f"{OPENHANDS} :: test_is_stuck_monologue",
        True,
        (
            user("Hi there!"),
            say("Hi there!"),
            user("How are you?"),
            bash("echo 42", None, thought="I'm not stuck, he's stuck"),
            say(DOING_WELL),
            say(DOING_WELL),
            say(DOING_WELL),
        ),
        note="the same message 3 times in a row, nothing between",
    ),
    Case(
        "openhands_context_window_error_loop",
        "OpenHands",
        f"{OPENHANDS} :: test_is_stuck_context_window_error_loop",
        True,
        (user("Hello"), *(call("condense", None, TRIM) for _ in range(10))),
    ),
    # --- not stuck
    Case(
        "openhands_history_too_short",
        "OpenHands",
        f"{OPENHANDS} :: test_history_too_short",
        False,
        (user("Hello"), bash("ls", LS)),
    ),
    Case(
        "openhands_not_stuck",
        "OpenHands",
        f"{OPENHANDS} :: test_is_stuck_not_stuck",
        False,
        (
            say("Hello"),
            bash("ls", LS),
            read("file1.txt", "File content"),
            bash("pwd", "/home/user"),
            read("file2.txt", "Another file content"),
            user("Done"),
            bash("pwd", "/home/user"),
            read("file2.txt", "Another file content"),
        ),
    ),
    Case(
        "openhands_invalid_syntax_random_lines",
        "OpenHands",
        f"{OPENHANDS} :: test_is_not_stuck_invalid_syntax_error_random_lines",
        False,
        _cell_errors("SyntaxError: invalid syntax. Perhaps you forgot a comma?", random_line=True),
        disputed="the same cell fails with the same SyntaxError 4 times; only the line number moves",
    ),
    Case(
        "openhands_incomplete_input_random_lines",
        "OpenHands",
        f"{OPENHANDS} :: test_is_not_stuck_incomplete_input_error",
        False,
        _cell_errors("SyntaxError: incomplete input", random_line=True),
        disputed="the same cell fails with the same SyntaxError 4 times; only the line number moves",
    ),
    Case(
        "openhands_unterminated_string_random_lines",
        "OpenHands",
        f"{OPENHANDS} :: test_is_not_stuck_ipython_unterminated_string_error_random_lines",
        False,
        _unterminated(random_line=True),
        disputed="the same cell fails with the same SyntaxError 4 times; only the line number moves",
    ),
    Case(
        "openhands_syntax_error_not_at_end",
        "OpenHands",
        f"{OPENHANDS} :: test_is_not_stuck_ipython_syntax_error_not_at_end",
        False,
        tuple(
            call(
                "execute_ipython_cell",
                {"code": 'print("hello'},
                f'print("hello\n       ^\nSyntaxError: unterminated string literal (detected at line {n})\n{tail}',
            )
            for n, tail in (
                (1, "This is some additional output"),
                (1, "Too much output here on and on"),
                (3, "Enough"),
                (2, "Last line of output"),
            )
        ),
        disputed="the same cell fails with the same SyntaxError 4 times; the output after it changes",
    ),
    Case(
        "openhands_monologue_broken_by_an_observation",
        "OpenHands",
        f"{OPENHANDS} :: test_is_stuck_monologue (after the observation)",
        False,
        (
            user("How are you?"),
            say(DOING_WELL),
            bash("storybook", "OK, I was stuck, but no more.", thought="I'm not stuck, he's stuck"),
            say(DOING_WELL),
            say(DOING_WELL),
        ),
        note="no 3 equal messages in a row: a command's new output between them",
    ),
    Case(
        "openhands_condensations_with_work_between",
        "OpenHands",
        f"{OPENHANDS} :: test_is_not_stuck_context_window_error_with_other_events",
        False,
        tuple(
            s
            for i in range(10)
            for s in (
                call("condense", None, TRIM),
                *(
                    ()
                    if i == 9
                    else (
                        bash(f"ls {i}", LS),
                        *((read(f"file{i}.txt", f"File content {i}"),) if i % 2 == 0 else ()),
                    )
                ),
            )
        ),
    ),
)


# --- OpenHands software-agent-sdk: its StuckDetector (thresholds as above; monologue = 3 agent
# messages in a row with nothing between, equal or not)
LS_TERMINAL = call("terminal", {"command": "ls"}, LS, thought="I need to run ls command")

OPENHANDS_SDK_CASES = (
    Case(
        "openhands_sdk_same_listing_four_times",
        "OpenHands SDK",
        f"{OPENHANDS_SDK} :: test_repeating_action_observation_stuck",
        True,
        (user("Please run ls"), *(LS_TERMINAL for _ in range(4))),
    ),
    Case(
        "openhands_sdk_loop_after_filler_messages",
        "OpenHands SDK",
        f"{OPENHANDS_SDK} :: test_is_stuck_without_recent_user_message_still_detects_loop",
        True,
        (say("ok"), say("ok"), say("ok"), *(LS_TERMINAL for _ in range(4))),
        note="the peer's 12 filler messages cut to 3; the 4 listings are the loop it asserts",
    ),
    Case(
        "openhands_sdk_same_error_three_times",
        "OpenHands SDK",
        f"{OPENHANDS_SDK} :: test_repeating_action_error_stuck",
        True,
        (
            user("Please run the invalid command"),
            *(
                call(
                    "terminal",
                    {"command": "invalid_command"},
                    "Command 'invalid_command' not found",
                    thought="I need to run invalid_command",
                    error=True,
                )
                for _ in range(3)
            ),
        ),
    ),
    Case(
        "openhands_sdk_monologue",
        "OpenHands SDK",
        f"{OPENHANDS_SDK} :: test_agent_monologue_stuck",
        True,
        (user("Hello"), *(say(f"I'm thinking... {i}") for i in range(3))),
    ),
    Case(
        "openhands_sdk_different_commands",
        "OpenHands SDK",
        f"{OPENHANDS_SDK} :: test_not_stuck_with_different_actions",
        False,
        tuple(
            call("terminal", {"command": c}, f"output from {c}", thought=f"I need to run {c} command")
            for c in ("ls", "pwd", "whoami", "date")
        ),
    ),
)


# --- Gemini CLI: LoopDetectionService -----------------------------------------------------------
def _tool(name: str, args: dict[str, Any], result: str) -> Step:
    return call(name, args, result)


def _sentence(i: int, length: int) -> str:
    """createRepetitiveContent(id, length): one sentence repeated to `length` chars."""
    base = f"This is a unique sentence, id={i}. "
    return (base * (length // len(base) + 1))[:length]


def _random(rng: random.Random, n: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(rng.choice(alphabet) for _ in range(n))


GEMINI_USER_PATTERN = (
    "I will not output any text.\n  I will just end the turn.\n  I am done.\n"
    "  I will not do anything else.\n  I will wait for the user's next command.\n"
)
GEMINI_USER_PATTERN_2 = "I have added all the requested logs and verified the test file. I will now mark the task as complete.\n  "
GEMINI_THOUGHT_PATTERN = "I need to check the file. The file does not exist. I will create the file. "
SAME_TOOL = ("testTool", {"param": "value"}, '{"param": "value", "status": "ok"}')
RNG = random.Random(41)

GEMINI_CASES = (
    Case(
        "gemini_fifth_identical_tool_call",
        "Gemini CLI",
        f"{GEMINI} :: should detect a loop on the TOOL_CALL_LOOP_THRESHOLD-th identical call",
        True,
        tuple(_tool(*SAME_TOOL) for _ in range(5)),
    ),
    Case(
        "gemini_identical_calls_with_a_thought_between",
        "Gemini CLI",
        f"{GEMINI} :: should not reset tool call counter for other event types",
        True,
        (*(_tool(*SAME_TOOL) for _ in range(4)), say("Thinking about the result."), _tool(*SAME_TOOL)),
    ),
    Case(
        "gemini_chanting_user_example",
        "Gemini CLI",
        f"{GEMINI} :: should detect the specific user-provided loop example",
        True,
        (say(GEMINI_USER_PATTERN * 12),),
        note="one response repeating its 5 lines 12 times (Gemini flags it at the 10th)",
    ),
    Case(
        "gemini_chanting_second_user_example",
        "Gemini CLI",
        f"{GEMINI} :: should detect the second specific user-provided loop example",
        True,
        (say(GEMINI_USER_PATTERN_2 * 12),),
    ),
    Case(
        "gemini_chanting_thought_process",
        "Gemini CLI",
        f"{GEMINI} :: should detect a loop of repeated complex thought processes",
        True,
        (say(GEMINI_THOUGHT_PATTERN * 12),),
    ),
    # --- not a loop
    Case(
        "gemini_different_tool_calls",
        "Gemini CLI",
        f"{GEMINI} :: should not detect a loop for different tool calls",
        False,
        tuple(
            s
            for r in range(3)
            for s in (
                _tool("testTool", {"param": "value1"}, f'{{"param": "value1", "rows": {3 + r * 7}}}'),
                _tool("testTool", {"param": "value2"}, f'{{"param": "value2", "rows": {5 + r * 11}}}'),
                _tool(
                    "anotherTool",
                    {"param": "value1"},
                    f'{{"job": "value1", "state": "{("queued", "running", "done")[r]}"}}',
                ),
            )
        ),
        note="the calls' results are not given by the peer: here each brings a new state",
    ),
    Case(
        "gemini_random_content",
        "Gemini CLI",
        f"{GEMINI} :: should not detect a loop for random content",
        False,
        tuple(say(_random(RNG, 10 * 8)) for _ in range(12)),
    ),
    Case(
        "gemini_list_with_long_shared_prefix",
        "Gemini CLI",
        f"{GEMINI} :: should not detect a loop for a list with a long shared prefix",
        False,
        (
            say(
                "".join(
                    f"- projects/my-google-cloud-project-12345/locations/us-central1/services/{i}\n"
                    for i in range(15)
                )
            ),
        ),
    ),
    Case(
        "gemini_repetitions_far_apart",
        "Gemini CLI",
        f"{GEMINI} :: should not detect a loop if repetitions are very far apart",
        False,
        (say("".join(_sentence(1, 50) + _random(RNG, 2000) for _ in range(10))),),
    ),
    Case(
        "gemini_repeats_inside_a_code_block",
        "Gemini CLI",
        f"{GEMINI} :: should not detect a loop for a long code block with some repeating tokens",
        False,
        (say("```\n" + "for (let i = 0; i < 10; i++) { console.log(i); }\n" * 20 + "```"),),
    ),
    Case(
        "gemini_divider_content",
        "Gemini CLI",
        f"{GEMINI} :: should not detect a loop for repeating divider-like content",
        False,
        (say("-" * 50 * 15),),
    ),
)


# --- Cline: loop and doom-loop detection --------------------------------------------------------
MAIN_TS = "1\timport { run } from './app'\n2\trun(process.argv)\n"
A_TS = "1\texport const a = 1\n"

CLINE_CASES = (
    Case(
        "cline_read_file_three_times",
        "Cline",
        f"{CLINE_DOOM} :: should inject warning at soft threshold (3 identical calls)",
        True,
        tuple(read("src/main.ts", MAIN_TS) for _ in range(3)),
    ),
    Case(
        "cline_search_files_five_times",
        "Cline",
        f"{CLINE_DOOM} :: should escalate to consecutiveMistakeCount at hard threshold (5 identical calls)",
        True,
        tuple(
            call("search_files", {"regex": "TODO", "path": "."}, "src/app.ts:12: // TODO: retry")
            for _ in range(5)
        ),
        by=3,
        note="soft warning at the 3rd call, escalation at the 5th",
    ),
    Case(
        "cline_task_progress_is_not_part_of_the_call",
        "Cline",
        f"{CLINE_LOOP} :: should strip task_progress from comparison",
        True,
        tuple(
            call(
                "read_file",
                {"path": "src/index.ts", "task_progress": f"step {i} of 5"},
                "1\texport * from './app'\n",
            )
            for i in range(5)
        ),
        by=3,
    ),
    Case(
        "cline_attempt_completion_three_times",
        "Cline",
        f"{CLINE_DOOM} :: should handle empty params",
        True,
        tuple(call("attempt_completion", {}, "") for _ in range(3)),
    ),
    Case(
        "cline_new_streak_after_a_break",
        "Cline",
        f"{CLINE_DOOM} :: should resume counting after a break",
        True,
        (
            read("a.ts", A_TS),
            read("a.ts", A_TS),
            call("list_files", {"path": "."}, "a.ts\nb.ts\npackage.json"),
            read("a.ts", A_TS),
            read("a.ts", A_TS),
            read("a.ts", A_TS),
        ),
    ),
    # --- not a loop
    Case(
        "cline_one_immediate_repeat",
        "Cline",
        f"{CLINE_DOOM} :: should not trigger warning before threshold",
        False,
        (read("src/main.ts", MAIN_TS), read("src/main.ts", MAIN_TS)),
    ),
    Case(
        "cline_different_tool_resets",
        "Cline",
        f"{CLINE_DOOM} :: should reset counter when different tool is used",
        False,
        (
            read("src/main.ts", MAIN_TS),
            read("src/main.ts", MAIN_TS),
            call("list_files", {"path": "src/"}, "main.ts\nutils.ts"),
        ),
    ),
    Case(
        "cline_different_params_reset",
        "Cline",
        f"{CLINE_DOOM} :: should reset counter when same tool is used with different params",
        False,
        (
            read("src/main.ts", MAIN_TS),
            read("src/main.ts", MAIN_TS),
            read("src/utils.ts", "1\texport const sleep = ...\n"),
        ),
    ),
    Case(
        "cline_different_tools_same_params",
        "Cline",
        f"{CLINE_LOOP} :: should NOT count different tools with same params as identical",
        False,
        (
            read("src/main.ts", MAIN_TS),
            call("search_files", {"path": "src/main.ts"}, "src/main.ts:2: run(process.argv)"),
            call("list_files", {"path": "src/main.ts"}, "src/main.ts"),
        ),
    ),
    Case(
        "cline_search_regex_changes",
        "Cline",
        f"{CLINE_DOOM} :: should track params correctly via JSON.stringify",
        False,
        (
            call("search_files", {"regex": "TODO", "path": "src/"}, "src/app.ts:12: // TODO: retry"),
            call("search_files", {"regex": "FIXME", "path": "src/"}, "src/net.ts:40: // FIXME: timeout"),
        ),
    ),
    Case(
        "cline_reset_when_tool_or_params_change",
        "Cline",
        f"{CLINE_LOOP} :: should reset when tool or params change",
        False,
        (
            read("a.ts", A_TS),
            read("a.ts", A_TS),
            read("b.ts", "1\texport const b = 2\n"),
            read("b.ts", "1\texport const b = 2\n"),
            call("list_files", {"path": "b.ts"}, "b.ts"),
        ),
    ),
)


# --- Roo Code: ToolRepetitionDetector -----------------------------------------------------------
def _browser(action: str, extra: dict[str, Any] | None = None, out: str = "") -> Step:
    return call("browser_action", {"action": action, **(extra or {})}, out)


PAGE = "Screenshot taken. Console logs: (none)\nVisible: {part}"
ITEMS = (
    "oak desk",
    "steel lamp",
    "linen sofa",
    "glass vase",
    "wool rug",
    "pine shelf",
    "clay pot",
    "silk pillow",
    "brass clock",
    "cedar chest",
    "jute basket",
)

ROO_CASES = (
    Case(
        "roo_fourth_identical_call_default_limit",
        "Roo Code",
        f"{ROO} :: should allow first 3 calls but block on the 4th call for limit 3 (default)",
        True,
        tuple(call("tool-name", {}, "done") for _ in range(4)),
    ),
    Case(
        "roo_same_params_in_another_order",
        "Roo Code",
        f"{ROO} :: should treat tools with same parameters in different order as identical",
        True,
        (
            call("same-tool", {"a": "1", "b": "2", "c": "3"}, "ok: a=1 b=2 c=3"),
            call("same-tool", {"c": "3", "a": "1", "b": "2"}, "ok: a=1 b=2 c=3"),
            call("same-tool", {"b": "2", "c": "3", "a": "1"}, "ok: a=1 b=2 c=3"),
            call("same-tool", {"a": "1", "c": "3", "b": "2"}, "ok: a=1 b=2 c=3"),
        ),
        by=3,
        tolerance=1,
        note="limit 2 in the test: the 3rd call is refused",
    ),
    Case(
        "roo_same_click_three_times",
        "Roo Code",
        f"{ROO} :: should still apply repetition detection to other browser_action types",
        True,
        tuple(
            _browser("click", {"coordinate": "[100, 200]"}, PAGE.format(part="Login form")) for _ in range(4)
        ),
        by=3,
        tolerance=1,
    ),
    Case(
        "roo_same_files_read_again",
        "Roo Code",
        f"{ROO} :: should detect repetition when same files are read multiple times with nativeArgs",
        True,
        tuple(
            call("read_file", {"files": [{"path": "same-file.ts"}]}, "1\texport default {}\n")
            for _ in range(4)
        ),
        by=3,
        tolerance=1,
    ),
    Case(
        "roo_command_repeated_around_scrolls",
        "Roo Code",
        f"{ROO} :: should not interfere with repetition detection of other tools when scroll actions are interspersed",
        True,
        (
            call("execute_command", {"command": "ls"}, "README.md\nsrc\n"),
            _browser("scroll_down", out=PAGE.format(part="section 2 of 5")),
            _browser("scroll_down", out=PAGE.format(part="section 3 of 5")),
            call("execute_command", {"command": "ls"}, "README.md\nsrc\n"),
            _browser("scroll_down", out=PAGE.format(part="section 4 of 5")),
            call("execute_command", {"command": "ls"}, "README.md\nsrc\n"),
            _browser("scroll_down", out=PAGE.format(part="section 5 of 5")),
            call("execute_command", {"command": "ls"}, "README.md\nsrc\n"),
        ),
        by=6,
        tolerance=2,
        note="the 3rd `ls` is refused: scrolls between do not count for or against it",
    ),
    Case(
        "roo_browser_action_without_action",
        "Roo Code",
        f"{ROO} :: should handle browser_action with missing or invalid action parameter gracefully",
        True,
        tuple(
            call("browser_action", {}, "Error: missing value for required parameter 'action'", error=True)
            for _ in range(3)
        ),
    ),
    Case(
        "roo_sixth_call_with_limit_five",
        "Roo Code",
        f"{ROO} :: should handle different limits correctly",
        True,
        tuple(call("tool-name", {}, "done") for _ in range(6)),
    ),
    # --- not a loop
    Case(
        "roo_different_tools",
        "Roo Code",
        f"{ROO} :: should allow execution for different tool calls",
        False,
        (
            call("first-tool", {}, "first done"),
            call("second-tool", {}, "second done"),
            call("third-tool", {}, "third done"),
        ),
    ),
    Case(
        "roo_scroll_down_ten_times",
        "Roo Code",
        f"{ROO} :: should not count browser scroll_down actions as repetitions",
        False,
        tuple(_browser("scroll_down", out=PAGE.format(part=f"section {k + 2} of 12")) for k in range(10)),
    ),
    Case(
        "roo_scroll_down_and_up",
        "Roo Code",
        f"{ROO} :: should not count alternating scroll_down and scroll_up as repetitions",
        False,
        tuple(
            s
            for k in range(5)
            for s in (
                _browser("scroll_down", out=PAGE.format(part=f"{ITEMS[2 * k]}, {ITEMS[2 * k + 1]}")),
                _browser("scroll_up", out=PAGE.format(part=f"{ITEMS[2 * k + 1]}, {ITEMS[2 * k + 2]}")),
            )
        ),
        note="each scroll shows another part of a page that grows (an infinite list)",
    ),
    Case(
        "roo_other_file_between",
        "Roo Code",
        f"{ROO} :: should differentiate read_file calls with different files in nativeArgs",
        False,
        (
            call("read_file", {"files": [{"path": "file1.ts"}]}, "1\texport const one = 1\n"),
            call("read_file", {"files": [{"path": "file2.ts"}]}, "1\texport const two = 2\n"),
            call("read_file", {"files": [{"path": "file1.ts"}]}, "1\texport const one = 1\n"),
        ),
    ),
    Case(
        "roo_same_command_other_directory",
        "Roo Code",
        f"{ROO} :: should handle tools with both params and nativeArgs",
        False,
        (
            call("execute_command", {"command": "ls", "cwd": "/home/user"}, "notes.txt\nprojects\n"),
            call("execute_command", {"command": "ls", "cwd": "/home/admin"}, "backup.sh\nlogs\n"),
        ),
    ),
    Case(
        "roo_other_call_resets",
        "Roo Code",
        f"{ROO} :: should reset the counter when different tool calls are made",
        False,
        (
            call("same-tool", {}, "same done"),
            call("different-tool", {}, "different done"),
            call("same-tool", {}, "same done"),
        ),
    ),
)


# --- Goose: RepetitionInspector -----------------------------------------------------------------
USER_123 = '{"id": 123, "name": "Ada", "plan": "pro"}'
USER_456 = '{"id": 456, "name": "Lin", "plan": "free"}'

GOOSE_CASES = (
    Case(
        "goose_third_identical_call",
        "Goose",
        f"{GOOSE} :: test_repetition_inspector_denies_after_exceeding_and_resets_on_param_change (first half)",
        True,
        tuple(call("fetch_user", {"id": 123}, USER_123) for _ in range(4)),
        by=3,
        tolerance=1,
        note="max_repetitions 2 (the test's setting): the 3rd identical call is denied",
    ),
    Case(
        "goose_repeat_after_a_param_change",
        "Goose",
        f"{GOOSE} :: test_repetition_inspector_denies_after_exceeding_and_resets_on_param_change (second half)",
        True,
        (
            call("fetch_user", {"id": 123}, USER_123),
            *(call("fetch_user", {"id": 456}, USER_456) for _ in range(4)),
        ),
        by=4,
        tolerance=1,
    ),
    Case(
        "goose_param_change_resets",
        "Goose",
        f"{GOOSE} :: test_repetition_inspector_denies_after_exceeding_and_resets_on_param_change (allowed calls)",
        False,
        (
            call("fetch_user", {"id": 123}, USER_123),
            call("fetch_user", {"id": 123}, USER_123),
            call("fetch_user", {"id": 456}, USER_456),
            call("fetch_user", {"id": 456}, USER_456),
        ),
    ),
)


# --- LangChain: ToolCallLimitMiddleware ---------------------------------------------------------
LANGCHAIN_CASES = (
    Case(
        "langchain_search_over_its_limit",
        "LangChain",
        f"{LANGCHAIN} :: test_middleware_error_behavior",
        True,
        tuple(call("search", {"query": "test"}, "Results for test") for _ in range(4)),
        by=3,
        tolerance=1,
        note="thread_limit 2: the 3rd call is refused; the calls are the same search with the same result",
    ),
    Case(
        "langchain_different_searches_and_sums",
        "LangChain",
        f"{LANGCHAIN} :: test_multiple_middleware_instances",
        False,
        (
            call("search", {"query": "test"}, "Results for test"),
            call("calculator", {"expression": "1+1"}, "Result: 2"),
            call("search", {"query": "test2"}, "Results for test2"),
            call("calculator", {"expression": "2+2"}, "Result: 4"),
            call("search", {"query": "test3"}, "Results for test3"),
        ),
        note="the middleware stops it on its budget (3 searches > 2), not as a loop: every call and result differs",
    ),
    Case(
        "langchain_run_limit_resets",
        "LangChain",
        f"{LANGCHAIN} :: test_run_limit_with_multiple_human_messages",
        False,
        (
            user("Question 1"),
            call("search", {"query": "test1"}, "Results for test1"),
            user("Question 2"),
            call("search", {"query": "test2"}, "Results for test2"),
        ),
    ),
)

CASES: tuple[Case, ...] = (
    *OPENHANDS_CASES,
    *OPENHANDS_SDK_CASES,
    *GEMINI_CASES,
    *CLINE_CASES,
    *ROO_CASES,
    *GOOSE_CASES,
    *LANGCHAIN_CASES,
)
