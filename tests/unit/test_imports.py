"""The package's import graph (and the benchmarks') has no cycle, and each tier of the package
imports only the tiers below it.

Every import counts, also those inside functions: a lazy import only hides a cycle until the
function runs. `import streams` (the package itself) is not an edge: its __init__ re-exports
lazily and imports nothing at load time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import streams

ROOT = Path(streams.__file__).parent


BENCH = ROOT.parent / "bench"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, modules: set[str], top: str = "streams") -> set[str]:
    """The modules of package `top` that `path` imports (a `from pkg import name` of a
    submodule counts as that submodule)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith(top + "."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not (target == top or target.startswith(top + ".")):
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & modules
            out.update(subs or {target})
    return {m for m in out if m in modules and m != me and m != top}


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """The import graph of one package (streams, or bench: `graph(BENCH)`)."""
    files = sorted(root.rglob("*.py"))
    modules = {module_name(f) for f in files}
    return {module_name(f): imports(f, modules, root.name) for f in files}


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


def test_no_import_cycle_among_the_benchmarks() -> None:
    g = graph(BENCH)
    assert "bench.hijack" in g["bench.quality"]  # the graph sees bench's own imports
    assert cycles(g) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def reachable(g: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(g.get(m, ()))
    return seen


def under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


# The tiers, by package: what a module under each prefix may import of ours (every import, also
# those inside functions, and so everything it reaches). `shared` is standard library only and
# sits below the core; the core is pure; `kafka` is what a client-only install may import of the
# broker plumbing; the agent side (a client-only install has no worker extra) reaches nothing
# beyond `shared` and `kafka`.
TIERS = {
    "streams.shared": ("streams.shared",),
    "streams.core": ("streams.core", "streams.shared"),
    "streams.kafka": ("streams.kafka", "streams.shared"),
    "streams.agent": ("streams.agent", "streams.kafka", "streams.shared"),
    "streams.runtime": ("streams.runtime",),
}


def tier_breaches(g: dict[str, set[str]]) -> dict[str, list[str]]:
    """For each module under a tier's prefix, what it reaches outside the tier's allowance."""
    out: dict[str, list[str]] = {}
    for m in g:
        for prefix, allowed in TIERS.items():
            if under(m, prefix):
                beyond = sorted(d for d in reachable(g, m) if not any(under(d, a) for a in allowed))
                if beyond:
                    out[m] = beyond
    return out


def test_each_tier_imports_only_what_its_prefix_allows() -> None:
    """tests/unit/agent/test_lean_imports.py checks what an agent-side import really loads."""
    g = graph()
    for prefix in TIERS:
        assert any(under(m, prefix) for m in g), prefix
    assert "streams.agent.client" in g and "streams.agent.adapters.langchain_middleware" in g
    assert tier_breaches(g) == {}


def test_the_tier_check_finds_a_breach() -> None:
    g = {"streams.core.a": {"streams.shared.b"}, "streams.shared.b": {"streams.settings"}}
    assert tier_breaches(g) == {
        "streams.core.a": ["streams.settings"],
        "streams.shared.b": ["streams.settings"],
    }


def test_only_the_command_line_imports_it() -> None:
    """streams.cli is the top: nothing else imports it but `python -m streams`."""
    users = {m for m, deps in graph().items() for d in deps if under(d, "streams.cli")}
    assert {m for m in users if not under(m, "streams.cli")} == {"streams.__main__"}


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
