"""The package's import graph has no cycle, and the pure core imports nothing above it.

Every import counts, also those inside functions: a lazy import only hides a cycle until the
function runs. `import streams` (the package itself) is not an edge: its __init__ re-exports
lazily and imports nothing at load time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import streams

ROOT = Path(streams.__file__).parent


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The streams modules `path` imports (a `from pkg import name` of a submodule counts as
    that submodule)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("streams."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("streams"):
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & modules
            out.update(subs or {target})
    return {m for m in out if m in modules and m != me and m != "streams"}


def graph() -> dict[str, set[str]]:
    files = sorted(ROOT.rglob("*.py"))
    modules = {module_name(f) for f in files}
    return {module_name(f): imports(f, modules) for f in files}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """One example path per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_inside_the_package() -> None:
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Below the core: the wire contract, the quoting of untrusted text, and the taint values and
# the call gate (standard library only, and each other), which the agent side shares.
BELOW_THE_CORE = (
    "streams.shared.contract",
    "streams.shared.untrusted",
    "streams.shared.taint",
    "streams.shared.gate_policy",
)


def test_the_core_imports_nothing_above_it() -> None:
    above = {
        m: sorted(d for d in deps if not d.startswith("streams.core") and d not in BELOW_THE_CORE)
        for m, deps in graph().items()
    }
    assert {m: d for m, d in above.items() if m.startswith("streams.core") and d} == {}
    assert all(graph()[m] <= set(BELOW_THE_CORE) for m in BELOW_THE_CORE)


def reachable(g: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(g.get(m, ()))
    return seen


# What the agent side may import of the package (a client-only install has no worker extra).
AGENT_SIDE = (
    "streams.agent",
    "streams.shared.contract",
    "streams.shared.untrusted",
    "streams.kafka.client_settings",
    "streams.kafka",
    "streams.kafka.security",
    "streams.kafka.signing",  # decision signatures: standard library only
    "streams.kafka.probe",  # is the broker there: one metadata request naming no topic
    "streams.shared.taint",  # the call gate's values and hashes: standard library only
    "streams.shared.gate_policy",  # the call gate's policy file: standard library only
    "streams.kafka.wire",
    "streams.shared.logsafe",  # escaping for log lines: standard library only
)


def test_the_agent_side_imports_nothing_of_the_worker() -> None:
    """Every import counts, also those inside functions (tests/unit/agent/test_lean_imports.py
    checks what an import really loads)."""
    g = graph()
    agent = [m for m in g if m.startswith("streams.agent")]
    assert "streams.agent.client" in agent
    beyond = {
        m: sorted(d for d in reachable(g, m) if not d.startswith("streams.agent.") and d not in AGENT_SIDE)
        for m in agent
    }
    assert {m: d for m, d in beyond.items() if d} == {}


def test_the_reach_finder_follows_imports_inside_functions() -> None:
    src = ROOT / "cli" / "main.py"
    assert "streams.worker.assemble" in reachable(graph(), module_name(src))


# What loads code by name at run time: only the composition root (streams.plugins) may, so the
# core runs with exactly the Policy it is handed.
PLUGIN_LOADING = (
    "streams.plugins",
    "importlib.metadata",
    "importlib_metadata",
    "pkg_resources",
    "importlib.import_module",
)


def plugin_loading(source: str) -> list[str]:
    """The names `source` imports that load plugins (every import, also inside functions)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return sorted({n for n in names if any(n == f or n.startswith(f + ".") for f in PLUGIN_LOADING)})


def test_nothing_in_the_core_loads_plugins() -> None:
    core = sorted((ROOT / "core").rglob("*.py"))
    assert core
    found = {module_name(f): plugin_loading(f.read_text("utf-8")) for f in core}
    assert {m: names for m, names in found.items() if names} == {}
    assert not any("streams.plugins" in deps for m, deps in graph().items() if m.startswith("streams.core"))


def test_the_plugin_loading_finder_finds_each_way_of_importing_it() -> None:
    src = """
import importlib.metadata
def later():
    from importlib import metadata, resources
    from importlib.metadata import entry_points
    from importlib import import_module
    import pkg_resources
    from streams.plugins import load_policy
"""
    assert plugin_loading(src) == [
        "importlib.import_module",
        "importlib.metadata",
        "importlib.metadata.entry_points",
        "pkg_resources",
        "streams.plugins",
        "streams.plugins.load_policy",
    ]
    assert plugin_loading("from importlib import resources\nimport json\n") == []
