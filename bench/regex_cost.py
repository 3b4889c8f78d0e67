"""Cost per KB of the core's regular expressions on adversarial text of growing length, before
(the patterns as they were, kept in OLD) and after, and of one maximal step through the core.

    .venv/bin/python -m bench.regex_cost [--sizes 2,8,32] [--step-sizes 4,16,64,256] [--repeat 5]

A pattern whose cost per KB grows with the length of its input lets a few KB from one tenant
delay every run on the worker (issue 32: `_ENTITY` took 0.6-1.4 s on a 20,000-character
thought). Each figure is CPU seconds of the measuring thread (the core is single-threaded; the
per-step figure counts the whole process, embedders included) per KB of input: the median of
`--repeat` runs with min and max. A size whose one run would take longer than `--budget` is
not measured for the old patterns (printed `>`, with the size where it stopped).

The same pieces drive tests/unit/core/test_regex_cost.py: every pattern of the core, inputs
derived from each pattern's own shape, and the old patterns to show that the test catches them.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib
import operator
import pkgutil
import re
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

import streams.core
from streams.core.events import Limits

CORE = Path(streams.core.__file__).parent
_M, _I = re.MULTILINE, re.IGNORECASE

# The patterns as they were before issue 32 (each quadratic somewhere), by where they lived.
OLD: dict[str, re.Pattern[str]] = {
    "scoring.heuristic._ENTITY": re.compile(
        r"""(?:[\w.-]*/[\w./-]+)|(?:\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b)|(?:"[^"\n]{1,200}")|(?:'[^'\n]{2,200}')|(?:`[^`\n]{1,200}`)"""
    ),
    "reading.features.VOLATILE": re.compile(
        r"(?=[\dp])(?:\d+(\.\d+)?\s?(ms|s|sec|seconds)\b|\d{1,2}:\d{2}:\d{2}(\.\d+)?|0x[0-9a-fA-F]+|"
        r"\bpid[ =:]\d+|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2})"
    ),
    "reading.features.COORDINATION": re.compile(
        r"^\W*(next speaker\b|terminate\W*$|\{?\s*\"?(is_request_satisfied|next_speaker|instruction_or_question|"
        r"is_in_loop|is_progress_being_made)\b|(updated |initial )?(ledger|plan|fact sheet)\s*:|"
        r"(please )?(continue|proceed|go ahead)\W*$)|group chat manager|let other participants?\b",
        _I,
    ),
    "monitors.loop.signal.FACT": re.compile(
        r"\b\d[\d,.]*\d\b|\d{2,}|`[^`]{2,40}`|\"[^\"]{3,40}\"|https?://\S+|\b[\w-]+\.[a-z]{2,4}\b"
    ),
    "monitors.loop.rules.ID": re.compile(r"[\w#-]*\d[\w#-]*"),
    "monitors.drift.IDENT": re.compile(
        r"`([^`\s]{3,60})`|\b([A-Za-z_]+[A-Z_][A-Za-z0-9_]*|[a-z]+_[a-z0-9_]+|[\w-]+\.[a-z]{1,4})\b"
    ),
    "monitors.contradiction.IDENT": re.compile(
        r"`([^`]{2,60})`|\b([A-Za-z_]+[A-Z_][A-Za-z0-9_]*|[a-z]+_[a-z0-9_]+)\b"
    ),
    "reading.shell.SUBMIT_WORD": re.compile(
        r"\b[A-Z][A-Z_]*(SUBMIT|FINAL_OUTPUT|TASK_COMPLETE|COMPLETE_TASK)[A-Z_]*\b"
    ),
    "reading.shell.HEREDOC": re.compile(r"<<-?\s*(['\"]?)(\w+)\1([^\n]*)\n.*?\n\s*\2\s*(?=\n|$)", re.DOTALL),
    "reading.observation._CRASH_LINE": re.compile(
        r"^(?:Traceback \(most recent call last\):|Exception in thread |\s*Caused by: [\w.$]+"
        r"|(?:E\s+)?(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure)\b(?::|$)"
        r"|[^\s:]+:\d+(?::\d+)?: (?:fatal )?error\b|(?:fatal )?error(?:\[\w+\])?: |\[ERROR\]"
        r"|FAILURE: Build failed|npm ERR!|fatal: |Killed$)",
        _M,
    ),
    "reading.observation._EXIT": re.compile(
        r"^\s*\[?(?:<returncode>|exit ?code:?|exit status:?|return ?code:?)\s*(-?\d+)"
        r"|(?:finished|exited|terminated) with (?:exit )?(?:code|status):? (-?\d+)",
        _M | _I,
    ),
    "reading.observation._MARKUP": re.compile(
        r"<returncode>.*?</returncode>|</?\w+>|\bexit ?code:?\s*-?\d+(?: \([^)]*\))?", _I
    ),
    "reading.observation._PYTEST": re.compile(r"^=*\s*(\d+ [a-z]+(?:, \d+ [a-z]+)*) in [\d.]+s\b.*$", _M),
    "reading.observation._PYTEST_PART": re.compile(r"(\d+) (failed|passed|errors?)\b"),
    "reading.observation._MOCHA": re.compile(r"^\s*(\d+) (passing|failing)\b", _M),
}
# The text each old pattern was worst on (among the test's inputs): a unit repeated, an ending.
WORST: dict[str, tuple[str, str]] = {
    "scoring.heuristic._ENTITY": ("a", ""),
    "reading.features.VOLATILE": ("1", ""),
    "reading.features.COORDINATION": (" ", "é"),
    "monitors.loop.signal.FACT": ("a-", ""),
    "monitors.loop.rules.ID": ("a", ""),
    "monitors.drift.IDENT": ("a-", ""),
    "monitors.contradiction.IDENT": ("_", "é"),
    "reading.shell.SUBMIT_WORD": ("ESUBMIT", "é"),
    "reading.shell.HEREDOC": ("<<a\n\n", ""),
    "reading.observation._CRASH_LINE": ("\n", ""),
    "reading.observation._EXIT": ("\n", ""),
    "reading.observation._MARKUP": ("<returncode>", ""),
    "reading.observation._PYTEST": ("\n", ""),
    "reading.observation._PYTEST_PART": ("1", ""),
    "reading.observation._MOCHA": ("\n", ""),
}


