"""late_sprawl: deep into a run, new tools, files and topics keep appearing instead of converging.

Healthy runs explore early and narrow down; a run that is lost keeps opening new fronts. Per
step we count what is new (a tool never used, a file never touched, a thought unlike any topic
so far, judged by the static embedder against a few topic anchors), and compare the novelty
rate of the last 10 steps with the 10 before and with the early phase. A step that checks or
tests the work, or names a file the run changed, is on the front already open: it adds no
novelty (the tests of the fix are not a new front). Routing and planning messages add no
topics. Everything is bounded: recently seen tools/files (LRU), 12 topic anchors, 20 counts,
16 edited stems.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from ...shared.untrusted import cut
from ..quoting import quoted
from ..reading.features import StepFeatures, short_hash, topic_text
from .base import Context, Finding, Monitor, clip01
from .semantics import Semantics

EARLY = 10
RECENT = 10
MAX_SEEN = 128
MAX_ANCHORS = 12
FIXED_ANCHORS = 4  # the run's first topics are never evicted: they are what "converging" means
NEW_TOPIC_BELOW = 0.5  # fast-model cosine to every anchor below this: a new topic
MIN_THOUGHT = 40
MAX_EDITED = 16
# A test file or folder, or a command that runs tests: `tests/x.py`, `test_store.py`,
# `StoreTest.java`, `store.spec.ts`, `pytest`, `runtests.py`.
TEST_WORD = re.compile(
    r"(?:^|[/_.\s-])(?:tests?|spec)(?:[/_.\s-]|$)|[a-z](?-i:Tests?|Spec)\b|pytest|runtests|unittest",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SprawlState:
    steps: int = 0
    tools: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # hashed paths, most recent last
    anchors: list[str] = field(default_factory=list)
    early_novelty: int = 0
    counts: list[int] = field(default_factory=list)  # novelty per step, last 2 * RECENT steps
    recent_new: list[str] = field(default_factory=list)  # names of recent novelties, for the text
    edited: list[str] = field(default_factory=list)  # stems of the files the run changed


@functools.lru_cache(maxsize=4096)
def stem_of(path: str) -> str:
    """A file's name without folder, extension and test affixes: `tests/test_store.py`,
    `src/store.py` and `StoreTest.java` share the stem `store`. Kept for the paths seen last
    (a run names the same few files step after step, and drift asks too)."""
    name = path.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0].lower()
    for affix in ("test_", "_test", "tests_", "_tests", "test", "tests", "spec_", "_spec"):
        if len(name) > len(affix) + 2:
            name = (
                name.removeprefix(affix)
                if affix.endswith("_") or (affix in ("test", "tests") and name.startswith(affix))
                else name.removesuffix(affix)
            )
    return name


def touches_tests(f: StepFeatures) -> bool:
    """The step runs a check or reads or runs tests: the work of verifying the task."""
    return f.verifies or any(_names_tests(p) for p in f.paths) or _names_tests(f.command[:200])


def _names_tests(text: str) -> bool:
    """`TEST_WORD` matches in the text. Every match holds "test" or "spec" in any case: an ASCII
    text without either (most paths and commands) is not scanned."""
    if text.isascii():
        low = text.lower()
        if "test" not in low and "spec" not in low:
            return False
    return TEST_WORD.search(text) is not None


def edited_stems(f: StepFeatures) -> list[str]:
    """The stems of the files this step changed."""
    return [s for p in (f.changed or f.paths if f.modifies else ()) if (s := stem_of(p))]


def names_edited(f: StepFeatures, edited: list[str]) -> bool:
    """The step names a file the run already changed (or its tests: `test_writer.py` and
    `writer.py` share a stem), in its paths or in its thought."""
    if not edited:
        return False
    if any(stem_of(p) in edited for p in f.paths):
        return True
    text = f"{f.thought[:1000]} {f.command[:200]}".lower()
    return any(f"{s}." in text or f"{s}`" in text for s in edited)


def same_front(f: StepFeatures, edited: list[str]) -> bool:
    """A step on the front the run already works on: it checks or tests the work, or names what
    the run changed. It opens nothing new, whatever files or words it brings."""
    return touches_tests(f) or names_edited(f, edited)


@functools.lru_cache(maxsize=4096)
def _file_keys(path: str) -> tuple[str, str]:
    """What `files` keeps of a path and of its stem: hashes (paths can be long). Kept for the
    paths seen last, as `stem_of`."""
    return short_hash(path)[:10], "s:" + short_hash(stem_of(path))[:10]


def _touch(seen: list[str], item: str) -> tuple[list[str], bool]:
    if item in seen:
        seen = [x for x in seen if x != item]
        return [*seen, item], False
    return [*seen, item][-MAX_SEEN:], True


def evaluate(st: SprawlState, f: StepFeatures, ctx: Context, sem: Semantics) -> tuple[SprawlState, Finding]:
    """Its finding's `facts["new_files"]`: how many files this step touched for the first time
    (progress, for cyclic_compression)."""
    task = ctx.task
    novelties: list[str] = []
    front = same_front(f, st.edited)
    edited = st.edited
    if f.modifies:
        mine = edited_stems(f)
        edited = list(dict.fromkeys([*(x for x in st.edited if x not in mine), *mine]))
        edited = edited[-MAX_EDITED:]
    tools = st.tools
    if f.action and f.action not in ("finish", "submit"):
        tools, new_tool = _touch(tools, f.action)
        if new_tool and st.steps > 0 and not front:
            novelties.append(f"tool {quoted(f.action_label, 40, 'tool name')}")
    files = st.files
    new_files = 0
    for p in f.paths:
        path_key, stem_key = _file_keys(p)
        files, is_new = _touch(files, path_key)
        stem = stem_of(p)
        files, new_stem = _touch(files, stem_key)
        if is_new:
            new_files += 1
            # The tests of a module already opened (`test_store.py` after `store.py`) or a file
            # the task names are the same front, not a new one.
            related = front or not new_stem or bool(task and stem and stem in task.lower())
            if not related and st.steps > 0 and len([x for x in novelties if x.startswith("file")]) < 2:
                novelties.append(f"file {quoted(p.rstrip('/').rsplit('/', 1)[-1], 60, 'file name')}")
    anchors = st.anchors
    if len(f.thought.strip()) >= MIN_THOUGHT and not f.coordination:
        topic = topic_text(f)
        if not anchors:
            anchors = [topic]
        elif not front and max(sem.fast_sims(topic, anchors)) < NEW_TOPIC_BELOW:
            novelties.append(f"topic {quoted(topic, 40, 'topic')}")
            anchors = [*anchors, topic]
            if len(anchors) > MAX_ANCHORS:
                anchors = anchors[:FIXED_ANCHORS] + anchors[FIXED_ANCHORS + 1 :]
    n = len(novelties)
    steps = st.steps + 1
    counts = [*st.counts, n][-2 * RECENT :]
    new = SprawlState(
        steps=steps,
        tools=tools,
        files=files,
        anchors=anchors,
        early_novelty=st.early_novelty + (n if steps <= EARLY else 0),
        counts=counts,
        recent_new=[*st.recent_new, *novelties][-6:] if n else st.recent_new,
        edited=edited,
    )
    facts = {"new_files": new_files}
    if steps <= 2 * EARLY or len(counts) < 2 * RECENT:
        return new, Finding(0.0, facts=facts)
    recent = sum(counts[-RECENT:]) / RECENT
    before = sum(counts[:RECENT]) / RECENT
    early = st.early_novelty / EARLY
    level = clip01((recent - 0.4) / 0.5)
    rising = 1.0 if recent > before else 0.7
    not_converging = 1.0 if recent >= 0.6 * early else 0.6
    score = round(level * rising * not_converging, 4)
    if score < 0.6:
        return new, Finding(score, facts=facts)
    where = f" Refocus on the task you were given ({quoted(task, 120, 'task')})." if task else ""
    return (
        new,
        Finding(
            score,
            f"At step {f.step} you are still opening new fronts: {sum(counts[-RECENT:])} new tools, "
            f"files or topics in the last {RECENT} steps ({cut(', '.join(st.recent_new[-3:] + novelties), 200)}), "
            f"more than earlier in the run.{where} Finish the current line of work before starting "
            "new ones.",
            facts,
        ),
    )


MONITOR = Monitor("late_sprawl", "sprawl", "sprawl", SprawlState, evaluate)
