"""Steering in a real tracing backend, end to end, and the docs' screenshots of it.

    bash scripts/trace_screenshots.sh [--port 9092] [--out docs/img]

Starts (or uses) the local broker and a worker, starts an Arize Phoenix server (its own
environment, .local/phoenix-venv: the wrapper script installs it), runs one steered agent
session whose trace goes to Phoenix over OTLP/HTTP (scripts/trace_session.py: the client's
tracing writes the decisions on the agent's spans), checks through Phoenix's GraphQL API that
the trace holds the steering (the evaluation events, the gate's refusal, the `rb.` attributes),
and takes two screenshots with headless Chromium: the run's page as the worker serves it
(`/runs/{id}/view`) and the trace in Phoenix with the steered call's events. Stops all it
started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from examples._local import local_stack  # noqa: E402
from streams.local.worker_process import free_port  # noqa: E402
from tests.browser import Chromium  # noqa: E402

PHOENIX_VENV = REPO / ".local" / "phoenix-venv"
EVALUATION = "gen_ai.evaluation.result"
REFUSAL = "rb.gate.refused"


def get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()  # type: ignore[no-any-return]


def graphql(port: int, query: str, **variables: Any) -> Any:
    body = json.dumps({"query": query, "variables": variables}).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = json.loads(r.read())
    if answer.get("errors"):
        raise RuntimeError(f"phoenix graphql: {answer['errors']}")
    return answer["data"]


def wait_until(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception:  # not up yet
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not there after {timeout:.0f}s")
        time.sleep(0.5)


class Phoenix:
    """A Phoenix server on loopback ports, data in a temp dir, no telemetry."""

    def __init__(self) -> None:
        self.port, self.grpc = free_port(), free_port()
        self.dir = tempfile.mkdtemp(prefix="rb-phoenix-")
        env = {
            **os.environ,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc),
            "PHOENIX_WORKING_DIR": self.dir,
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        self.log = open(Path(self.dir) / "phoenix.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [str(PHOENIX_VENV / "bin" / "phoenix"), "serve"],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        t0 = time.monotonic()
        wait_until("phoenix", lambda: self.proc.poll() is None and get(f"{self.url}/healthz"), 180)
        print(f"phoenix up on {self.url} in {time.monotonic() - t0:.1f}s", flush=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


SPANS = """query ($id: ID!, $trace: ID!) { node(id: $id) { ... on Project {
  trace(traceId: $trace) { spans(first: 100) { edges { node {
    id name startTime attributes events { name }
  } } } } } } }"""


def steering_spans(phx: Phoenix, trace_id: str) -> tuple[str, list[dict[str, Any]]]:
    """The project's id and the trace's spans as Phoenix stored them."""
    projects = graphql(phx.port, "{ projects { edges { node { id name } } } }")["projects"]["edges"]
    (pid,) = [p["node"]["id"] for p in projects if p["node"]["name"] == "rb-streams"]

    def spans() -> list[dict[str, Any]]:
        t = graphql(phx.port, SPANS, id=pid, trace=trace_id)["node"]["trace"]
        return [e["node"] for e in t["spans"]["edges"]] if t else []

    return pid, wait_until("the trace in phoenix", spans, 30)


async def screenshots(out: Path, page_url: str, trace_url: str) -> None:
    async with Chromium() as browser:
        page = await browser.page()
        await page.load(page_url)
        assert not page.errors, page.errors
        await page.screenshot(out / "run-page.png", width=1200, height=1500)

        # Phoenix's UI (a React app): the trace, the steered call selected, its events open
        ui = await browser.page()
        await ui.send(
            "Emulation.setDeviceMetricsOverride", width=1400, height=900, deviceScaleFactor=1, mobile=False
        )
        await ui.load(trace_url)
        tabs = "[...document.querySelectorAll('[role=tab]')]"
        await ui.wait_for(f"{tabs}.some(e => /^Events/.test(e.textContent))")
        await ui.evaluate(f"{tabs}.find(e => /^Events/.test(e.textContent)).click(), true")
        await ui.wait_for(
            f"[...document.querySelectorAll('button')].some(e => e.textContent.includes({EVALUATION!r}))"
        )
        await ui.evaluate(
            f"[...document.querySelectorAll('button[aria-expanded=false]')]"
            f".find(e => e.textContent.includes({EVALUATION!r})).click(), true"
        )
        await ui.wait_for("document.body.innerText.includes('gen_ai.evaluation.explanation')")
        # the event's attributes as JSON: the explanation (the steering text) whole, not cut
        await ui.evaluate(
            "[...document.querySelectorAll('button,[role=radio]')].find(e => e.textContent === 'JSON').click(), true"
        )
        await ui.wait_for("document.body.innerText.includes('\"gen_ai.evaluation.explanation\"')")
        await asyncio.sleep(1.0)  # the panel's animation
        await ui.screenshot(out / "trace-steering.png", width=1400, height=900, full_page=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--port", type=int, default=9092, help="the local broker's port (started if none listens)"
    )
    ap.add_argument("--out", default=str(REPO / "docs" / "img"), help="where the screenshots go")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    os.environ.pop("RB_EXAMPLE_WORKER_PREFIX", None)  # a worker of its own: its web port is known
    with local_stack(args.port) as settings:
        web_port = getattr(settings, "web_port", None)  # the worker's settings
        phx = Phoenix()
        try:
            env = {
                **os.environ,
                "RB_BROKER": settings.broker,
                "RB_TOPIC_PREFIX": settings.topic_prefix,
                "RB_DECISION_KEY": settings.secret(settings.decision_key),
                "PYTHONPATH": str(REPO),
            }
            t0 = time.monotonic()
            ran = subprocess.run(
                [str(PHOENIX_VENV / "bin" / "python"), str(REPO / "scripts" / "trace_session.py"),
                 "--otlp", f"{phx.url}/v1/traces"],
                env=env, check=True, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            ids = json.loads(ran.stdout.strip().splitlines()[-1])
            print(
                f"session {ids['run_id']} (trace {ids['trace_id']}) in {time.monotonic() - t0:.1f}s",
                flush=True,
            )

            pid, spans = steering_spans(phx, ids["trace_id"])
            spans.sort(key=lambda s: s["startTime"])
            evaluated = [s for s in spans if any(e["name"] == EVALUATION for e in s["events"])]
            refused = [s for s in spans if any(e["name"] == REFUSAL for e in s["events"])]
            steered = [s for s in spans if '"rb": {' in (s["attributes"] or "")]
            print(f"phoenix holds {len(spans)} spans: {len(steered)} with rb. attributes, "
                  f"{len(evaluated)} with evaluation events, {len(refused)} with a gate refusal")  # fmt: skip
            if not (evaluated and refused and steered):
                raise SystemExit("the trace in phoenix lacks the steering")

            web = f"http://127.0.0.1:{web_port}"
            wait_until("the run's page", lambda: get(f"{web}/runs/{ids['run_id']}"), 30)
            trace_url = (
                f"{phx.url}/projects/{pid}/traces/{ids['trace_id']}?selectedSpanNodeId={evaluated[0]['id']}"
            )
            asyncio.run(screenshots(out, f"{web}/runs/{ids['run_id']}/view", trace_url))
        finally:
            phx.stop()
    for name in ("run-page.png", "trace-steering.png"):
        print(f"{out / name}: {(out / name).stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
