"""What a shell command line does, as the monitors need it: verify, modify, read, submit, and
the files it names.

Real agents chain commands (`cd /repo && python reproduce.py`), write files with heredocs
(`cat <<'EOF' > fix.py ... EOF`), edit with `sed -i`, and put code and dotted identifiers
(`self.data`, `org.junit`) in their arguments. A command line is split into segments; each
segment is judged by its program and arguments, and only arguments that are shaped like files
(a directory part or a known source extension, not an identifier or a sed expression) count as
files.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left
from dataclasses import dataclass

SOURCE_EXTENSIONS = frozenset(
    [
        "py",
        "pyi",
        "pyx",
        "java",
        "kt",
        "kts",
        "scala",
        "groovy",
        "js",
        "jsx",
        "mjs",
        "cjs",
        "ts",
        "tsx",
        "go",
        "rs",
        "c",
        "h",
        "cc",
        "cpp",
        "cxx",
        "hpp",
        "hh",
        "m",
        "mm",
        "swift",
        "rb",
        "php",
        "cs",
        "fs",
        "vb",
        "lua",
        "pl",
        "pm",
        "r",
        "jl",
        "dart",
        "ex",
        "exs",
        "erl",
        "hs",
        "ml",
        "clj",
        "sh",
        "bash",
        "zsh",
        "ps1",
        "sql",
        "html",
        "htm",
        "css",
        "scss",
        "less",
        "vue",
        "svelte",
        "md",
        "rst",
        "txt",
        "json",
        "yaml",
        "yml",
        "toml",
        "ini",
        "cfg",
        "conf",
        "xml",
        "gradle",
        "properties",
        "lock",
        "csv",
        "tsv",
        "ipynb",
        "proto",
        "graphql",
        "tf",
        "mk",
        "cmake",
        "dockerfile",
        "env",
        "patch",
        "diff",
    ]
)
TEST_PROGRAMS = frozenset(
    [
        "pytest",
        "py.test",
        "tox",
        "nox",
        "nose2",
        "jest",
        "vitest",
        "mocha",
        "rspec",
        "phpunit",
        "ctest",
        "javac",
        "java",
        "kotlinc",
        "scalac",
        "gcc",
        "g++",
        "clang",
        "clang++",
        "rustc",
        "tsc",
        "mypy",
        "pyright",
        "ruff",
        "flake8",
        "pylint",
        "eslint",
        "shellcheck",
        "node",
        "deno",
        "ruby",
        "perl",
        "php",
        "runtests.py",
        "sphinx-build",
    ]
)
BUILD_TOOLS = {
    "mvn": ("test", "verify", "compile", "package", "install", "exec:java", "-Dtest"),
    "./mvnw": ("test", "verify", "compile", "package", "install", "-Dtest"),
    "gradle": ("test", "build", "check", "compile", "run"),
    "./gradlew": ("test", "build", "check", "compile", "run"),
    "npm": ("test", "run", "t"),
    "yarn": ("test", "run", "jest"),
    "pnpm": ("test", "run"),
    "go": ("test", "run", "build", "vet"),
    "cargo": ("test", "run", "build", "check", "clippy"),
    # any target: `make html` builds a reproduction's docs, `make` a C project (clean only: below)
    "make": ("",),
    "cmake": ("--build",),
    "ninja": ("",),
    "gmake": ("",),
    "meson": ("test", "compile"),
    "dotnet": ("test", "build", "run"),
    "bazel": ("test", "run", "build"),
    "bin/test": ("",),
    "./bin/test": ("",),
}
PYTHONS = re.compile(r"^(?:/\S*/)?(python|python\d(?:\.\d+)?|pypy\d?)$")
READ_PROGRAMS = frozenset(
    [
        "cat",
        "head",
        "tail",
        "less",
        "more",
        "nl",
        "bat",
        "grep",
        "egrep",
        "rg",
        "ag",
        "ack",
        "find",
        "ls",
        "tree",
        "wc",
        "awk",
        "diff",
        "file",
        "stat",
    ]
)
MODIFY_PROGRAMS = frozenset(["mv", "cp", "patch", "truncate"])
# Housekeeping: removing a reproduction script or making a folder changes nothing to verify.
HOUSEKEEPING = frozenset(["rm", "rmdir", "mkdir", "touch", "chmod", "ln"])
WRAPPERS = frozenset(["sudo", "timeout", "env", "time", "nice", "nohup", "xargs", "stdbuf"])
# The lookahead checks once that the word ends at a word boundary: without it, a word of many
# SUBMITs ending in a digit was retried from each of them to its end (quadratic).
SUBMIT_WORD = re.compile(
    r"\b[A-Z](?=[A-Z_]*+\b)[A-Z_]*(SUBMIT|FINAL_OUTPUT|TASK_COMPLETE|COMPLETE_TASK)[A-Z_]*+\b"
)

# A heredoc opens with `<<[-]TAG`, `<<'TAG'` or `<<"TAG"` and closes at the first line (after
# the opening line's) that is TAG alone; unquoted, a shorter TAG (a prefix) closes it if the
# whole one never does. `strip_heredocs` reads it in linear time: the one regex that did this
# scanned the rest of the text for each `<<` that never closed (quadratic).
HEREDOC_OPEN = re.compile(r"<<-?\s*+(['\"]?)(\w++)\1")
# A line that could close one: (its last newline before it) TAG, then the end of the text (an
# empty group 3) or whitespace up to a newline (group 4: that whitespace, less its last line).
HEREDOC_CLOSE = re.compile(r"(?<!\s)(?>\s*(\n))\s*+(\w++)(?:\s*+\Z()|(?=(\s*)\n))")
REDIRECT = re.compile(r"(?<![\d&<])(?:\d?>>?|&>)\s*([^\s;&|<>]+)")
ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
PATHLIKE = re.compile(r"^[\w./~+@-]+$")
DOTTED_IDENTIFIER = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


PATH_LINE = re.compile(r"^([^:]+):\d+")
# A copy kept aside (`f.py.bak`, `f.orig`, `f.py.modified`, `f.py.new`): restoring it or moving it
# into place says nothing new about the code, and its name is not what the agent changed.
BACKUP = re.compile(r"(\.(bak|orig|new|modified|backup|old|save|tmp)\d*|~)$", re.IGNORECASE)
CLEAN_TARGETS = frozenset(["clean", "distclean", "mrproper", "realclean"])
PLAIN_PART = re.compile(r"^[\w.+@~-]+$")


def is_file_path(token: str) -> bool:
    """A token the run treats as a file: `src/a.py`, `tests/`, `Foo.java`, not `self.data`,
    `org.junit`, `s/a/b/`, `-n` or a URL."""
    if "/" not in token and "." not in token:
        return False  # most arguments: words, numbers, options
    t = token.strip("'\"`,:;()[]{}")
    m = PATH_LINE.match(t)
    if m:
        t = m.group(1)  # path:line
    if not t or len(t) > 300 or t[0] == "-" or not PATHLIKE.match(t) or URL.match(t):
        return False
    if t in (".", "..", "/", "~") or t.startswith("s/") or (t.endswith("/g") and t.count("/") >= 2):
        return False
    name = t.rsplit("/", 1)[-1]
    if BACKUP.search(name):
        name = BACKUP.sub("", name)  # `html.py.bak` is shaped like `html.py`
    if "." in name and name.rsplit(".", 1)[-1].lower() in SOURCE_EXTENSIONS:
        return True
    if "/" in t.strip("/"):
        parts = [p for p in t.split("/") if p]
        # every part a plain name; a dotted identifier path such as `a.b/c.d` is still a path
        return len(parts) >= 2 and all(PLAIN_PART.match(p) for p in parts)
    return t.endswith("/") and len(t) > 1


def is_backup(path: str) -> bool:
    """A copy set aside (`x.py.bak`, `x.orig`, `x.py.modified`, `x.py.new`)."""
    return bool(BACKUP.search(path))


def normalise_path(p: str) -> str:
    t = p.strip("'\"`,:;()[]{}")
    m = PATH_LINE.match(t)
    return (m.group(1) if m else t).removeprefix("./")


# What one segment of a command does, in the order the segments run: ("check",), ("change",
# *paths) or ("cp" | "mv", source, target). A check after the changes of the same line covers
# them; a change after the check does not (`sed -i ... f.py && python repro.py` is checked).
Op = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CommandFacts:
    verifies: bool = False
    modifies: bool = False
    reads: bool = False
    submits: bool = False
    verify_paths: tuple[str, ...] = ()
    modify_paths: tuple[str, ...] = ()
    read_paths: tuple[str, ...] = ()
    ops: tuple[Op, ...] = ()
    runs: tuple[str, ...] = ()  # the command lines a Python cell runs (`pycode`)


WORD = re.compile(r"""(?:'[^']*'|"(?:\\.|[^"\\])*"|[^\s'"]+)+""")


