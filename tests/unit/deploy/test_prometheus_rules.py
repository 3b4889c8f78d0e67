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
