"""Helpers for the deploy/ tests: promtool, YAML, metric names."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
GRAFANA_DIR = ROOT / "deploy" / "grafana"


# --- promtool ------------------------------------------------------------------------------


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run promtool from the repository root; fail (never skip) when it is missing or fails."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail(
            "promtool is not on PATH: run scripts/install_prometheus.sh (CI installs it)", pytrace=False
        )
    proc = subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, (
        f"promtool {' '.join(args)} exited {proc.returncode}\n"
        f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
    return proc


# --- metric names --------------------------------------------------------------------------


def exported_metric_names() -> set[str]:
    """Every series name a worker exposes on /metrics (streams.worker.metrics.Metrics).

    Labelled metrics without children have no samples yet, so the series names are derived
    from each family's type as well as read from the samples that do exist.
    """
    from streams.worker.metrics import Metrics

    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "gauge": ("",),
    }
    names: set[str] = set()
    for family in Metrics().registry.collect():
        assert family.type in suffixes, f"{family.name}: unexpected metric type {family.type}"
        names.update(family.name + s for s in suffixes[family.type])
        names.update(sample.name for sample in family.samples)
    return names


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
# Identifiers that may name a series: not preceded by a word character, ':', '.' or '$'
# (so durations such as 5m, numbers and Grafana variables are not taken for names).
_IDENT = re.compile(r"(?<![\w:.$])[A-Za-z_][\w:]*")


def series_names(expr: str) -> set[str]:
    """Series names a PromQL expression reads: rb_* and process metrics, `up`, recording rules (a:b:c)."""
    tokens = _IDENT.findall(_STRING.sub('""', expr))
    return {t for t in tokens if t.startswith(("rb_", "process_", "python_")) or t == "up" or ":" in t}


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_rules() -> list[dict[str, Any]]:
    """All rules of deploy/prometheus/alerts.yml, in file order."""
    doc = load_yaml(PROMETHEUS_DIR / "alerts.yml")
    return [rule for group in doc["groups"] for rule in group["rules"]]
