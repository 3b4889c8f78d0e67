"""HTTP run queries, health/readiness, and a real Prometheus scraping a worker."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streams.agent.client import SteeringClient
from streams.local.worker_process import WorkerProcess, free_port
from tests.integration.helpers import make_settings, start_worker

pytestmark = pytest.mark.integration


def get(url: str, token: str | None = None, method: str = "GET") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
            return r.status, json.loads(body) if r.headers.get_content_type() == "application/json" else body
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            return e.code, json.loads(body)
        except ValueError:
            return e.code, body


def base(w) -> str:
    return f"http://127.0.0.1:{w.settings.web_port}"


async def drive(settings, run_ids: list[str], steps: int, thought: str = "ls", **start_kw: Any) -> None:
    async with SteeringClient(settings, deadline_ms=15_000) as c:

        async def one(rid: str) -> None:
            assert await c.start_run(rid, **start_kw) is not None
            for k in range(1, steps + 1):
                assert await c.step(rid, k, thought=thought, tokens=100, difficulty=0.05) is not None

        await asyncio.gather(*(one(r) for r in run_ids))


@pytest.fixture(scope="module")
def worker(broker: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """This module's own worker (not the session's): the Prometheus test counts every FAST run
    the worker holds."""
    tmp = tmp_path_factory.mktemp("observability")
    w = start_worker(make_settings(broker, tmp), tmp)
    yield w
    w.stop()
    assert "Traceback" not in w.log_path.read_text(errors="replace"), w.tail(120)


def test_run_endpoints_show_state_budget_and_step_log(worker):
    asyncio.run(drive(worker.settings, ["obs-1"], 8, token_budget=1000, model_routing={"FAST": "small"}))
    status, run = get(f"{base(worker)}/runs/obs-1")
    assert status == 200
    assert run["run_id"] == "obs-1" and run["state"] == "FAST" and run["step"] == 8
    assert run["tokens_used"] == 800 and run["token_budget"] == 1000 and run["budget_used"] == 0.8
    # "ls" said 8 times with no tool call is a loop: steered at step 3, then the FAST cooldown (5)
    assert run["monitor_injections"] == 2 and run["injections_by_source"] == {"monitor": 2}
    status, steps = get(f"{base(worker)}/runs/obs-1/steps")
    assert status == 200
    assert [e["step"] for e in steps["steps"]] == list(range(9))
    # issue 39: FAST names the cheap model only when the switch pays under caching
    assert steps["steps"][-1]["fsm_state"] == "FAST" and steps["steps"][-1]["model"] in ("small", None)

    status, body = get(f"{base(worker)}/runs/no-such-run")
    assert status == 404 and body == {"error": "unknown run", "run_id": "no-such-run"}
    assert get(f"{base(worker)}/health") == (200, {"status": "ok"})
    assert get(f"{base(worker)}/ready") == (200, {"ready": True})


def test_run_queries_are_routed_to_the_worker_that_owns_the_partition_with_the_token(broker, tmp_path: Path):
    token = "s3cret-token"
    s1 = make_settings(broker, tmp_path / "a", partitions=6, web_token=token)
    s2 = s1.with_(web_port=free_port(), data_dir=str(tmp_path / "b" / "worker"))
    w1, w2 = WorkerProcess.start_all([(s1, tmp_path / "w1.log"), (s2, tmp_path / "w2.log")])
    try:
        # wait for the rebalance to settle: both workers ready (/ready needs no token)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(get(f"{base(w)}/ready")[0] == 200 for w in (w1, w2)):
            time.sleep(0.5)
        rids = [f"route-{i}" for i in range(12)]
        asyncio.run(drive(s1, rids, 3, thought="SECRET-STEP-TEXT"))
        for rid in rids:
            a, b = get(f"{base(w1)}/runs/{rid}", token), get(f"{base(w2)}/runs/{rid}", token)
            assert a[0] == 200 and a == b, (rid, a, b)
            assert a[1]["step"] == 3
        # Without the token (or with another) the data endpoints say 401; probes stay open.
        for w in (w1, w2):
            for path in ("/runs/route-0", "/runs/route-0/steps", "/metrics"):
                assert get(base(w) + path)[0] == 401
                assert get(base(w) + path, "wrong")[0] == 401
            assert get(f"{base(w)}/metrics", token)[0] == 200
            assert get(f"{base(w)}/health")[0] == 200
            # read-only: no method but GET; Faust's raw table and router pages are off
            assert get(f"{base(w)}/runs/route-0", token, method="POST")[0] == 405
            assert get(f"{base(w)}/runs/route-0", token, method="DELETE")[0] == 405
            for path in ("/table/", "/table/runs/route-0", "/router/"):
                assert get(base(w) + path, token)[0] == 404
            # step text is not logged at INFO
            assert "SECRET-STEP-TEXT" not in w.log_path.read_text(errors="replace")
    finally:
        w2.stop()
        w1.stop()


def _prom_query(port: int, q: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    status, body = get(url)
    assert status == 200 and body["status"] == "success", body
    return body["data"]["result"]


def test_real_prometheus_scrapes_rates_and_latency_quantiles(worker, tmp_path: Path):
    exe = shutil.which("prometheus")
    assert exe, "prometheus is not installed: run scripts/install_prometheus.sh"
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: rb-streams\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{worker.settings.web_port}']\n"
    )
    prom = subprocess.Popen(
        [
            exe,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "prometheus.log", "wb"),  # noqa: SIM115
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # first scrape done before the traffic starts
            try:
                if _prom_query(port, 'up{job="rb-streams"} == 1'):
                    break
            except (urllib.error.URLError, ConnectionError, AssertionError):
                pass
            time.sleep(0.5)
        rids = [f"prom-{i}" for i in range(10)]
        asyncio.run(drive(worker.settings, rids, 20))
        deadline = time.monotonic() + 60
        rate = quant = up = None
        while time.monotonic() < deadline:
            try:
                up = _prom_query(port, 'up{job="rb-streams"}')
                rate = _prom_query(port, 'sum(rate(rb_steps_processed_total{type="step"}[30s]))')
                quant = _prom_query(
                    port,
                    "histogram_quantile(0.99, sum by (le) (rate(rb_decision_processing_seconds_bucket[30s])))",
                )
            except (urllib.error.URLError, ConnectionError, AssertionError):
                time.sleep(1)
                continue
            if rate and float(rate[0]["value"][1]) > 0 and quant and quant[0]["value"][1] not in ("NaN",):
                break
            time.sleep(1)
        assert up and up[0]["value"][1] == "1"
        raw = _prom_query(port, 'rb_steps_processed_total{type="step"}[2m]')
        assert rate and float(rate[0]["value"][1]) > 0, (rate, raw)
        q = float(quant[0]["value"][1])
        assert 0 < q < 1.0, quant
        deadline = time.monotonic() + 20  # gauges refresh every second, scrapes every second
        while time.monotonic() < deadline:
            runs = _prom_query(port, 'sum(rb_runs{state="FAST"})')
            if float(runs[0]["value"][1]) >= 10:
                break
            time.sleep(0.5)
        assert float(runs[0]["value"][1]) >= 10, runs
        # no run ids leak into label values
        series = get(
            f"http://127.0.0.1:{port}/api/v1/series?match[]=" + urllib.parse.quote('{job="rb-streams"}')
        )[1]["data"]
        assert not any("prom-" in v for s in series for v in s.values())
    finally:
        prom.terminate()
        prom.wait(30)
