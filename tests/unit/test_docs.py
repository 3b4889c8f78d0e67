"""The README is a newcomer's first screen, every documentation link leads somewhere and every
code reference in the docs and docstrings names something that exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", ROOT / "QUALITY.md", ROOT / "BENCHMARKS.md", ROOT / "RELIABILITY.md", *DOCS]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# `a.b` or `a.b.c()` in backticks; a file name (`engine.py`, `decision.schema.json`) is not one.
CODE_REF = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")
FILE_SUFFIX = re.compile(r"\.(py|md|json|ya?ml|toml|sh|txt|java)$")
WIRE_FIELDS = {"monitors.fired"}  # decision fields that read like a module path


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+://", t)]


def test_every_relative_link_in_the_readme_and_docs_exists() -> None:
    for page in PAGES:
        for target in links(page):
            file = target.split("#", 1)[0]
            if file:
                assert (page.parent / file).exists(), f"{page.name}: broken link {target}"


def test_the_readme_is_short_self_contained_and_links_every_doc() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "../shared" not in text
    head = "\n".join(text.splitlines()[:30])
    assert "**For**" in head and "make demo" in head and "make test" in head
    linked = {t.split("#", 1)[0] for t in links(ROOT / "README.md")}
    for doc in DOCS:
        assert f"docs/{doc.name}" in linked, f"README does not link docs/{doc.name}"


def test_no_doc_points_outside_the_repository_for_the_specification() -> None:
    for page in [ROOT / "README.md", *DOCS]:
        assert "SPEC.md" not in page.read_text(encoding="utf-8"), page.name


def _members(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """The names a module or class body binds (through ifs and trys too)."""
    out: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update((n.id, node) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            out.update(((a.asname or a.name).split(".")[0], node) for a in node.names)
        elif isinstance(node, ast.If | ast.Try):
            out.update(_members(node.body))
    return out


class _Code:
    """The modules of streams/ and bench/, parsed: enough to resolve `module.name` and
    `Class.attribute` without importing anything."""

    def __init__(self) -> None:
        self.modules: dict[str, dict[str, ast.AST]] = {}
        self.classes: dict[str, list[ast.ClassDef]] = {}
        for path in [*ROOT.glob("streams/**/*.py"), *ROOT.glob("bench/**/*.py")]:
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            tree = ast.parse(path.read_text("utf-8"))
            self.modules[name] = _members(tree.body)
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, []).append(node)

    def class_members(self, cls: ast.ClassDef) -> dict[str, ast.AST] | None:
        """Its body, `self.x` assignments and bases' members; None if a base is not ours."""
        out = _members(cls.body)
        out.update(
            (n.attr, n)
            for n in ast.walk(cls)
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
            if isinstance(n.value, ast.Name) and n.value.id == "self"
        )
        for base in cls.bases:
            name = base.id if isinstance(base, ast.Name) else None
            if name in ("Protocol", "Exception", "NamedTuple", "TypedDict"):
                continue
            if name not in self.classes:
                return None
            for parent in self.classes[name]:
                inherited = self.class_members(parent)
                if inherited is None:
                    return None
                out = {**inherited, **out}
        return out

    def walk(self, members: dict[str, ast.AST] | None, rest: list[str]) -> bool:
        for part in rest:
            if members is None:
                return True  # a base class or an import we do not follow
            if part not in members:
                return False
            node = members[part]
            if isinstance(node, ast.ClassDef):
                members = self.class_members(node)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                members = None
            else:
                members = {}
        return True

    def resolves(self, ref: str) -> bool | None:
        """True or False for a reference to our code (a module path, whole, `core.`-relative or
        by its last parts, or a class of ours), None for anything else."""
        parts = ref.split(".")
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            found = [m for name, m in self.modules.items() if name == head or name.endswith("." + head)]
            if found:
                return any(self.walk(m, parts[i:]) for m in found)
        if parts[0] in self.classes:
            return any(self.walk(self.class_members(c), parts[1:]) for c in self.classes[parts[0]])
        return None


def test_every_code_reference_in_the_docs_and_docstrings_exists() -> None:
    code = _Code()
    sources = [*PAGES, *ROOT.glob("streams/**/*.py"), *ROOT.glob("bench/**/*.py")]
    stale = [
        f"{path.relative_to(ROOT)}: `{ref}`"
        for path in sources
        for ref in CODE_REF.findall(path.read_text("utf-8"))
        if ref not in WIRE_FIELDS and not FILE_SUFFIX.search(ref) and code.resolves(ref) is False
    ]
    assert not stale, "references to names that do not exist:\n" + "\n".join(stale)


