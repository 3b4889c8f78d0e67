"""A tiny installed distribution for plugin tests: its modules and a `.dist-info` directory
with entry_points.txt in one directory, which on sys.path (or PYTHONPATH) importlib.metadata
finds as it finds any installed package. No monkeypatching of the loader."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Mapping
from pathlib import Path

# A plugin module: a constant step scorer, a text scorer, a transition and a profile.
CONSTANT_DIFFICULTY = 0.777
MODULE = f'''
"""A test plugin for rb-streams."""

from streams.core.fsm import FSMState


def constant(features, memory):
    return {CONSTANT_DIFFICULTY!r}, {{"seen": (memory or {{}}).get("seen", 0) + 1}}


def shouting(text):
    return 1.0 if text and text.isupper() else 0.1


def end_at_three(current, history, params):
    return FSMState.END if len(history) >= 3 else FSMState.NORMAL


SRE = {{"semantic_loop": 0.5, "silent_topic_drift": 0.4}}
NOT_A_FUNCTION = 42


def three_args(event, memory, max_chars):
    return 0.5, None
'''


def write_dist(
    root: Path,
    entry_points: Mapping[str, Mapping[str, str]],
    *,
    module: str = MODULE,
    name: str | None = None,
) -> str:
    """A distribution in `root` whose module (returned: a fresh name, so tests do not share an
    import) holds `module`; `entry_points` maps group -> {name: "attr"} of that module (or a
    full `mod:attr` value when it has a colon)."""
    mod = f"rbplug_{uuid.uuid4().hex[:10]}"
    dist = name or mod
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{mod}.py").write_text(textwrap.dedent(module), "utf-8")
    info = root / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", "utf-8")
    lines: list[str] = []
    for group, eps in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{n} = {v if ':' in v else f'{mod}:{v}'}" for n, v in eps.items()]
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines), "utf-8")
    (info / "RECORD").write_text("", "utf-8")
    return mod