def _words(segment: str) -> list[str]:
    """Shell words with their quotes removed: a regex, not shlex (ten times faster, and a
    stray quote in an agent's command is not an error here)."""
    return [w.replace("'", "").replace('"', "") for w in WORD.findall(segment[:2000])]


def _program(words: list[str]) -> tuple[str, list[str]]:
    i = 0
    while i < len(words):
        w = words[i]
        if ASSIGN.match(w):
            i += 1
            continue
        if w in WRAPPERS:
            i += 1
            # timeout 60 / nice -n 5: skip the wrapper's own numeric or option arguments
            while i < len(words) and (words[i].startswith("-") or words[i].replace(".", "").isdigit()):
                i += 1
            continue
        return w, words[i + 1 :]
    return "", []


def _files(args: list[str]) -> list[str]:
    return [normalise_path(a) for a in args[:16] if is_file_path(a)]


def _segment(seg: str) -> CommandFacts:
    redirects = [normalise_path(t) for t in REDIRECT.findall(seg) if t not in ("/dev/null", "&1", "&2")]
    redirects = [t for t in redirects if is_file_path(t) or "." in t]
    words = _words(REDIRECT.sub(" ", seg))
    prog, args = _program(words)
    base = prog.rsplit("/", 1)[-1] if prog.startswith("/") else prog
    verifies = modifies = reads = submits = False
    vpaths: list[str] = []
    mpaths: list[str] = list(redirects)
    rpaths: list[str] = []
    if base == "echo" or base == "printf":
        submits = bool(SUBMIT_WORD.search(seg))
        modifies = bool(redirects)
    elif PYTHONS.match(base):
        if args[:2] in (["-m", "pip"], ["-m", "venv"]):
            modifies = True
        else:
            verifies = True
            vpaths = _files(args[:3])
    elif base in TEST_PROGRAMS or base.endswith(("runtests.py", "bin/test", "/runtests")):
        verifies = True
        vpaths = _files(args)
    elif base in ("make", "gmake", "ninja"):
        targets = [a for a in args if not a.startswith("-") and "=" not in a]
        verifies = not targets or not all(t in CLEAN_TARGETS for t in targets)
    elif base in BUILD_TOOLS:
        goals = BUILD_TOOLS[base]
        verifies = any(
            (g == "" and not args) or any(a == g or (g and a.startswith(g)) for a in args) for g in goals
        )
        if base in ("npm", "yarn", "pnpm") and args[:1] in (["install"], ["add"], ["i"]):
            modifies = True
    elif base.startswith("./") or (prog.startswith("/") and base.endswith((".sh", ".py"))):
        verifies = True
        vpaths = _files([prog])
    elif base in ("bash", "sh", "zsh") and args and is_file_path(args[0]):
        verifies = True
        vpaths = _files(args[:1])
    elif base == "sed" or base == "perl":
        in_place = any(
            a.startswith("-i") or a == "--in-place" or (a.startswith("-") and "i" in a[1:4]) for a in args
        )
        files = [a for a in _files(args) if not a.startswith("s/")]
        if in_place:
            modifies, mpaths = True, [*mpaths, *files[-3:]]
        else:
            reads, rpaths = True, files[-3:]
    elif base == "tee":
        modifies, mpaths = True, [*mpaths, *_files(args)]
    elif base == "git":
        sub = args[0] if args else ""
        # checkout/restore/reset/stash put files back as they were: nothing new to verify
        if sub in ("apply", "am", "merge", "rebase", "cherry-pick", "mv"):
            modifies = True
        elif sub in ("diff", "show", "log", "status", "grep", "blame"):
            reads = True
    elif base in MODIFY_PROGRAMS:
        modifies, mpaths = True, [*mpaths, *_files(args)]
    elif base in ("pip", "pip3", "apt-get", "apt", "conda", "poetry", "uv"):
        modifies = bool(args[:1] and args[0] in ("install", "add", "remove", "uninstall"))
    elif base in READ_PROGRAMS:
        reads = True
        rpaths = _files(args)[-3:]
    if redirects and not modifies:
        modifies = True
    ops: tuple[Op, ...] = ()
    if verifies:
        ops = (("check",),)  # what a check writes (`> out.log`) is its output, not a change
    elif modifies:
        pair = _files(args) if base in ("cp", "mv") else []
        ops = ((base, *pair),) if len(pair) == 2 and not redirects else (("change", *mpaths[:4]),)
    return CommandFacts(verifies, modifies, reads, submits, tuple(vpaths), tuple(mpaths), tuple(rpaths), ops)


