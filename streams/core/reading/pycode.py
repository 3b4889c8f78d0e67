"""What a Python code cell does, as the monitors need it: the files it writes and reads, the
commands and checks it runs, in the order its lines run.

Code-writing agents (smolagents' CodeAgent with `python_interpreter`, OpenHands' IPython cell,
CodeAct agents) edit a file by reading it, replacing a string and writing it back, and run
their tests through `subprocess`, `!pytest` or `%run`. Read as a shell line, or not read at
all, such a cell changed nothing: three edits between four identical test runs looked like
"the same input 4 times with nothing changed in between". A cell is read here line by line
with linear regexes, never executed nor parsed (an agent's cell often does not parse, and
IPython's `!cmd` and `%%bash` are no Python): the shell commands it runs go to
`shell.analyse`, so a cell and a shell line follow one rule.
"""

from __future__ import annotations

import dataclasses
import functools
import re

from .shell import CommandFacts, Op, analyse, combine, is_file_path, normalise_path

CODE_CHARS = 8000  # of a cell read
CODE_LINES = 200  # of its lines read
RUN_KEPT = 400  # chars of a command a cell runs kept
ANALYSED_KEPT = 512  # cells whose facts are remembered (agents re-run the same check cell)

# Tools whose input is a Python cell. `python` alone is a cell only when its input is code
# (SWE-agent records `python fix.py` as action `python` with input `fix.py`).
CELL_ACTIONS = frozenset(
    {
        "python_interpreter",
        "execute_ipython_cell",
        "ipython",
        "run_ipython",
        "python_repl",
        "run_python",
        "execute_python",
        "python_exec",
        "jupyter",
        "run_cell",
        "execute_cell",
    }
)
_PROGRAM_ACTIONS = frozenset({"python", "python3"})

# A string literal on one line: its content (group 1 or 2). Unrolled loops: linear.
_LIT = r"""[rRbBuUfF]{0,2}(?:'([^'\\\n]*+(?:\\.[^'\\\n]*+)*+)'|"([^"\\\n]*+(?:\\.[^"\\\n]*+)*+)")"""
LITERAL = re.compile(_LIT)
ASSIGN = re.compile(r"^([A-Za-z_]\w*)\s*=\s*(?:(?:pathlib\.)?Path\(\s*)?" + _LIT + r"\s*\)?\s*(?:#.*)?$")
# The first argument of a call: a literal, a name, or `Path(<literal or name>)`.
ARG = re.compile(r"(?:(?:pathlib\.)?Path\(\s*+)?(?:" + _LIT + r"|([A-Za-z_]\w*+))")  # after spaces
# the rest of `open(`'s first argument (one level of parentheses: `os.path.join(d, f)`), then the mode
MODE = re.compile(
    r"^(?:[^\n()]|\([^\n()]{0,200}\)){0,200}?,\s*+(?:mode\s*+=\s*+)?[rRbBuU]?['\"]([rwxabt+U]{1,4})['\"]"
)
# A path-like receiver at the end of the text before `.open(` / `.write_text(`.
RECEIVER = re.compile(r"(?:(?:pathlib\.)?Path\(\s*+" + _LIT + r"\s*+\)|(?<!\w)([A-Za-z_]\w*+))\s*+$")
QUOTES_KEPT = re.compile(r"[^'\"]")
OPEN_MODE = re.compile(r"[rRbBuU]?['\"]([rwxabt+U]{1,4})['\"]")  # `.open("w")`, after spaces

