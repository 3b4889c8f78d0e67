"""The README is a newcomer's first screen and every documentation link leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+://", t)]


def test_every_relative_link_in_the_readme_and_docs_exists() -> None:
    for page in [
        ROOT / "README.md",
        ROOT / "QUALITY.md",
        ROOT / "BENCHMARKS.md",
        ROOT / "RELIABILITY.md",
        *DOCS,
    ]:
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