# Where split_segments must look: outside quotes, inside "..." (a backslash escapes), inside '...'.
_SEG_OUT = re.compile(r"[;\n&|'\"]")
_SEG_DQ = re.compile(r'["\\]')
_SEG_SQ = re.compile(r"'")


def split_segments(text: str) -> list[str]:
    """Split on `&&`, `||`, `;`, `|` and newlines outside quotes (a sed script may hold a newline).

    The segments are slices of the text between separators, so only the characters that can
    change the state are visited (a search in C between them, not a Python loop per char)."""
    out: list[str] = []
    seg = pos = 0
    quote = ""
    while True:
        m = (_SEG_DQ if quote == '"' else _SEG_SQ if quote else _SEG_OUT).search(text, pos)
        if m is None:
            break
        i = m.start()
        c = text[i]
        if quote:
            # an escape inside "..." keeps the next char as it is; the closing quote ends it
            pos, quote = (i + 2, quote) if c == "\\" else (i + 1, "")
            continue
        pos = i + 1
        if c in "'\"":
            quote = c
        elif c in ";\n" or text[i : i + 2] in ("&&", "||") or (c == "|" and text[i - 1 : i] != ">"):
            if text[i : i + 2] in ("&&", "||"):
                pos = i + 2
            out.append(text[seg:i])
            seg = pos
    out.append(text[seg:])
    return out


