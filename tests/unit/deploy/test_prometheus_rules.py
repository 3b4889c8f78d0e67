"""deploy/prometheus: config, rules and rule unit tests pass promtool.

promtool must be installed (scripts/install_prometheus.sh; CI installs it): these tests fail,
not skip, without it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ._support import PROMETHEUS_DIR, load_rules, load_yaml, promtool

TOKEN_FILE = "/run/secrets/rb_web_token"  # docker-compose.yml mounts the secret rb_web_token there

REQUIRED_ALERTS = (
    "RbWorkerDown",
    "RbConsumerLagGrowing",
    "RbDeadLetterRateHigh",
    "RbDecisionLatencyP99High",
    "RbManyRunsInSkip",
    "RbWorkerStalled",
    "RbInternalErrors",
)


def test_config_is_valid(tmp_path: Path) -> None:
    # The scrape job reads the workers' token from a file that exists only in the Prometheus
    # container (a compose secret): promtool checks it exists, so check a copy pointing at one.
    text = (PROMETHEUS_DIR / "prometheus.yml").read_text()
    assert text.count(TOKEN_FILE) == 1
    copy = tmp_path / "prometheus"
    shutil.copytree(PROMETHEUS_DIR, copy)
    token = tmp_path / "rb_web_token"
    token.write_text("t0ken\n")
    (copy / "prometheus.yml").write_text(text.replace(TOKEN_FILE, str(token)))
    proc = promtool("check", "config", str(copy / "prometheus.yml"))
    assert "SUCCESS" in proc.stdout


def test_the_scrape_job_sends_the_workers_web_token() -> None:
    config = load_yaml(PROMETHEUS_DIR / "prometheus.yml")
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "rb-streams"]
    assert job["authorization"] == {"credentials_file": TOKEN_FILE}


def test_rules_are_valid_and_all_read() -> None:
    proc = promtool("check", "rules", "deploy/prometheus/alerts.yml")
    found = re.search(r"SUCCESS: (\d+) rules found", proc.stdout)
    assert found, proc.stdout
    # The YAML reader of the other tests sees every rule promtool sees.
    assert int(found.group(1)) == len(load_rules())


def test_rule_unit_tests_pass() -> None:
    proc = promtool("test", "rules", "deploy/prometheus/alerts.test.yml")
    assert "SUCCESS" in proc.stdout


def test_config_scrapes_the_workers_and_loads_the_rules() -> None:
    config = load_yaml(PROMETHEUS_DIR / "prometheus.yml")
    assert config["global"]["scrape_interval"] == "15s"
    assert config["rule_files"] == ["alerts.yml"]
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "rb-streams"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    targets = [t for sc in job["static_configs"] for t in sc["targets"]]
    assert {"worker-1:6066", "worker-2:6066"} <= set(targets)  # the compose workers


def test_each_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    doc = load_yaml(PROMETHEUS_DIR / "alerts.test.yml")
    assert doc["rule_files"] == ["alerts.yml"]
    firing: set[str] = set()
    quiet: set[str] = set()
    for test in doc["tests"]:
        for case in test.get("alert_rule_test") or []:
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    alerts = {r["alert"] for r in load_rules() if "alert" in r}
    assert set(REQUIRED_ALERTS) <= alerts
    assert alerts - firing == set(), "alerts never tested firing"
    assert alerts - quiet == set(), "alerts never tested not firing"


def test_a_firing_alert_links_its_runbook_under_the_base_url_the_deployment_sets(tmp_path: Path) -> None:
    """The real Prometheus, started as docker-compose.yml starts it (its feature flags,
    prometheus.yml's global section, RUNBOOK_BASE_URL in the environment), renders an alert's
    runbook_url absolute. RbWorkersAbsent fires with no worker; its `for` is cut to 0s here."""
    import json
    import os
    import subprocess
    import time
    import urllib.request

    import yaml

    from streams.local.worker_process import free_port

    from ._support import ROOT

    exe = shutil.which("prometheus")
    assert exe, "prometheus is not installed: run scripts/install_prometheus.sh"
    compose = load_yaml(ROOT / "docker-compose.yml")["services"]["prometheus"]
    flags = [f for f in compose["command"] if f.startswith("--enable-feature=")]
    assert "RUNBOOK_BASE_URL" in compose["environment"]
    rules = load_yaml(PROMETHEUS_DIR / "alerts.yml")
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "RbWorkersAbsent":
                rule["for"] = "0s"
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules))
    config = load_yaml(PROMETHEUS_DIR / "prometheus.yml")
    config["global"]["evaluation_interval"] = "1s"
    (tmp_path / "prometheus.yml").write_text(
        yaml.safe_dump({"global": config["global"], "rule_files": ["alerts.yml"]})
    )
    port = free_port()
    base = "https://git.example.com/org/rb-streams/blob/main"
    with open(tmp_path / "prometheus.log", "wb") as log:
        prom = subprocess.Popen(
            [
                exe,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                *flags,
            ],
            env={**os.environ, "RUNBOOK_BASE_URL": base},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 30
        found: list[dict[str, object]] = []
        while not found and time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/alerts", timeout=2) as r:
                    alerts = json.loads(r.read())["data"]["alerts"]
            except OSError:
                continue
            found = [a for a in alerts if a["labels"]["alertname"] == "RbWorkersAbsent"]
        assert found, (tmp_path / "prometheus.log").read_text()[-2000:]
        assert found[0]["annotations"]["runbook_url"] == f"{base}/docs/runbook.md#rbworkersabsent"
    finally:
        prom.terminate()
        prom.wait(10)
