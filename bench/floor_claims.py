"""Whether the no-progress floor's texts are true of the steps they name (issue 48, item 10).

Every run is replayed through the core (`streams.replay.Replayer`, the worker's code path).
Beside it, each agent's results are kept exactly (every unit of every result, message and
written text, as `monitors.progress` reads them; no Bloom filter, no generations), and every
floor text a decision delivers is checked against them:

- "N steps since step F": at least N steps of that agent from step F on;
- "R only repeated output ... had already seen": at least R of them brought back the very
  lines (as a set) of an earlier result of the agent;
- "L showed only lines ... had already seen" (of messages: "stated no fact and showed no
  output that was not known already"): at least R + L of them showed no line the agent had
  not seen before (in an earlier result, message or text it wrote);
- "K showed almost nothing new": at least R + L + K of them showed less than one line in 20
  that was new;
- "E brought back nothing at all": at least E of them brought back no line;
- "C changes made in between" / "none of them changed anything": as many steps that changed
  something from step F on / none;
- "U more, whose result was cut, that did not run or that only said to wait": as many steps
  from step F on that were cut, did not run or answered "pending" or "retry";
- "called T K times in a row ... the very same result each time": the agent's last K calls
  were to T, with the same input and the same lines.

A claim that fails is an untrue count. The measurement is the number of them:

    .venv/bin/python -m bench.floor_claims                 # ../shared/data/real-dev, every file
    .venv/bin/python -m bench.floor_claims --data DIR --show 5
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from streams.core.events import Limits
from streams.core.monitors import progress as P
from streams.core.monitors import waiting
from streams.core.reading.features import StepFeatures, extract
from streams.local.broker import REPO

DEFAULT_DATA = REPO.parent / "shared" / "data" / "real-dev"
STALE = re.compile(
    r"taken (?P<n>\d+) (?:steps|messages) since step (?P<first>\d+) \(.*\) that brought (?:almost )?"
    r"nothing new: (?P<parts>.*?); (?:the (?P<changes>\d+) changes made in between|none of them changed "
    r"anything)(?: \((?P<unknown>\d+) more, whose result)?"
)
SAME = re.compile(
    r"called (?P<tool>`[^`]*`) (?P<k>\d+) times in a row \(.*\) and got back the very same result"
)
REPEATED = re.compile(r"(\d+) only repeated output")
OLD = re.compile(r"(\d+) (?:showed only lines|stated no fact and showed no output)")
FEW = re.compile(r"(\d+) showed almost nothing new")
EMPTY = re.compile(r"(\d+) brought back nothing at all")


@dataclass(frozen=True, slots=True)
class Fact:
    """One reading step of an agent, as its exact memory saw it."""

    step: int
    call: str  # tool and salient input ("" for a message)
    units: frozenset[bytes]
    new: int  # of its units, those the agent had not seen before
    repeat: bool  # its units, as a set, are those of an earlier result of the agent
    change: bool  # it changed something (an edit, a write, a command that changes the workspace)
    unknown: bool  # its result was cut, it did not run, or it only said to wait


@dataclass
class Exact:
    """Per agent: every unit seen and every step's facts (an offline checker: unbounded)."""

    seen: dict[str, set[bytes]] = field(default_factory=dict)
    facts: dict[str, list[Fact]] = field(default_factory=dict)

    def add(self, f: StepFeatures) -> None:
        """What `progress.read` would remember of this step, kept exactly."""
        if f.condenses or (f.action in P.RESPOND_ACTIONS and not f.whole_observation):
            return
        if f.finishes and not f.action:
            return
        if f.action:
            units: list[bytes] | None = P.result_units(f)
        elif f.empty:
            units = []
        else:
            units = P.message_units(f)
        if units is None:
            return
        seen = self.seen.setdefault(f.agent, set())
        got = frozenset(units)
        call = f"{f.action}\x00{P._salient(f.input)}" if f.action else ""
        facts = self.facts.setdefault(f.agent, [])
        repeat = bool(got) and any(x.units == got for x in facts)
        writes = bool(f.action and P.WRITE_VERB.match(f.action))
        change = bool(
            ((f.modifies or writes) and not f.is_error)
            or (f.command and not units and P.STATE_CHANGE.search(f.command))
        )
        unknown = bool(f.action) and (
            f.observation_cut or P._not_run(f) or waiting.kind(f) in ("pending", "transient")
        )
        facts.append(Fact(f.step, call, got, len(got - seen), repeat, change, unknown))
        seen |= got
        if f.modifies:
            seen.update(P.written_units(f))


@dataclass(frozen=True, slots=True)
class Untrue:
    step: int
    claim: str
    text: str