SHELL_LINE = re.compile(r"^!(.+)$")
CELL_MAGIC = re.compile(r"^%%(?:bash|sh|script\s+(?:ba)?sh)\b")
RUN_MAGIC = re.compile(r"^%run\s+(.+)$")
SHELL_CALL = re.compile(
    r"\b(?:subprocess|sp)\.(?:run|call|check_call|check_output|Popen|getoutput|getstatusoutput)\s*+\(\s*+"
    r"|\bos\.(?:system|popen)\s*+\(\s*+"
)
# In-process checks: a test runner, a script run, a module reloaded to see an edit.
CHECK_CALL = re.compile(
    r"\b(?:pytest\.main|unittest\.main|doctest\.testmod|doctest\.testfile|runpy\.run_path|"
    r"runpy\.run_module|importlib\.reload|unittest\.TextTestRunner)\s*+\(|\bexec\(\s*+(?:open|compile)\("
)
OPEN_CALL = re.compile(r"(?<![\w.])(?:io\.|codecs\.)?open\(|\.open\(")
PATH_METHOD = re.compile(r"\.(write_text|write_bytes|read_text|read_bytes)\(")
COPY_CALL = re.compile(r"\b(?:shutil\.(copy|copy2|copyfile|move)|os\.(rename|replace))\(")
# Editor functions called from a cell (OpenHands' agent skills, SWE-agent-like helpers).
EDIT_CALL = re.compile(
    r"(?<![\w.])(edit_file_by_replace|insert_content_at_line|append_file|create_file|edit_file|"
    r"write_file|replace_in_file|str_replace)\("
)
READ_CALL = re.compile(r"(?<![\w.])(open_file|view_file|read_file|search_file|search_dir|find_file)\(")
FINAL_CALL = re.compile(r"^final_answer\(")
# Outputs, not code: a cell saving its data or notes changes nothing to verify.
DATA_FILE = re.compile(
    r"\.(csv|tsv|txt|log|json|jsonl|html?|xml|md|rst|png|jpe?g|gif|svg|pdf|xlsx?|docx?|pptx?|zip|"
    r"mp3|wav|pkl|pickle|npy|npz|parquet)$",
    re.IGNORECASE,
)


def is_cell(action: str | None, code: str) -> bool:
    """A step whose input is a Python cell."""
    if action in CELL_ACTIONS:
        return True
    if action not in _PROGRAM_ACTIONS or not code.strip():
        return False
    first = code.split(None, 1)[0]
    return not (first.startswith("-") or is_file_path(first))


def analyse_cell(code: str) -> CommandFacts:
    """Facts of a cell (see the module's docstring); remembered for the last ANALYSED_KEPT cells."""
    return _analyse(code[:CODE_CHARS])


@functools.lru_cache(maxsize=ANALYSED_KEPT)
def _analyse(code: str) -> CommandFacts:
    raw = code.splitlines()[:CODE_LINES]
    body = [ln.strip() for ln in raw if ln.strip() and not ln.lstrip().startswith("#")]
    # `final_answer(x)` at the top level ends the run (in a branch it may not run; a cell that
    # fails stops before it: `features` checks that)
    ends = any(FINAL_CALL.match(ln) for ln in raw)
    if body and CELL_MAGIC.match(body[0]):
        script = "\n".join(body[1:])
        return dataclasses.replace(analyse(script), runs=(script[:RUN_KEPT],))
    names: dict[str, str] = {}
    parts: list[CommandFacts] = []
    for ln in body:
        parts.extend(_line(ln, names))
        m = ASSIGN.match(ln)
        if m:
            names[m[1]] = m[2] if m[2] is not None else m[3] or ""

    facts = combine(parts)
    return dataclasses.replace(facts, submits=True) if ends else facts


def _line(ln: str, names: dict[str, str]) -> list[CommandFacts]:
    """What one line of a cell does, in order (a line may open a file and run a command)."""
    m = SHELL_LINE.match(ln) or RUN_MAGIC.match(ln)
    if m:
        cmd = m[1] if ln[0] == "!" else f"python {m[1]}"
        return [dataclasses.replace(analyse(cmd), runs=(cmd[:RUN_KEPT],))]
    out: list[CommandFacts] = []
    code = _masked(ln)  # calls are found in the code, not in its strings; arguments read from `ln`
    for m in SHELL_CALL.finditer(code):
        cmd = _command_arg(ln, m.end(), names)
        if cmd:
            out.append(dataclasses.replace(analyse(cmd), runs=(cmd[:RUN_KEPT],)))
    if CHECK_CALL.search(code):
        out.append(CommandFacts(verifies=True, ops=(("check",),)))
    for m in OPEN_CALL.finditer(code):
        if m.group(0).startswith("."):  # Path(p).open("w"): the path is the receiver, the mode the argument
            path = _receiver(ln[: m.start()], names)
            mode_m = OPEN_MODE.match(ln, _skip_spaces(ln, m.end()))
            mode = mode_m[1] if mode_m else "r"
        else:
            path = _arg(ln, m.end(), names)
            mode_m = MODE.match(ln[m.end() : m.end() + 300])
            mode = mode_m[1] if mode_m else "r"
        out.append(_file_op(path, any(c in mode for c in "wax+")))
    for m in PATH_METHOD.finditer(code):
        out.append(_file_op(_receiver(ln[: m.start()], names), m[1].startswith("write")))
    for m in COPY_CALL.finditer(code):
        args = [p for p in _args(ln, m.end(), names, 2) if p]
        if len(args) == 2 and all(is_file_path(a) for a in args):
            kind = "mv" if (m[1] == "move" or m[2]) else "cp"
            src, dst = (normalise_path(a) for a in args)
            out.append(CommandFacts(modifies=True, modify_paths=(dst,), ops=((kind, src, dst),)))
    for m in EDIT_CALL.finditer(code):
        out.append(_file_op(_arg(ln, m.end(), names), True))
    for m in READ_CALL.finditer(code):
        out.append(_file_op(_arg(ln, m.end(), names), False))
    return out


