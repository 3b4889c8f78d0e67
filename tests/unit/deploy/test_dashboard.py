"""deploy/grafana and deploy/prometheus/alerts.yml only use metrics the worker really exports."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._support import (
    GRAFANA_DIR,
    exported_metric_names,
    load_rules,
    load_yaml,
    promtool,
    series_names,
)

DASHBOARD = GRAFANA_DIR / "dashboards" / "rb-streams.json"

# Grafana's built-in variables and the dashboard's own, with values for checking the syntax.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "1h",
    "$instance": ".*",
    "$job": ".*",
}

REQUIRED_ALERTS = {
    # alert -> its `for`
    "RbWorkerDown": "1m",
    "RbConsumerLagGrowing": "10m",
    "RbDeadLetterRateHigh": "5m",
    "RbDecisionLatencyP99High": "5m",
    "RbManyRunsInSkip": "15m",
    "RbWorkerStalled": "1m",
    "RbRunsStoppedShareHigh": "15m",
    "RbGuardSteeringOff": "1m",
}

# What each required panel must read (a metric of each group appears in the panel's queries).
REQUIRED_PANELS = {
    "Throughput": {"rb_steps_processed_total", "rb_decisions_emitted_total"},
    "Decision latency (worker time)": {"rb_decision_processing_seconds_bucket"},
    "End-to-end lag (event to decision)": {"rb_event_to_decision_seconds_bucket"},
    "Consumer lag per partition": {"rb_consumer_lag_messages"},
    "Runs by FSM state": {"rb_runs"},
    "FSM transitions": {"rb_fsm_transitions_total"},
    "Monitor fires by monitor": {"rb_monitor_fires_total"},
    "Injections by source": {"rb_injections_total"},
    "Suppressions by guardrail": {"rb_suppressions_total"},
    "Escalations by rung and monitor": {"rb_escalations_total"},
    "Runs told to stop (share of runs started, 1h)": {"rb_escalations_total", "rb_steps_processed_total"},
    "E-trace hit ratio by tier": {"rb_etrace_lookups_total"},
    "E-trace retrieval latency by tier and decision wait": {
        "rb_etrace_retrieval_seconds_bucket",
        "rb_etrace_wait_seconds_bucket",
    },
    "Pattern store health": {"rb_etrace_store_up", "rb_etrace_store_failures_total"},
    "Dead-letters by reason": {"rb_deadletters_total"},
    "Active runs and table entries": {"rb_active_runs", "rb_table_entries"},
    "Partition stall (oldest unacked event)": {"rb_partition_stall_seconds"},
    "Internal errors by stage": {"rb_internal_errors_total"},
    "Cache entries (fill of each bound)": {"rb_cache_entries", "rb_cache_capacity"},
    "Worker memory by owner (RocksDB, C heap)": {"rb_rocksdb_memory_bytes", "rb_malloc_bytes"},
    # the Experiment row (docs/experiments.md)
    "Success rate by arm, with 95% Wilson interval": {"rb_runs_finished_total"},
    "Runs finished by arm and outcome": {"rb_runs_finished_total"},
    "Cost per successful run and per run, by arm": {"rb_run_cost_usd_sum", "rb_runs_finished_total"},
    "Steps and cost per run by arm (median)": {"rb_run_steps_bucket", "rb_run_cost_usd_bucket"},
    "Compliance by monitor and arm (share complied)": {"rb_compliance_total"},
    "Guard: steering switched to observe-only": {"rb_guard_observe_only", "rb_guard_switches_total"},
}


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def exported() -> set[str]:
    return exported_metric_names()


# <the deployment's runbook_base external label>/docs/runbook.md#<alert>, relative without it
RUNBOOK_URL = "{{{{ with $externalLabels.runbook_base }}}}{{{{ . }}}}/{{{{ end }}}}docs/runbook.md#{anchor}"


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that shows data (rows are only headings; collapsed rows nest theirs)."""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def _exprs(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for panel in _panels(dashboard):
        for target in panel["targets"]:
            yield f"{panel['title']!r} target {target.get('refId')}", target["expr"]


def test_exported_names_are_series_names(exported: set[str]) -> None:
    assert {"rb_steps_processed_total", "rb_decision_processing_seconds_bucket", "rb_runs"} <= exported
    assert "rb_steps_processed" not in exported  # counters are exposed with _total only


def test_the_experiment_rows_wilson_bounds_are_the_wilson_interval(dashboard: dict[str, Any]) -> None:
    """The PromQL bounds (no Wilson function in PromQL: the formula on the counts) give the
    textbook interval: 30 of 100 -> [0.2189, 0.3958]."""
    import math

    (panel,) = [
        p for p in _panels(dashboard) if p["title"] == "Success rate by arm, with 95% Wilson interval"
    ]
    s, n = 30.0, 100.0
    for ref, want in (("B", 0.2189), ("C", 0.3958)):
        (expr,) = [t["expr"] for t in panel["targets"] if t["refId"] == ref]
        succ = re.escape(
            'sum by (org, experiment, arm) (increase(rb_runs_finished_total{job=~"$job", instance=~"$instance", outcome="success"}[$__range]))'
        )
        fin = re.escape(
            'sum by (org, experiment, arm) (increase(rb_runs_finished_total{job=~"$job", instance=~"$instance", outcome!="abandoned"}[$__range]))'
        )
        arith = re.sub(fin, "N", re.sub(succ, "S", expr))
        assert set(arith) <= set("SN0123456789.+-*/() sqrt"), arith
        got = eval(arith, {"sqrt": math.sqrt, "S": s, "N": n})  # only digits, S, N and sqrt (checked above)
        assert abs(got - want) < 1e-4, (ref, got)


def test_dashboard_shape(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "rb-streams"
    assert 36 <= dashboard["schemaVersion"] <= 41
    rows = [p for p in dashboard["panels"] if p["type"] == "row"]
    ids = [p["id"] for p in [*rows, *_panels(dashboard)]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in _panels(dashboard):
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        assert panel.get("description"), f"{panel['title']!r} has no description"


def test_every_panel_has_a_target(dashboard: dict[str, Any]) -> None:
    panels = list(_panels(dashboard))
    assert panels
    for panel in panels:
        assert panel.get("targets"), f"panel {panel['title']!r} has no targets"
        for target in panel["targets"]:
            assert target.get("expr", "").strip(), f"panel {panel['title']!r} has an empty query"


def test_required_panels_exist(dashboard: dict[str, Any]) -> None:
    by_title = {p["title"]: p for p in _panels(dashboard)}
    for title, metrics in REQUIRED_PANELS.items():
        assert title in by_title, f"missing panel {title!r}"
        used = set().union(*(series_names(t["expr"]) for t in by_title[title]["targets"]))
        assert metrics <= used, f"panel {title!r} reads {sorted(used)}, expected {sorted(metrics)}"


def test_dashboard_queries_use_exported_metrics(dashboard: dict[str, Any], exported: set[str]) -> None:
    seen: set[str] = set()
    for where, expr in _exprs(dashboard):
        names = series_names(expr)
        assert names, f"{where}: no metric in {expr!r}"
        unknown = names - exported - {"up"}
        assert not unknown, f"{where}: {sorted(unknown)} not exported by streams.worker.metrics: {expr!r}"
        seen |= names
    # Everything the worker exports is on the dashboard somewhere (_sum/_created aside).
    families = {n for n in exported if not n.endswith(("_sum", "_created", "_count"))}
    families -= {"rb_monitor_score_bucket"}  # the fire ratio uses rb_monitor_score_count
    # of the process collector's series, memory and CPU are shown; the rest is for ad-hoc queries
    families -= {n for n in families if n.startswith(("process_", "python_"))} - {
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
    }
    assert families - seen == set(), "exported metrics missing from the dashboard"


def test_dashboard_queries_parse(dashboard: dict[str, Any], tmp_path: Path) -> None:
    """Every panel query is valid PromQL: promtool parses them as recording rules."""
    rules = []
    for n, (where, expr) in enumerate(_exprs(dashboard)):
        for var, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(var, value)
        assert "$" not in expr, f"{where}: unknown Grafana variable in {expr!r}"
        rules.append({"record": f"dashboard:query_{n}", "expr": expr})
    path = tmp_path / "dashboard_rules.yml"
    # JSON is YAML.
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8")
    promtool("check", "rules", "--lint=none", str(path))


def test_the_datasource_and_the_job_are_dashboard_variables(dashboard: dict[str, Any]) -> None:
    """No hard-coded datasource uid or job name: the dashboard works in any Grafana/Prometheus."""
    provisioned = load_yaml(GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml")
    (source,) = provisioned["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    assert "rb_assigned_partitions" in variables["job"]["definition"]  # found by our metrics, any job name
    used = {v["datasource"]["uid"] for v in variables.values() if "datasource" in v}
    for panel in _panels(dashboard):
        used.add(panel["datasource"]["uid"])
        used |= {t["datasource"]["uid"] for t in panel["targets"] if "datasource" in t}
    assert used == {"${datasource}"}
    for panel in _panels(dashboard):
        for t in panel["targets"]:
            assert 'job="' not in t["expr"], t["expr"]  # no job name hard-coded
            if "up{" in t["expr"]:
                assert 'job=~"$job"' in t["expr"], t["expr"]


def test_dashboard_provider_points_at_the_dashboards() -> None:
    provisioned = load_yaml(GRAFANA_DIR / "provisioning" / "dashboards" / "dashboards.yml")
    (provider,) = provisioned["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"


def test_alerts_use_exported_metrics_or_recording_rules(exported: set[str]) -> None:
    recorded: set[str] = set()
    for rule in load_rules():
        name = rule.get("record") or rule["alert"]
        names = series_names(rule["expr"])
        assert names, f"{name}: no metric in {rule['expr']!r}"
        unknown = {n for n in names if ":" not in n} - exported - {"up"}
        assert not unknown, f"{name}: {sorted(unknown)} not exported by streams.worker.metrics"
        # Rules of a group run in order: a recording rule must come before its users.
        undefined = {n for n in names if ":" in n} - recorded
        assert not undefined, f"{name}: uses {sorted(undefined)}, not recorded earlier in alerts.yml"
        if "record" in rule:
            assert re.fullmatch(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", rule["record"]), rule["record"]
            recorded.add(rule["record"])


def test_required_alerts_exist_and_explain_themselves() -> None:
    alerts = {r["alert"]: r for r in load_rules() if "alert" in r}
    assert set(REQUIRED_ALERTS) <= set(alerts)
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        assert rule["annotations"]["summary"].strip(), name
        assert len(rule["annotations"]["description"]) > 100, name
        if name in REQUIRED_ALERTS:
            assert rule["for"] == REQUIRED_ALERTS[name], name
    assert "job=" not in alerts["RbWorkerDown"]["expr"]  # any scrape job name
    assert alerts["RbWorkersAbsent"]["expr"].strip().startswith("absent(")
    runbook = (GRAFANA_DIR.parents[1] / "docs" / "runbook.md").read_text(encoding="utf-8")
    anchors = {line[3:].strip().lower() for line in runbook.splitlines() if line.startswith("## ")}
    for name, rule in alerts.items():
        assert rule["annotations"]["runbook_url"] == RUNBOOK_URL.format(anchor=name.lower()), name
        assert name.lower() in anchors, f"docs/runbook.md has no section for {name}"


OPERATIONS = GRAFANA_DIR.parents[1] / "docs" / "operations.md"


def _metrics_table() -> dict[str, str]:
    """docs/operations.md's metrics table: each metric named in a row's first cell -> the row."""
    rows: dict[str, str] = {}
    for line in OPERATIONS.read_text(encoding="utf-8").splitlines():
        cells = line.strip().split("|")
        if len(cells) > 3 and cells[1].strip().startswith("`rb_"):
            for name in re.findall(r"`(rb_\w+)", cells[1]):
                rows[name] = line
    return rows


def test_every_metric_the_worker_exports_is_in_the_operations_table_and_on_the_dashboard(
    dashboard: dict[str, Any],
) -> None:
    from streams.worker.metrics import Metrics

    table = _metrics_table()
    shown = set().union(*(series_names(expr) for _, expr in _exprs(dashboard)))
    families = [f for f in Metrics().registry.collect() if f.name.startswith("rb_")]
    assert families
    for family in families:
        # the name a user queries: prometheus_client drops a counter's _total from the family
        name = family.name + "_total" if family.type == "counter" else family.name
        assert name in table, (
            f"{name} ({family.type}) is missing from the metrics table of docs/operations.md"
        )
        on_dashboard = any(s == name or s.startswith(family.name + "_") for s in shown)
        assert on_dashboard or "not on the dashboard" in table[name], (
            f"{name}: neither on deploy/grafana's dashboard nor marked 'not on the dashboard' in its row"
        )
    exported = {f.name + "_total" if f.type == "counter" else f.name for f in families}
    assert set(table) <= exported, (
        f"the table names metrics no worker exports: {sorted(set(table) - exported)}"
    )
