"""E-traces through a real worker: retrieval from its Qdrant store, degradation when the
store hangs, and no head-of-line blocking of other runs while a query is out."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streams.agent.client import SteeringClient
from streams.core.render import MARKER
from streams.local.worker_process import WorkerProcess
from tests.factories import b, step
from tests.integration.helpers import make_settings, start_worker
from tests.integration.kafka_io import read_all

pytestmark = pytest.mark.integration


class Blackhole:
    """A TCP server that accepts connections and never answers: a hung Qdrant server."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
                self.conns.append(conn)
            except OSError:
                continue

    def close(self) -> None:
        self._stop = True
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.fixture(scope="module")
def seeded(seeded_worker: WorkerProcess) -> WorkerProcess:
    """The session's seeded worker (shared with test_langchain): the tests use their own run
    ids and count metrics as differences."""
    return seeded_worker


def metric(w: WorkerProcess, name: str, **labels: str) -> float:
    """Sum of the worker's samples of `name` whose labels include `labels`."""
    body = (
        urllib.request.urlopen(f"http://127.0.0.1:{w.settings.web_port}/metrics", timeout=5).read().decode()
    )
    total = 0.0
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def metric_reaches(
    w: WorkerProcess, name: str, at_least: float, timeout_s: float = 5.0, **labels: str
) -> float:
    """The metric once it is at least `at_least`, or its value at the timeout (/metrics is
    rendered at most once a second, so a read just after another may be a second old)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = metric(w, name, **labels)
        if value >= at_least or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_first_call_gets_universal_rules_rendered_for_the_model(seeded: WorkerProcess) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        async with SteeringClient(seeded.settings, deadline_ms=15000) as c:
            a = await c.start_run("claude-run", model="anthropic:claude-sonnet-4-5", org_id="acme")
            o = await c.start_run("gpt-run", model="openai:gpt-4.1", org_id="acme")
            off = await c.start_run("no-etraces", model="gpt-4.1", e_traces_enabled=False)
            return a, o, off

    a, o, off = asyncio.run(scenario())
    assert a is not None and o is not None and off is not None
    for d, opener in ((a, "<rule"), (o, "- ")):
        e3 = [i for i in d.data["injections"] if i["source"] == "e3"]
        assert e3 and all(i["text"].startswith(opener) and i["similarity"] is None for i in e3)
        assert d.data["injection_text"].startswith(MARKER + "\n")
        assert d.data["injection_text"].count("\n\n") == len(e3) - 1
    assert off.data["injections"] == [] and off.data["injection_text"] is None


def test_a_typical_first_step_gets_shared_e2_guidance_on_the_next_decision(seeded: WorkerProcess) -> None:
    from streams.local.simulate import trajectory

    task, steps = trajectory("healthy", 3, seed=1)
    first, second = next(steps), next(steps)
    hits = metric(seeded, "rb_etrace_lookups_total", tier="e2", result="hit")
    waits = metric(seeded, "rb_etrace_wait_seconds_count")

    async def scenario() -> tuple[Any, Any]:
        async with SteeringClient(seeded.settings, deadline_ms=15000) as c:
            await c.start_run("e2-run", task=task, model="gpt-4.1")
            d1 = await c.step("e2-run", 1, **first)
            await asyncio.sleep(0.5)  # the agent's model call: the query runs meanwhile
            return d1, await c.step("e2-run", 2, **second)

    d1, d = asyncio.run(scenario())
    assert d1 is not None and d is not None
    assert d1.data["skipped_reason"] == "e-traces E2 retrieving: its guidance comes with the next decision"
    e2 = [i for i in d.data["injections"] if i["source"] == "e2"]
    assert e2 and all(i["similarity"] >= 0.7 and i["pattern_id"] for i in e2)
    assert metric_reaches(seeded, "rb_etrace_lookups_total", hits + 1, tier="e2", result="hit") >= hits + 1
    assert metric_reaches(seeded, "rb_etrace_wait_seconds_count", waits + 1) >= waits + 1


def test_e1_opens_with_a_monitor_fire_and_stays_inside_the_org(seeded: WorkerProcess) -> None:
    """Three orgs run the same reworded-search loop, ten runs each, all at once; acme and
    globex hold near-identical E1 patterns with different guidance, initech none."""
    queries = ["session timeout", "session expiry", "session token expiration", "session timeout", ""]
    orgs = ("acme", "globex", "initech")

    async def one(c: SteeringClient, org: str, j: int) -> tuple[str, list[Any]]:
        rid = f"e1-{org}-{j}"
        await c.start_run(rid, org_id=org, model="claude-sonnet-4-5", task="Fix the session expiry bug")
        ds = []
        for k, q in enumerate(queries, 1):
            if not q:  # after the loop: the step whose decision brings what the fire asked for
                d = await c.step(rid, k, thought="Read the session module.", difficulty=0.5)
                ds.append(d)
                continue
            d = await c.step(
                rid,
                k,
                thought=f"Search the code for the {q} once more.",
                action="search_code",
                action_input={"query": q},
                observation="No results found.",
                difficulty=0.5,  # NORMAL: E1 is never queried in FAST
            )
            ds.append(d)
        return org, ds

    async def scenario() -> list[tuple[str, list[Any]]]:
        async with SteeringClient(seeded.settings, deadline_ms=15000) as c:
            return list(await asyncio.gather(*(one(c, org, j) for j in range(10) for org in orgs)))

    out = asyncio.run(scenario())
    assert len(out) == 30
    for org, ds in out:
        e1 = [(d.step, i) for d in ds for i in d.data["injections"] if i["source"] == "e1"]
        fired_at = next(d.step for d in ds if d.data["monitors"]["fired"])
        if org == "initech":
            assert e1 == []
            continue
        assert len(e1) == 1, e1
        step_no, inj = e1[0]
        assert step_no == fired_at + 1  # the gate opened with the fire; answered on the next decision
        assert inj["pattern_id"] == f"e1-{org}-session-expiry" and inj["similarity"] >= 0.8
        assert inj["text"].startswith('<guidance source="e1"')  # rendered for an Anthropic model


def test_a_hung_store_costs_other_runs_nothing_and_decisions_say_why(broker: str, tmp_path: Path) -> None:
    hole = Blackhole()
    s = make_settings(
        broker,
        tmp_path,
        partitions=1,  # every run on one partition: head-of-line blocking would show
        qdrant_url=f"http://127.0.0.1:{hole.port}",
        etrace_timeout_ms=400,
        client_deadline_ms=5000,
    )
    w = start_worker(s, tmp_path)
    try:

        async def scenario() -> tuple[list[str], list[Any]]:
            done: list[str] = []
            async with SteeringClient(s, deadline_ms=5000) as c:

                async def run(rid: str, delay: float, **kw: Any) -> Any:
                    await asyncio.sleep(delay)
                    d = await c.start_run(rid, **kw)
                    done.append(rid)
                    return d

                got = await asyncio.gather(
                    run("wants-e3", 0.0), run("no-etraces", 0.05, e_traces_enabled=False)
                )
                # a burst of steps of one run, sent back to back: E2 is planned on steps 1 and
                # 3 and waited for (at most the deadline) on steps 2 and 4
                for k in range(1, 5):
                    await c.send_raw(
                        # each read brings something new: no monitor fires (E1 stays out of it)
                        b(
                            step(
                                "wants-e3",
                                k,
                                thought=f"Step {k}: reading the session code.",
                                observation=f"part {k}",
                            )
                        ),
                        key=b"wants-e3",
                    )
                return done, list(got)

        done, (slow, quick) = asyncio.run(scenario())
        assert done == ["no-etraces", "wants-e3"]  # the quick run was not stuck behind the query
        assert quick.data["skipped_reason"] is None
        assert slow.data["skipped_reason"] == "e-traces unavailable for E3: timeout after 400 ms"
        decided = [
            d
            for d in asyncio.run(read_all(s.bootstrap_servers, s.steering_topic, expect=6))
            if d["run_id"] == "wants-e3"
        ]
        assert [d["step"] for d in decided] == [0, 1, 2, 3, 4]  # once each, in order
        reasons = [d["skipped_reason"] for d in decided]
        assert "E2 retrieving" in reasons[1] and "E2 retrieving" in reasons[3], reasons
        assert all("e-traces unavailable for E2" in r for r in (reasons[2], reasons[4])), reasons
        assert metric(w, "rb_etrace_store_up") == 0
        assert metric(w, "rb_etrace_store_failures_total", kind="timeout") >= 1
    finally:
        w.stop()
        hole.close()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)