def _masked(ln: str) -> str:
    """The line with each string literal's content blanked, its length kept: `web_search("open(x,
    'w')")` calls no `open`."""
    return LITERAL.sub(lambda m: QUOTES_KEPT.sub("_", m[0]), ln) if ("'" in ln or '"' in ln) else ln


def _file_op(path: str | None, writes: bool) -> CommandFacts:
    """A file written (a change: named when the cell names it) or read. Unknown paths are
    read as a change too: `open(file_path, "w")` with `file_path` set by an earlier cell."""
    p = normalise_path(path) if path and is_file_path(path) else ""
    if not writes:
        return CommandFacts(reads=True, read_paths=(p,) if p else ())
    if p and DATA_FILE.search(p):
        return CommandFacts()
    if path and not p:
        return CommandFacts()  # a literal that is no file (a URL, a bare word): not the code
    return CommandFacts(
        modifies=True, modify_paths=(p,) if p else (), ops=(("change", *((p,) if p else ())),)
    )


def _arg(ln: str, at: int, names: dict[str, str]) -> str | None:
    """The call's first argument as a path: a literal, a name set to one, or None (unknown)."""
    m = ARG.match(ln, _skip_spaces(ln, at))
    if m is None:
        return None
    if m[3] is not None:
        return names.get(m[3])
    return m[1] if m[1] is not None else m[2]


def _args(ln: str, at: int, names: dict[str, str], n: int) -> list[str | None]:
    out: list[str | None] = []
    pos = at
    for _ in range(n):
        m = ARG.match(ln, _skip_spaces(ln, pos))
        if m is None:
            break
        out.append(names.get(m[3]) if m[3] is not None else (m[1] if m[1] is not None else m[2]))
        comma = ln.find(",", m.end(), m.end() + 40)
        if comma < 0:
            break
        pos = comma + 1
    return out


def _skip_spaces(ln: str, at: int) -> int:
    while at < len(ln) and ln[at] in " \t":
        at += 1
    return at


def _receiver(before: str, names: dict[str, str]) -> str | None:
    m = RECEIVER.search(before[-200:])
    if m is None:
        return None
    if m[3] is not None:
        return names.get(m[3])
    return m[1] if m[1] is not None else m[2]


def _command_arg(ln: str, at: int, names: dict[str, str]) -> str:
    """The command a `subprocess` / `os.system` call runs: its string, or its list of strings
    joined (`sys.executable` read as `python`); "" when it is built elsewhere."""
    rest = ln[at : at + 1000]
    if rest.startswith("["):
        end = rest.find("]")
        inner = rest[1 : end if end >= 0 else len(rest)]
        words = [a or b for a, b in LITERAL.findall(inner)]
        if "sys.executable" in inner:
            words.insert(0, "python")
        return " ".join(words)
    m = LITERAL.match(rest)
    if m:
        return m[1] if m[1] is not None else m[2]
    name = re.match(r"[A-Za-z_]\w*", rest)  # `cmd = "pytest -x"` on a line before
    return names.get(name[0], "") if name else ""


def final_argument(code: str) -> str | None:
    """The literal a cell's top-level `final_answer(...)` gives, or None (an expression)."""
    for ln in reversed(code[:CODE_CHARS].splitlines()[:CODE_LINES]):
        if FINAL_CALL.match(ln):
            m = ARG.match(ln, _skip_spaces(ln, len("final_answer(")))
            if m and m[3] is None and ln[m.end() :].strip().startswith(")"):
                return m[1] if m[1] is not None else m[2]
            return None
    return None


__all__ = ["CELL_ACTIONS", "Op", "analyse_cell", "final_argument", "is_cell"]