def check(text: str, facts: list[Fact], step: int) -> list[str]:
    """The claims of one floor text (said at `step`) that its agent's steps do not bear out."""
    bad: list[str] = []
    if m := STALE.search(text):
        n, first = int(m["n"]), int(m["first"])
        named = [x for x in facts if first <= x.step <= step]
        if len(named) < n:
            bad.append(f"{n} steps since step {first}: the agent took {len(named)}")
        parts = m["parts"]
        r = sum(int(x) for x in REPEATED.findall(parts))
        o = sum(int(x) for x in OLD.findall(parts))
        k = sum(int(x) for x in FEW.findall(parts))
        e = sum(int(x) for x in EMPTY.findall(parts))
        repeats = sum(1 for x in named if x.units and x.repeat)
        old = sum(1 for x in named if x.units and x.new == 0)
        few = sum(1 for x in named if x.units and x.new < P.GAIN_SHARE * len(x.units))
        empties = sum(1 for x in named if not x.units)
        if r > repeats:
            bad.append(f"{r} only repeated an earlier result: {repeats} did")
        if r + o > old:
            bad.append(f"{r + o} showed only lines already seen: {old} did")
        if r + o + k > few:
            bad.append(f"{r + o + k} showed (almost) nothing new: {few} did")
        if e > empties:
            bad.append(f"{e} brought back nothing: {empties} did")
        changes = sum(1 for x in named if x.change and x.step > first)
        if m["changes"] is None and changes:
            bad.append(f"none changed anything: {changes} did")
        if m["changes"] is not None and int(m["changes"]) > changes:
            bad.append(f"{m['changes']} changes in between: {changes} were made")
        unknown = sum(1 for x in named if x.unknown)
        if m["unknown"] is not None and int(m["unknown"]) > unknown:
            bad.append(f"{m['unknown']} cut, not run or waits: {unknown} were")
    if m := SAME.search(text):
        k = int(m["k"])
        last = [x for x in facts if x.step <= step][-k:]
        same = len(last) == k and all(x.call and x.call == last[0].call for x in last)
        if not same or len({x.units for x in last}) != 1:
            bad.append(f"{k} calls in a row with the very same result: not so")
    return bad


def _runs(lines: Iterable[bytes]) -> Iterator[list[bytes]]:
    run: list[bytes] = []
    for line in lines:
        if not line.strip():
            continue
        if b'"run_start"' in line[:200] and run:
            yield run
            run = []
        run.append(line)
    if run:
        yield run


def floor_texts(lines: Iterable[bytes]) -> tuple[int, list[Untrue], int, list[Untrue]]:
    """Of every run in `lines`: the floor texts decisions delivered and the untrue claims among
    them; then every text the floor wrote (a rule's finding, when one fired, was delivered
    instead) and the untrue claims among those."""
    from streams.embeddings.models import load_models
    from streams.replay import Replayer

    rp = Replayer(clock=lambda: 1_767_225_600.0, sem=load_models().semantics())
    max_chars = Limits().max_thought_chars
    said = wrote = 0
    untrue: list[Untrue] = []
    untrue_all: list[Untrue] = []
    for run in _runs(lines):
        exact = Exact()
        floor = P.ProgressState()
        for line in run:
            decision, _ = rp.feed(line)
            ev = orjson.loads(line)
            if ev.get("type") != "step":
                continue
            f = extract(ev, max_chars)
            exact.add(f)
            floor, found = P.observe(floor, f)
            if found is not None and found.text and (STALE.search(found.text) or SAME.search(found.text)):
                wrote += 1
                for claim in check(found.text, exact.facts.get(f.agent, []), f.step):
                    untrue_all.append(Untrue(f.step, claim, f"{ev.get('run_id')}: {found.text}"))
            if decision is None:
                continue
            for inj in decision["injections"]:
                text = inj.get("text") or ""
                if not (STALE.search(text) or SAME.search(text)):
                    continue
                said += 1
                for claim in check(text, exact.facts.get(f.agent, []), f.step):
                    untrue.append(Untrue(f.step, claim, f"{decision['run_id']}: {text}"))
    return said, untrue, wrote, untrue_all


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Untrue counts in the no-progress floor's texts.")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of *.jsonl runs")
    p.add_argument("--show", type=int, default=3, help="untrue texts shown per file")
    a = p.parse_args(argv)
    files = sorted(a.data.glob("*.jsonl"))
    if not files:
        print(f"floor_claims: {a.data}: no *.jsonl files (use --data)", file=sys.stderr)
        return 2
    totals = [0, 0, 0, 0]
    for path in files:
        said, untrue, wrote, untrue_all = floor_texts(path.read_bytes().splitlines())
        bad = len({(u.text, u.step) for u in untrue})
        bad_all = len({(u.text, u.step) for u in untrue_all})
        totals = [t + x for t, x in zip(totals, (said, bad, wrote, bad_all), strict=True)]
        print(
            f"{path.stem}: delivered {said} floor texts, {bad} with an untrue count; "
            f"the floor wrote {wrote}, {bad_all} with an untrue count"
        )
        for u in untrue_all[: a.show]:
            print(f"    step {u.step}: {u.claim}\n      {u.text[:300]}")
    print(
        f"all: delivered {totals[0]} floor texts, {totals[1]} with an untrue count; "
        f"the floor wrote {totals[2]}, {totals[3]} with an untrue count"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