def _mod(name: str) -> ModuleType:
    return importlib.import_module(f"streams.core.{name}")


def _scan(p: re.Pattern[str]) -> Callable[[str], object]:
    return lambda text: sum(1 for _ in p.finditer(text))


def new_reader(name: str) -> Callable[[str], object]:
    """What reads a text where the old pattern `name` did, over the whole text (no cut)."""
    from streams.core.monitors import drift
    from streams.core.monitors.loop import signal
    from streams.core.reading import observation, shell
    from streams.core.reading.scan import leftmost

    special: dict[str, Callable[[str], object]] = {
        "monitors.loop.signal.FACT": signal.message_facts,
        "monitors.drift.IDENT": lambda t: list(leftmost(drift.IDENT, drift.IDENT_FILE, t)),
        "reading.shell.HEREDOC": shell.strip_heredocs,
        "reading.observation._MARKUP": observation.strip_markup,
    }
    if name in special:
        return special[name]
    module, attr = name.rsplit(".", 1)
    return _scan(getattr(_mod(module), attr))


def _old_names_in(text: str) -> set[str]:
    return {(a or b).lower().strip(".") for a, b in OLD["monitors.drift.IDENT"].findall(text[:2000])}


@contextlib.contextmanager
def old_patterns() -> Iterator[None]:
    """The core as it was: the old patterns (and the old one-regex readers) put back."""
    from streams.core.monitors import drift
    from streams.core.monitors.loop import signal
    from streams.core.reading import observation, shell

    swaps: list[tuple[object, str, object]] = [
        (signal, "message_facts", OLD["monitors.loop.signal.FACT"].findall),
        (drift, "names_in", _old_names_in),
        (shell, "strip_heredocs", lambda t: OLD["reading.shell.HEREDOC"].sub(lambda m: "<<EOF" + m[3], t)),
        (observation, "strip_markup", lambda t: OLD["reading.observation._MARKUP"].sub("", t)),
    ]
    swaps += [
        (_mod(n.rsplit(".", 1)[0]), n.rsplit(".", 1)[1], p)
        for n, p in OLD.items()
        if hasattr(_mod(n.rsplit(".", 1)[0]), n.rsplit(".", 1)[1])
    ]
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _v in swaps]
    drift._task_names.cache_clear()
    try:
        for obj, attr, value in swaps:
            setattr(obj, attr, value)
        yield
    finally:
        for obj, attr, value in saved:
            setattr(obj, attr, value)
        drift._task_names.cache_clear()