def test_the_weight_table_in_monitors_md_is_the_codes_keys_and_profiles() -> None:
    """The documented `monitor_weights` keys are the ones the worker accepts (the docs once
    named failure labels, `loop` and `contradiction`, that it ignored and now refuses)."""
    from streams.core.monitors.builtin import MONITORS
    from streams.core.monitors.profiles import BUILTIN_PROFILES

    text = (ROOT / "docs" / "monitors.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", text, re.M)
    assert [r[0] for r in rows] == list(MONITORS)
    for i, profile in enumerate(("coding", "pr_review", "qa"), start=1):
        assert {r[0]: float(r[i]) for r in rows} == dict(BUILTIN_PROFILES[profile]), profile


def test_no_doc_installs_the_package_by_name_from_an_index() -> None:
    """rb-streams is on no package index: `pip install 'rb-streams[x]'` fails for a newcomer.
    The docs install from the checkout (`./[x]`), the wheel, or `rb-streams[x] @ git+...`."""
    by_name = re.compile(r"pip install '?rb-streams\[[^\]]*\]'?(?! @)")
    for page in [*PAGES, ROOT / "COST.md"]:
        for line in page.read_text(encoding="utf-8").splitlines():
            assert not by_name.search(line), f"{page.name}: {line.strip()}"


def test_every_option_of_every_subcommand_is_in_cli_md() -> None:
    """The settings flags (`--<setting>`) are documented once, in configuration.md; every other
    option a subcommand takes is named in docs/cli.md."""
    import argparse

    from streams.cli.main import build_parser
    from streams.settings import Settings

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    named = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", text))
    settings = set(Settings.field_names())
    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif (
                action.option_strings
                and action.dest not in settings | {"help", "version"}
                and not named & set(action.option_strings)
            ):
                missing.append(f"{path} {action.option_strings[-1]}")

    walk(build_parser(), "rb-streams")
    assert not missing, missing


HISTORY = re.compile(r"\b(?:issues? #?\d+|sessions? \d+)\b|SPEC\.md|SPEC §", re.I)
LONG = ("QUALITY.md", "BENCHMARKS.md", "RELIABILITY.md")


def test_no_document_points_at_an_issue_a_session_or_a_spec_section() -> None:
    """A reader cannot follow "issue 31" or "session 15": the docs name the thing or link a
    section, and git holds the history."""
    for page in [*PAGES, ROOT / "COST.md"]:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            assert not HISTORY.search(line), f"{page.name}:{n}: {line.strip()[:120]}"


def test_each_long_document_opens_with_its_summary() -> None:
    """QUALITY.md, BENCHMARKS.md and RELIABILITY.md open with a summary of what holds now,
    within the first screen, before the first topic section."""
    for name in LONG:
        lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
        heads = [(i, h) for i, h in enumerate(lines) if h.startswith("## ")]
        assert heads, name
        first_i, first = heads[0]
        assert first_i < 15 and "summary" in first.lower(), f"{name}: the first section is {first!r}"
        nxt = heads[1][0] if len(heads) > 1 else len(lines)
        assert nxt - first_i <= 60, f"{name}: the summary runs {nxt - first_i} lines"


def anchors(path: Path) -> set[str]:
    """The `#anchor`s a page's headings get, as GitHub makes them: lower case, punctuation but
    `-` and `_` dropped, spaces as `-`, a repeated heading numbered."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_every_anchor_a_doc_or_the_code_links_to_exists() -> None:
    """A `page.md#anchor` in a doc's link, or named in a docstring or test, leads to a heading."""
    pages = [*PAGES, ROOT / "COST.md"]
    broken = []
    for page in pages:
        for target in links(page):
            file, _, anchor = target.partition("#")
            dest = (page.parent / file) if file else page
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target}")
    code = [*ROOT.glob("streams/**/*.py"), *ROOT.glob("bench/**/*.py"), *ROOT.glob("tests/**/*.py")]
    for path in code:
        for file, anchor in re.findall(r"((?:docs/)?[A-Za-z_-]+\.md)#([a-z0-9_-]+)", path.read_text("utf-8")):
            dest = ROOT / file if (ROOT / file).exists() else ROOT / "docs" / file
            if dest.exists() and anchor not in anchors(dest):
                broken.append(f"{path.relative_to(ROOT)}: {file}#{anchor}")
    assert not broken, "links to anchors that do not exist:\n" + "\n".join(broken)