def strip_heredocs(text: str) -> str:
    r"""The command with each heredoc's body dropped and its opening line kept as `<<EOF rest`,
    as `re.sub(r"<<-?\s*(['\"]?)(\w+)\1([^\n]*)\n.*?\n\s*\2\s*(?=\n|$)", r"<<EOF\3", text,
    flags=re.DOTALL)` made it (`bench.regex_cost.OLD`), in linear time."""
    m = HEREDOC_OPEN.search(text) if "<<" in text else None
    if m is None:
        return text
    # Every line that could close a heredoc: its tag -> (its last newline before it, where the
    # match would end: the end of the text, or the last newline of its trailing whitespace).
    closers: dict[str, tuple[list[int], list[int]]] = {}
    for c in HEREDOC_CLOSE.finditer(text):
        nls, ends = closers.setdefault(c[2], ([], []))
        nls.append(c.start(1))
        ends.append(len(text) if c[3] is not None else c.end(2) + len(c[4]))
    out: list[str] = []
    done = eol = 0
    while m is not None:
        if m.end() > eol:
            eol = text.find("\n", m.end())  # where the opening line ends (many `<<` can share it)
        if eol < 0:
            break  # no newline after it: no heredoc opens from here on
        word, quoted = m[2], bool(m[1])
        for length in (len(word),) if quoted else range(len(word), 0, -1):
            nls, ends = closers.get(word[:length], ([], []))
            j = bisect_left(nls, eol + 1)  # a closing line after the opening line
            if j < len(nls):
                out += [
                    text[done : m.start()],
                    "<<EOF",
                    text[m.end() if quoted else m.start(2) + length : eol],
                ]
                done = ends[j]
                break
        m = HEREDOC_OPEN.search(text, max(done, m.start() + 1))
    out.append(text[done:])
    return "".join(out)


