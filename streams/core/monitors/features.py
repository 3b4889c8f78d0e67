"""What the monitors read from one step, computed once per step.

Agents name their tools in many ways (OpenHands' `execute_bash`, Claude Code's `Bash`/`Edit`,
SWE-agent's `str_replace_editor`, LangChain tools, QA/review agents' `search`/`read_file`). This
module maps a step onto a few kinds (modify, verify, read, finish, condense, shell) and pulls
out the specifics the steering text names: the command, the files touched, the error.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from dataclasses import dataclass
from typing import Any

import orjson

TEXT_KEPT = 200  # chars of an action / claim / thought kept in run state
OBS_HASHED = 4000  # chars of an observation that feed its fingerprint
SKETCH_WORDS = 300  # words of it that feed its sketch

FINISH_ACTIONS = frozenset(
    {
        "finish",
        "submit",
        "final_answer",
        "finalanswer",
        "attempt_completion",
        "complete",
        "complete_task",
        "task_complete",
        "done",
        "answer",
        "submit_answer",
        "submit_review",
        "approve",
    }
)
EDIT_ACTIONS = frozenset(
    {
        "edit",
        "edit_file",
        "write",
        "write_file",
        "write_to_file",
        "create",
        "create_file",
        "str_replace",
        "apply_patch",
        "patch",
        "insert",
        "replace",
        "replace_in_file",
        "multiedit",
        "multi_edit",
        "notebookedit",
        "update_file",
        "delete_file",
        "file_write",
        "file_edit",
        "modify_file",
    }
)
READ_ACTIONS = frozenset(
    {"read", "read_file", "view", "view_file", "open", "open_file", "cat", "file_read", "show_file"}
)
SHELL_ACTIONS = frozenset(
    {
        "bash",
        "shell",
        "run",
        "execute",
        "execute_command",
        "execute_bash",
        "terminal",
        "run_command",
        "run_shell_command",
        "cmd",
        "exec",
        "cmdrun",
        "run_terminal_cmd",
        "ipython",
        "python",
        "execute_ipython_cell",
    }
)
CONDENSE_ACTIONS = frozenset(
    {
        "condense",
        "condensation",
        "summarize",
        "summarize_context",
        "compact",
        "compress",
        "compress_context",
        "condense_context",
        "memory_compress",
        "context_summary",
    }
)
EDITOR_ACTIONS = frozenset({"str_replace_editor", "editor", "file_editor", "text_editor"})
EDITOR_MODIFY_COMMANDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "edit"})

VERIFY_CMD = re.compile(
    r"\b(pytest|py\.test|unittest|nose2|tox|nox|npm (run )?test|yarn test|pnpm test|jest|vitest|mocha|"
    r"cargo (test|check|clippy|build)|go (test|vet|build)|make (test|check)|ctest|mvn (test|verify)|"
    r"gradle(w)? test|\./gradlew test|rspec|phpunit|dotnet test|mypy|ruff|flake8|pylint|eslint|tsc|"
    r"pyright|shellcheck|python3? -m (py_compile|compileall|unittest|pytest)|bazel test)\b"
)
RUN_SCRIPT_CMD = re.compile(r"^\s*(python3?|node|ruby|bash|sh|go run|cargo run|\./)\s*\S+")
MODIFY_CMD = re.compile(
    r"(\bsed\s+(-\w*i|--in-place)|(?<![\d&])>>?\s*[\w./~-]|\btee\b|\brm\s|\bmv\s|\bcp\s|\bgit (apply|am|checkout --|"
    r"restore|commit|merge|rebase|reset)|\bpatch\s|\b(pip|npm|yarn|pnpm|cargo|apt-get|apt) (install|add|remove)\b|"
    r"\btouch\s|\bmkdir\s|\bperl -\w*i|\bchmod\s)"
)
READ_CMD = re.compile(r"^\s*(cat|head|tail|less|more|nl|bat|sed -n|grep|rg|git (diff|show|log|status))\b")
PATH_RE = re.compile(r"(?:[\w.-]+/)*[\w-]+\.[A-Za-z][\w]{0,5}\b|(?:[\w.-]+/)+[\w.-]+")
PATH_KEYS = ("path", "file", "file_path", "filename", "target_file", "filepath", "notebook_path")
CMD_KEYS = ("command", "cmd", "script", "code", "input")

# Normalised away before fingerprinting an observation: what changes on every run of the same
# command without meaning progress (durations, clocks, addresses, pids).
VOLATILE = re.compile(
    # the lookahead lets the scan skip positions that cannot start a match (2x faster)
    r"(?=[\dp])(?:\d+(\.\d+)?\s?(ms|s|sec|seconds)\b|\d{1,2}:\d{2}:\d{2}(\.\d+)?|0x[0-9a-fA-F]+|"
    r"\bpid[ =:]\d+|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2})"
)
NO_RESULT = re.compile(
    r"^\s*(no (matches|results|files?|output)( found)?|nothing found|0 (results|matches)|not found|\[\]|\{\}|none)\.?\s*$",
    re.IGNORECASE,
)


def short_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).hexdigest()


def input_text(action_input: Any) -> str:
    if action_input is None:
        return ""
    if isinstance(action_input, str):
        return action_input
    try:
        return orjson.dumps(action_input, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return str(action_input)


def _command(action_input: Any) -> str:
    if isinstance(action_input, str):
        return action_input
    if isinstance(action_input, dict):
        for k in CMD_KEYS:
            v = action_input.get(k)
            if isinstance(v, str):
                return v
    return ""


def _paths(action_input: Any, command: str) -> list[str]:
    found: list[str] = []
    if isinstance(action_input, dict):
        for k in PATH_KEYS:
            v = action_input.get(k)
            if isinstance(v, str) and v:
                found.append(v)
            elif isinstance(v, list):
                found.extend(x for x in v if isinstance(x, str))
    text = command if command else (action_input if isinstance(action_input, str) else "")
    if not found and text:
        found = [m for m in PATH_RE.findall(text[:1000]) if not m.startswith("-")][:4]
    seen: list[str] = []
    for p in found:
        p = p.strip().removeprefix("./")
        if p and p not in seen:
            seen.append(p)
    return seen[:4]


def normalise_obs(obs: str) -> str:
    return " ".join(VOLATILE.sub("#", obs[:OBS_HASHED]).split())


def obs_sketch(norm_obs: str, k: int = 8) -> list[int]:
    """Bottom-k sketch of word 3-shingles of a normalised observation: a k-int summary whose
    overlap estimates Jaccard similarity. crc32 keeps it cheap and the same in every process."""
    words = norm_obs.lower().split()[:SKETCH_WORDS]
    if len(words) < 3:
        shingles = {" ".join(words)} if words else set()
    else:
        shingles = {" ".join(words[i : i + 3]) for i in range(len(words) - 2)}
    return sorted(zlib.crc32(s.encode()) for s in shingles)[:k]


def sketch_similarity(a: list[int], b: list[int]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    k = max(len(a), len(b))
    union = sorted(set(a) | set(b))[:k]
    both = set(a) & set(b)
    return sum(1 for h in union if h in both) / len(union)


@dataclass(frozen=True, slots=True)
class StepFeatures:
    """One step, reduced to what the monitors compare."""

    step: int
    thought: str
    action: str | None  # lower-cased tool name
    action_label: str  # the tool name as the agent spelled it, for steering text
    act_text: str  # "tool: input", truncated: what loops are matched on
    sig: str  # exact action signature (tool + full input)
    command: str
    paths: tuple[str, ...]
    observation: str
    obs_hash: str
    obs_norm: str  # volatile parts masked: what fingerprints and sketches are computed on
    obs_empty: bool  # no output or an explicit "no results"
    is_error: bool
    error_line: str  # the observation's most telling line when it is an error
    modifies: bool
    verifies: bool
    reads: bool
    finishes: bool
    condenses: bool
    empty: bool  # no thought and no action: an empty model response


EXCEPTION_LINE = re.compile(r"\b\w*(Error|Exception|Fault)\b:?|^E\s|\berror:", re.IGNORECASE)
ERROR_WORDS = re.compile(r"(error|exception|failed|traceback|cannot|denied|not found)", re.IGNORECASE)


def _error_line(obs: str) -> str:
    """The line that says what went wrong: an exception or compiler error line over a summary
    ("1 failed in 0.8s"), with durations, times and addresses masked so reruns compare equal."""
    lines = [ln.strip() for ln in obs.strip().splitlines() if ln.strip()][-30:]
    for pattern in (EXCEPTION_LINE, ERROR_WORDS):
        for ln in reversed(lines):
            if pattern.search(ln):
                return normalise_obs(ln)[:160]
    return normalise_obs(lines[-1])[:160] if lines else ""


def extract(ev: dict[str, Any], max_chars: int) -> StepFeatures:
    thought = ev.get("thought") or ""
    if not isinstance(thought, str):
        thought = str(thought)
    thought = thought[:max_chars]
    raw_action = ev.get("action")
    label = raw_action.strip() if isinstance(raw_action, str) and raw_action.strip() else None
    action = label.lower().replace("-", "_") if label else None
    raw_input = ev.get("action_input")
    itext = input_text(raw_input)[:max_chars]
    obs = ev.get("observation") or ""
    if not isinstance(obs, str):
        obs = input_text(obs)
    obs = obs[:max_chars]
    is_error = bool(ev.get("observation_is_error"))

    command = _command(raw_input) if action in SHELL_ACTIONS else ""
    paths = tuple(_paths(raw_input, command))
    editor_cmd = raw_input.get("command") if isinstance(raw_input, dict) else None
    modifies = verifies = reads = False
    if action in EDIT_ACTIONS:
        modifies = True
    elif action in EDITOR_ACTIONS:
        modifies = editor_cmd in EDITOR_MODIFY_COMMANDS
        reads = not modifies
    elif action in READ_ACTIONS:
        reads = True
    elif action in SHELL_ACTIONS and command:
        verifies = bool(VERIFY_CMD.search(command)) or bool(RUN_SCRIPT_CMD.match(command))
        modifies = bool(MODIFY_CMD.search(command)) and not verifies
        reads = bool(READ_CMD.match(command))
    elif action is not None and re.search(r"(test|lint|check|verify|validate|typecheck)", action):
        verifies = True
    finishes = action in FINISH_ACTIONS
    condenses = action in CONDENSE_ACTIONS
    act_text = f"{label}: {itext}"[:TEXT_KEPT] if label else ""
    norm_obs = normalise_obs(obs)
    return StepFeatures(
        step=int(ev.get("step") or 0),
        thought=thought,
        action=action,
        action_label=label or "",
        act_text=act_text,
        sig=short_hash(f"{action}\x00{itext}") if action else "",
        command=command[:TEXT_KEPT],
        paths=paths,
        observation=obs,
        obs_hash=short_hash(norm_obs),
        obs_norm=norm_obs,
        obs_empty=not norm_obs or bool(NO_RESULT.match(norm_obs)),
        is_error=is_error,
        error_line=_error_line(obs) if is_error else "",
        modifies=modifies,
        verifies=verifies,
        reads=reads,
        finishes=finishes,
        condenses=condenses,
        empty=not thought.strip() and action is None,
    )


TOPIC_CHARS = 160


def topic_text(f: StepFeatures) -> str:
    """What a step is about: the thought plus the command or files it touched (the action's
    raw JSON input would add the same tool vocabulary to every step and blur the topic).
    Drift and sprawl embed this same text, so each step costs one fast embedding."""
    about = f.command or " ".join(f.paths) or (f.act_text.split(":", 1)[-1] if f.act_text else "")
    return " ".join(" ".join(p for p in (f.thought.strip(), about) if p).split())[:TOPIC_CHARS]