# ---- every pattern of the core, and inputs made to hurt it ----------------------------------


def core_patterns() -> dict[str, re.Pattern[str]]:
    """Every compiled pattern of `streams.core`: module attributes, class attributes, and the
    literal patterns of inline `re.search(r"...", ...)` calls (see `inline_calls`)."""
    found: dict[str, re.Pattern[str]] = {}
    for info in pkgutil.walk_packages(streams.core.__path__, "streams.core."):
        mod = importlib.import_module(info.name)
        short = info.name.removeprefix("streams.core.")
        for attr, value in vars(mod).items():
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                found.setdefault(f"{short}.{attr}", value)
            elif isinstance(value, type) and value.__module__ == mod.__name__:
                for cattr, cvalue in vars(value).items():
                    if isinstance(cvalue, re.Pattern) and isinstance(cvalue.pattern, str):
                        found.setdefault(f"{short}.{attr}.{cattr}", cvalue)
    for where, pattern, flags in inline_calls():
        found.setdefault(where, re.compile(pattern, flags))
    return found


RE_CALLS = frozenset(
    ["compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"]
)
FLAGS_AT = {"compile": 1, "split": 3, "sub": 4, "subn": 4}  # the others: (pattern, string, flags)


def re_calls() -> Iterator[tuple[str, ast.Call, str | None]]:
    """Each `re.<function>(...)` call in the core's source: (file:line, the call, and for a
    `NAME = re.compile(...)` in a module or class body, where `core_patterns` finds it)."""
    for path in sorted(CORE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        module = ".".join(path.relative_to(CORE).with_suffix("").parts).removesuffix(".__init__")
        named: dict[int, str] = {}
        for body, prefix in [(tree.body, module)] + [
            (n.body, f"{module}.{n.name}") for n in tree.body if isinstance(n, ast.ClassDef)
        ]:
            for stmt in body:
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                ):
                    named[id(stmt.value)] = f"{prefix}.{stmt.targets[0].id}"
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.func.attr in RE_CALLS
            ):
                name = named.get(id(node)) if node.func.attr == "compile" else None
                yield f"{path.relative_to(CORE)}:{node.lineno}", node, name


def inline_calls() -> list[tuple[str, str, int]]:
    """(where, pattern, flags) of the other `re.<function>` calls with a literal pattern: they
    run on input too."""
    out = []
    for where, call, name in re_calls():
        if name is not None or not call.args or not isinstance(call.args[0], ast.Constant):
            continue
        at = FLAGS_AT.get(call.func.attr, 2) if isinstance(call.func, ast.Attribute) else 2
        args = call.args[at : at + 1] + [k.value for k in call.keywords if k.arg == "flags"]
        flags = 0
        for arg in args:
            flags |= int(eval(ast.unparse(arg), {"re": re}))
        if isinstance(call.args[0].value, str):
            out.append((where, call.args[0].value, flags))
    return out