COMMAND_CHARS = 4000  # of a command line analysed
ANALYSED_KEPT = 1024  # command lines whose facts are remembered (at most ~4 MB of keys)


def analyse(command: str) -> CommandFacts:
    """Facts of a whole command line: any segment verifying makes the line verify, and so on;
    `ops` keeps what the segments do in their order.

    Remembered for the last ANALYSED_KEPT lines: agents re-run the same commands (the tests
    after each edit, `git diff`), 18-49% of the command steps of the dev runs repeat one, and
    the facts are a pure function of the text (immutable, so sharing them is safe)."""
    return _analyse(command[:COMMAND_CHARS])


@functools.lru_cache(maxsize=ANALYSED_KEPT)
def _analyse(text: str) -> CommandFacts:
    # a heredoc's body is data, not commands: keep its opening line (where it goes) only
    text = strip_heredocs(text)
    segs = [s for s in split_segments(text) if s.strip() and not s.strip().startswith("#")]
    return combine([_segment(s) for s in segs[:20]])


def combine(parts: list[CommandFacts]) -> CommandFacts:
    """The facts of parts run in order (a line's segments, a cell's lines): any part verifying
    makes the whole verify, and so on; `ops` keep their order, paths and commands their first
    four."""

    def uniq(xs: list[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(x for x in xs if x))[:4]

    return CommandFacts(
        verifies=any(f.verifies for f in parts),
        modifies=any(f.modifies for f in parts),
        reads=any(f.reads for f in parts),
        submits=any(f.submits for f in parts),
        verify_paths=uniq([p for f in parts for p in f.verify_paths]),
        modify_paths=uniq([p for f in parts for p in f.modify_paths]),
        read_paths=uniq([p for f in parts for p in f.read_paths]),
        ops=tuple(op for f in parts for op in f.ops)[:20],
        runs=uniq([r for f in parts for r in f.runs]),
    )


SHELL_PROGRAMS = (
    TEST_PROGRAMS
    | READ_PROGRAMS
    | MODIFY_PROGRAMS
    | HOUSEKEEPING
    | frozenset(BUILD_TOOLS)
    | WRAPPERS
    | frozenset(
        [
            "python",
            "python3",
            "sed",
            "perl",
            "tee",
            "git",
            "pip",
            "pip3",
            "echo",
            "printf",
            "cd",
            "bash",
            "sh",
            "which",
            "wget",
            "curl",
            "export",
            "source",
        ]
    )
)


def is_shell_program(action: str) -> bool:
    """An action named after a program (SWE-agent records `javac Foo.java` as action `javac`)."""
    return action in SHELL_PROGRAMS or bool(PYTHONS.match(action)) or action.startswith("./")


NOT_RUN = re.compile(
    r"command not found|: not found\b|can't open file|is not recognized as an internal|"
    r"no such file or directory: '?[\w./-]+'?\s*$|error: could not find or load main class|"
    r"no module named (pytest|unittest)",
    re.IGNORECASE | re.MULTILINE,
)


# Every `NOT_RUN` match holds one of these, in lower case: an ASCII head without any (most
# results) is not scanned (the pattern, case-insensitive, is tried at every character).
_NOT_RUN_WORDS = (
    "not found",
    "can't open file",
    "is not recognized as an internal",
    "no such file or directory: ",
    "could not find or load main class",
    "no module named ",
)


def could_not_run(observation: str) -> bool:
    """The verification attempt never ran (missing program, missing script)."""
    if len(observation) >= 1500:
        return False
    head = observation[:600]
    if head.isascii():
        low = head.lower()
        if not any(w in low for w in _NOT_RUN_WORDS):
            return False
    return bool(NOT_RUN.search(head))