# Shapes that make backtracking patterns retry: long runs of one kind of character, of names,
# paths, numbers, punctuation, lines; with an ending that a pattern may then fail on.
UNITS = (
    "a", "A", "1", "_", "-", ".", "/", " ", "\n", '"', "'", "`", ":", "é",
    "a/", "../", "a.", "a-", "a_", "aB_", "a1", "1.", "0x", " \n", "<a>", "a: ", "ab1 ",
)  # fmt: skip
TAILS = ("", "é", "!")


def _sample(seq: Any, reps: int, branch: int, groups: dict[int, str]) -> str:
    """A string the parsed pattern `seq` matches, or nearly: each repeat `reps` times (within
    its bounds), the `branch`-th alternative of each alternation (mixed radix)."""
    from re import _constants as c  # type: ignore[attr-defined]

    def pick(ok: Callable[[str], bool]) -> str:
        return next((ch for ch in "a1 _-./:\n\"'`eEA#x=,;<>()[]{}\\|!?*+@$%&~^\t" if ok(ch)), "a")

    cats = {c.CATEGORY_DIGIT: r"\d", c.CATEGORY_NOT_DIGIT: r"\D", c.CATEGORY_SPACE: r"\s"}
    cats |= {c.CATEGORY_NOT_SPACE: r"\S", c.CATEGORY_WORD: r"\w", c.CATEGORY_NOT_WORD: r"\W"}

    def member(items: Any, ch: str) -> bool:
        neg = hit = False
        for op, av in items:
            if op is c.NEGATE:
                neg = True
            elif op is c.LITERAL:
                hit |= ch == chr(av)
            elif op is c.RANGE:
                hit |= av[0] <= ord(ch) <= av[1]
            elif op is c.CATEGORY:
                hit |= bool(re.match(cats.get(av, "(?!)"), ch))
        return hit != neg

    out = []
    for op, av in seq:
        if op is c.LITERAL:
            out.append(chr(av))
        elif op is c.NOT_LITERAL:
            out.append(pick(functools.partial(operator.ne, chr(av))))
        elif op is c.ANY:
            out.append("a")
        elif op is c.IN:
            out.append(pick(functools.partial(member, av)))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            out.extend(_sample(sub, reps, branch, groups) for _ in range(min(max(lo, reps), hi)))
        elif op is c.SUBPATTERN:
            text = _sample(av[3], reps, branch, groups)
            if av[0]:
                groups[av[0]] = text
            out.append(text)
        elif op is c.ATOMIC_GROUP:
            out.append(_sample(av, reps, branch, groups))
        elif op is c.BRANCH:
            alts = av[1]
            out.append(_sample(alts[branch % len(alts)], reps, branch // len(alts), groups))
        elif op is c.GROUPREF:
            out.append(groups.get(av, ""))
    return "".join(out)


def derived_units(p: re.Pattern[str], limit: int = 18) -> list[str]:
    """Units made from the pattern itself: strings it matches (one per alternative, as far as
    `limit` goes) and those strings less their last character, which it nearly matches."""
    from re import _parser  # type: ignore[attr-defined]

    tree = list(_parser.parse(p.pattern, p.flags))
    out: list[str] = []
    for branch in range(limit):
        for reps in (0, 1, 2):
            s = _sample(tree, reps, branch, {})
            for unit in (s, s[:-1]):
                if unit and unit not in out and unit not in UNITS:
                    out.append(unit)
    return out[:limit]


def adversarial(p: re.Pattern[str]) -> list[tuple[str, str]]:
    """(unit, tail) pairs: the text is the unit repeated, then the tail."""
    return [(u, t) for u in (*UNITS, *derived_units(p)) for t in TAILS]


def text(unit: str, tail: str, size: int) -> str:
    """`size` characters: `unit` repeated, ending with `tail`."""
    return (unit * (size // len(unit) + 1))[: size - len(tail)] + tail


def cpu_per_kb(fn: Callable[[str], object], s: str, runs: int = 3, least_s: float = 0.0005) -> float:
    """The least CPU seconds per KB of `fn(s)` over `runs` runs, each of as many calls as last
    `least_s` (one call when one is longer). The measuring thread's CPU time: what the machine's
    other processes do changes it little."""
    calls, best = 1, float("inf")
    while True:
        for _ in range(runs):
            t0 = time.thread_time_ns()
            for _i in range(calls):
                fn(s)
            best = min(best, (time.thread_time_ns() - t0) / calls)
        if best * calls >= least_s * 1e9 or calls >= 4096:
            return best / 1e9 / (len(s) / 1024)
        calls *= max(2, min(64, int(least_s * 1e9 / max(best * calls, 1.0))))


# ---- one maximal step through the core ------------------------------------------------------

STEP_UNITS = (
    "a-",
    "1",
    "\n",
    "_",
    "a",
    "<<a\n\n",
    "<returncode>",
    "exit code 1 (",
    "ESUBMIT",
    "aB_",
    "é",
    " ",
)


def maximal_step(unit: str, size: int, run_id: str = "r", k: int = 2) -> dict[str, Any]:
    """A step whose every string field is `unit` repeated, at its limit (run id, agent and model
    256, action 1024 unless `bash`, the thought 20,000, a command) and the observation filling
    the rest of `size` bytes."""

    def fill(n: int) -> str:
        return text(unit, "", max(n, 1))

    limits = Limits()
    thought = fill(min(limits.max_thought_chars, size // 4))
    ev: dict[str, Any] = {
        "type": "step",
        "schema_version": 1,
        "run_id": run_id,
        "step": k,
        "thought": thought,
        "action": "bash",
        "action_input": {"command": fill(size // 8)},
        "observation": "",
        "observation_is_error": True,
        "tokens": 100,
        "model_id": fill(256),
        "agent": fill(256),
        "ts": 1_700_000_000.0 + k,
    }
    room = min(size, limits.max_event_bytes) - len(orjson.dumps(ev)) - 64
    obs = fill(max(room, 1))
    while len(orjson.dumps(obs)) - 2 > room and len(obs) > 1:  # escapes (\n, é) take more bytes
        obs = obs[: len(obs) * room // (len(orjson.dumps(obs)) - 2)]
    ev["observation"] = obs
    return ev


def _through(sem: Any, limits: Limits) -> Any:
    """One input through the engine as the worker runs it: read, step, seal (no answers)."""
    from streams.core.engine import Engine
    from streams.core.results import Refused

    engine = Engine(None, sem, limits)

    def through(raw: bytes, lookup: Any, now: float, key: bytes) -> Any:
        read = engine.read(raw, now, key=key)
        out = read if isinstance(read, Refused) else engine.step(lookup(read.run_id), read, now)
        return engine.seal(out, [])

    return through


def step_seconds(ev: dict[str, Any], sem: Any, runs: int = 1) -> list[float]:
    """Process CPU seconds of `ev` through the core (read, step, seal), each run in a fresh
    run after a run_start and a normal first step."""
    from streams.core.state import TraceState

    limits = Limits()
    through = _through(sem, limits)
    out = []
    for i in range(runs):
        rid = f"{ev['run_id']}-{i}"
        table: dict[str, TraceState] = {}
        first = {**ev, "run_id": rid, "step": 1, "thought": "Open the file.", "observation": "ok"}
        first |= {"action": "read_file", "action_input": {"path": "a.py"}, "agent": None, "model_id": "m"}
        start = {"type": "run_start", "schema_version": 1, "run_id": rid, "ts": 1_700_000_000.0}
        for warm in (start, first):
            res = through(orjson.dumps(warm), table.get, 1.0, rid.encode())
            if res.state_bytes is not None:
                table[rid] = TraceState.decode(res.state_bytes)
        raw = orjson.dumps({**ev, "run_id": rid})
        t0 = time.process_time()
        through(raw, table.get, 2.0, rid.encode())
        out.append(time.process_time() - t0)
    return out


def fleet_steps(sem: Any, steps: int = 40) -> tuple[list[float], list[bytes]]:
    """Process CPU seconds of each step of a synthetic fleet (one run per behaviour) through
    the core, and the decisions it sent: normal input, where before and after must agree."""
    from streams.core.state import TraceState
    from streams.local.simulate import BEHAVIOURS, trajectory

    limits, took, sent = Limits(), [], []
    through = _through(sem, limits)
    for b in BEHAVIOURS:
        task, payloads = trajectory(b, steps, seed=11)
        rid = f"fleet-{b}"
        table: dict[str, TraceState] = {}
        start = {"type": "run_start", "schema_version": 1, "run_id": rid, "ts": 1_700_000_000.0, "task": task}
        events = [start] + [
            {"type": "step", "schema_version": 1, "run_id": rid, "step": k, "ts": 1_700_000_000.0 + k, **p}
            for k, p in enumerate(payloads, 1)
        ]
        for k, ev in enumerate(events):
            raw = orjson.dumps(ev)
            t0 = time.process_time()
            res = through(raw, table.get, float(k), rid.encode())
            if k:
                took.append(time.process_time() - t0)
            if res.state_bytes is not None:
                table[rid] = TraceState.decode(res.state_bytes)
            sent.append(res.decision_bytes or b"")
    return took, sent


# ---- the benchmark --------------------------------------------------------------------------


def _fmt(xs: list[float]) -> str:
    med = statistics.median(xs)
    return f"{med * 1e6:,.0f} ({min(xs) * 1e6:,.0f} to {max(xs) * 1e6:,.0f})"


def _series(
    fn: Callable[[str], object], make: Callable[[int], str], sizes: list[int], repeat: int, budget: float
) -> tuple[list[str], list[float]]:
    """The table's cells for `fn` at each size, and the medians measured (s per KB)."""
    cells: list[str] = []
    medians: list[float] = []
    for i, kb in enumerate(sizes):
        s = make(kb * 1024)
        grow = (kb / sizes[i - 1]) ** 2 if i else 1.0
        if medians and medians[-1] * sizes[i - 1] * grow > budget:
            cells.append(f"> ({medians[-1] * sizes[i - 1]:.1f} s per call at {sizes[i - 1]} KB)")
            cells.extend("" for _ in sizes[i + 1 :])
            break
        xs = [cpu_per_kb(fn, s, runs=1, least_s=0.002) for _ in range(repeat)]
        medians.append(statistics.median(xs))
        cells.append(_fmt(xs))
    return cells, medians


def main() -> int:
    from bench.common import commit, log, machine

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2,8,32", help="text lengths, KB")
    ap.add_argument("--step-sizes", default="4,16,64,256", help="event sizes for the per-step figure, KB")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--budget", type=float, default=5.0, help="longest single call measured, s")
    ap.add_argument("--step-budget", type=float, default=30.0, help="longest step measured, s")
    ap.add_argument("--step-units", default="a-,1,\\n,<<a\\n\\n,_", help="the maximal steps' units")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"machine: {machine()}  date: {time.strftime('%Y-%m-%d')}  commit: {commit()}")
    print("\nCPU us per KB of text, median of", args.repeat, "(min to max)")
    print(
        "| pattern | text | "
        + " | ".join(f"{'before' if w == 0 else 'after'} {kb} KB" for w in (0, 1) for kb in sizes)
        + " |"
    )
    print("|---|---|" + "---|" * (2 * len(sizes)))
    growth: dict[str, list[float]] = {"before": [], "after": []}
    for name, (unit, tail) in WORST.items():

        def make(n: int, unit: str = unit, tail: str = tail) -> str:
            return text(unit, tail, n)

        log(f"{name}: before")
        before, old_kb = _series(_scan(OLD[name]), make, sizes, args.repeat, args.budget)
        log(f"{name}: after")
        after, new_kb = _series(new_reader(name), make, sizes, args.repeat, args.budget)
        growth["before"].append(old_kb[1] / old_kb[0] if len(old_kb) > 1 else float("inf"))
        growth["after"].append(new_kb[-1] / new_kb[0])
        shape = f"{unit!r} repeated" + (f", then {tail!r}" if tail else "")
        print(f"| {name} | {shape} | " + " | ".join(before + after) + " |", flush=True)

    from streams.embeddings.models import load_models

    sem = load_models().semantics()
    step_sizes = [int(x) for x in args.step_sizes.split(",")]
    units = [u.encode().decode("unicode_escape") for u in args.step_units.split(",")]
    step_seconds(maximal_step("a", 4096), sem)  # load the models
    fleet_steps(sem)  # and embed the fleet's texts once: both sides then find them cached
    rounds: dict[str, list[float]] = {"before": [], "after": []}
    decisions: dict[str, list[bytes]] = {}
    for _ in range(args.repeat):
        for when in ("before", "after"):
            with old_patterns() if when == "before" else contextlib.nullcontext():
                took, decisions[when] = fleet_steps(sem)
            rounds[when].append(statistics.median(took))
    print("\nNormal steps (the synthetic fleet, 7 runs of 40 steps, embeddings cached): process CPU us per")
    print(f"step, median over the steps, median of {args.repeat} rounds (min to max)")
    print("| | before | after | decisions identical |")
    print("|---|---|---|---|")
    same = decisions["before"] == decisions["after"]
    print(
        f"| fleet step | {_fmt(rounds['before'])} | {_fmt(rounds['after'])} | {same} ({len(decisions['after'])}) |"
    )
    print("\nOne maximal step through the core (every string field at its limit, the observation filling")
    print("the event): process CPU us per KB of event, median of", args.repeat, "(min to max)")
    print(
        "| step of | " + " | ".join(f"{w} {kb} KB" for w in ("before", "after") for kb in step_sizes) + " |"
    )
    print("|---|" + "---|" * (2 * len(step_sizes)))
    for unit in units:
        cells = []
        for when in ("before", "after"):
            ctx = old_patterns() if when == "before" else contextlib.nullcontext()
            with ctx:
                last = 0.0
                for i, kb in enumerate(step_sizes):
                    grow = kb / step_sizes[i - 1] if i else 1.0  # the core cuts long fields
                    if last * grow > args.step_budget:
                        cells.append(f"> ({last:.1f} s at {step_sizes[i - 1]} KB)")
                        cells.extend("" for _ in step_sizes[i + 1 :])
                        break
                    ev = maximal_step(unit, kb * 1024)
                    n = len(orjson.dumps(ev)) / 1024
                    log(f"{unit!r} {when} {kb} KB")
                    xs = [x / n for x in step_seconds(ev, sem, runs=args.repeat)]
                    last = statistics.median(xs) * n
                    cells.append(_fmt(xs))
        print(f"| {unit!r} | " + " | ".join(cells) + " |", flush=True)
    print(
        f"SUMMARY regex_cost: {len(WORST)} patterns that were super-linear: cost per KB x"
        f"{min(growth['before']):.1f} or more from {sizes[0]} to {sizes[1]} KB before, at most "
        f"x{max(growth['after']):.2f} from {sizes[0]} to {sizes[-1]} KB after; the fleet's decisions "
        f"{'identical' if same else 'DIFFER'}, {statistics.median(rounds['before']) * 1e6:.0f} vs "
        f"{statistics.median(rounds['after']) * 1e6:.0f} us per normal step"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
