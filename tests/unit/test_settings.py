from __future__ import annotations

import pytest

from streams.kafka.client_settings import SettingsError
from streams.settings import Settings


def test_env_vars_with_rb_prefix_are_read_and_typed():
    s = Settings.from_env({"RB_PARTITIONS": "12", "RB_TOPIC_PREFIX": "prod", "RB_SESSION_TIMEOUT_S": "20"})
    assert s.partitions == 12 and s.topic_prefix == "prod" and s.session_timeout_s == 20.0
    assert (
        s.steps_topic == "prod.steps"
        and s.steering_topic == "prod.steering"
        and s.deadletter_topic == "prod.deadletter"
    )


def test_flags_override_env():
    assert Settings.from_env({"RB_PARTITIONS": "12"}, partitions=3).partitions == 3


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({"RB_PARTITIONS": "many"}, "RB_PARTITIONS"),
        ({"RB_PARTITIONS": "0"}, "RB_PARTITIONS"),
        ({"RB_PROCESSING_GUARANTEE": "maybe_once"}, "RB_PROCESSING_GUARANTEE"),
        ({"RB_PRODUCER_COMPRESSION": "snappy"}, "RB_PRODUCER_COMPRESSION"),
        ({"RB_STORE": "redis://"}, "RB_STORE"),
        ({"RB_TOPIC_PREFIX": "has space"}, "RB_TOPIC_PREFIX"),
        ({"RB_LOG_LEVEL": "loud"}, "RB_LOG_LEVEL"),
    ],
)
def test_invalid_configuration_fails_fast_naming_the_variable(env, var):
    with pytest.raises(SettingsError, match=var):
        Settings.from_env(env)


def test_the_worker_compresses_with_zstd_unless_told_otherwise():
    assert Settings.from_env({}).producer_compression == "zstd"
    assert Settings.from_env({"RB_PRODUCER_COMPRESSION": "none"}).producer_compression == "none"


def test_broker_forms_are_normalised():
    s = Settings.from_env({"RB_BROKER": "kafka://a:1;kafka://b:2"})
    assert s.bootstrap_servers == "a:1,b:2"
    assert s.faust_broker == "kafka://a:1;kafka://b:2"
    assert Settings.from_env({"RB_BROKER": "a:1,b:2"}).bootstrap_servers == "a:1,b:2"


@pytest.mark.parametrize("bad", ["bad:value", "localhost", "a:1,b", "kafka://a:0", "a:70000", ":9092"])
def test_a_broker_address_that_is_not_host_port_is_refused_naming_the_variable(bad):
    with pytest.raises(SettingsError, match=r"RB_BROKER: .*expected host:port"):
        Settings.from_env({"RB_BROKER": bad})


def test_ipv6_and_schemed_broker_lists_are_accepted():
    s = Settings.from_env({"RB_BROKER": "kafka://a:9092,b:19092;[::1]:9092"})
    assert s.bootstrap_servers == "a:9092,b:19092,[::1]:9092"


def test_security_protocol_follows_from_the_other_security_settings(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    sasl = {"RB_SASL_MECHANISM": "SCRAM-SHA-512", "RB_SASL_USERNAME": "u", "RB_SASL_PASSWORD": "p"}
    assert Settings.from_env({}).kafka_security == "PLAINTEXT"
    assert Settings.from_env(sasl).kafka_security == "SASL_PLAINTEXT"
    assert Settings.from_env({**sasl, "RB_SSL_CAFILE": str(ca)}).kafka_security == "SASL_SSL"
    assert Settings.from_env({"RB_SSL_CAFILE": str(ca)}).kafka_security == "SSL"
    assert Settings.from_env({"RB_SECURITY_PROTOCOL": "SSL"}).kafka_security == "SSL"


@pytest.mark.parametrize(
    ("env", "var"),
    [
        ({"RB_SECURITY_PROTOCOL": "TLS"}, "RB_SECURITY_PROTOCOL"),
        (
            {"RB_SASL_MECHANISM": "GSSAPI", "RB_SASL_USERNAME": "u", "RB_SASL_PASSWORD": "p"},
            "RB_SASL_MECHANISM",
        ),
        ({"RB_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}, "RB_SASL_MECHANISM"),
        ({"RB_SASL_MECHANISM": "PLAIN", "RB_SASL_PASSWORD": "p"}, "RB_SASL_USERNAME"),
        ({"RB_SASL_MECHANISM": "PLAIN", "RB_SASL_USERNAME": "u"}, "RB_SASL_PASSWORD"),
        (
            {"RB_SECURITY_PROTOCOL": "SSL", "RB_SASL_MECHANISM": "PLAIN", "RB_SASL_USERNAME": "u"},
            "RB_SASL_MECHANISM",
        ),
        ({"RB_SSL_CAFILE": "/nonexistent/ca.pem"}, "RB_SSL_CAFILE"),
        ({"RB_SSL_CHECK_HOSTNAME": "perhaps"}, "RB_SSL_CHECK_HOSTNAME"),
    ],
)
def test_invalid_security_settings_fail_fast_naming_the_variable(env, var):
    with pytest.raises(SettingsError, match=var):
        Settings.from_env(env)


def test_secrets_are_masked_in_the_printed_configuration():
    s = Settings.from_env(
        {
            "RB_SASL_MECHANISM": "PLAIN",
            "RB_SASL_USERNAME": "svc",
            "RB_SASL_PASSWORD": "hunter2",
            "RB_QDRANT_API_KEY": "k3y",
        }
    )
    shown = s.as_dict(mask_secrets=True)
    assert shown["sasl_password"] == "****" and shown["qdrant_api_key"] == "****"
    assert shown["sasl_username"] == "svc"
    assert "hunter2" not in repr(shown) and s.as_dict()["sasl_password"] == "hunter2"


def test_sasl_settings_reach_the_kafka_clients_and_faust():
    import faust

    from streams.kafka.security import client_kwargs, faust_credentials

    s = Settings.from_env(
        {"RB_SASL_MECHANISM": "SCRAM-SHA-256", "RB_SASL_USERNAME": "svc", "RB_SASL_PASSWORD": "pw"}
    )
    assert client_kwargs(s) == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "svc",
        "sasl_plain_password": "pw",
    }
    creds = faust_credentials(s)
    assert isinstance(creds, faust.SASLCredentials)
    assert (creds.username, creds.password, creds.mechanism.value) == ("svc", "pw", "SCRAM-SHA-256")
    assert faust_credentials(Settings.from_env({})) is None
    assert client_kwargs(Settings.from_env({})) == {"security_protocol": "PLAINTEXT"}


def test_ssl_settings_build_a_verifying_context(tmp_path):
    import ssl

    from streams.kafka.security import client_kwargs

    s = Settings.from_env({"RB_SECURITY_PROTOCOL": "SSL", "RB_SSL_CHECK_HOSTNAME": "false"})
    kw = client_kwargs(s)
    ctx = kw["ssl_context"]
    assert kw["security_protocol"] == "SSL" and isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname is False


def test_cli_flags_are_typed_like_env_vars():
    from streams.cli.main import build_parser

    args = build_parser().parse_args(["config", "--ssl-check-hostname", "no", "--partitions", "3"])
    assert args.ssl_check_hostname is False and args.partitions == 3
    with pytest.raises(SystemExit):
        build_parser().parse_args(["config", "--partitions", "three"])


def test_run_cap_stall_threshold_and_control_key_settings():
    s = Settings.from_env({"RB_MAX_RUNS_PER_ORG": "0", "RB_STALL_THRESHOLD_S": "5", "RB_CONTROL_KEY": "k"})
    assert s.max_runs_per_org == 0 and s.stall_threshold_s == 5.0
    assert s.as_dict(mask_secrets=True)["control_key"] == "****"
    assert Settings().max_runs_per_org == 10_000 and Settings().stall_threshold_s == 30.0
    with pytest.raises(SettingsError, match="RB_MAX_RUNS_PER_ORG"):
        Settings.from_env({"RB_MAX_RUNS_PER_ORG": "-1"})
    with pytest.raises(SettingsError, match="RB_STALL_THRESHOLD_S"):
        Settings.from_env({"RB_STALL_THRESHOLD_S": "0"})


def test_secrets_are_secretstr_and_never_shown_by_repr():
    s = Settings.from_env({"RB_WEB_TOKEN": "t0k3n", "RB_CONTROL_KEY": "c0ntrol"})
    assert s.web_token.get_secret_value() == "t0k3n"
    assert "t0k3n" not in repr(s) and "c0ntrol" not in str(s)


def test_secrets_are_read_from_files_named_by_a_file_variable(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    env = {"RB_SASL_MECHANISM": "PLAIN", "RB_SASL_USERNAME": "u", "RB_SASL_PASSWORD_FILE": str(pw)}
    s = Settings.from_env(env)
    assert s.sasl_password.get_secret_value() == "s3cret"  # the trailing newline dropped
    assert (
        Settings.from_env({**env, "RB_SASL_PASSWORD": "direct"}).sasl_password.get_secret_value() == "direct"
    )


def test_secrets_are_read_from_a_secrets_directory(tmp_path):
    (tmp_path / "RB_WEB_TOKEN").write_text("from-dir")
    s = Settings.from_env({"RB_SECRETS_DIR": str(tmp_path)})
    assert s.web_token.get_secret_value() == "from-dir"
    assert s.as_dict(mask_secrets=True)["web_token"] == "****"


def test_an_unreadable_secret_file_names_the_variable(tmp_path):
    with pytest.raises(SettingsError, match="RB_CONTROL_KEY_FILE"):
        Settings.from_env({"RB_CONTROL_KEY_FILE": str(tmp_path / "missing")})


def test_the_error_names_the_variable_and_the_bad_value():
    with pytest.raises(SettingsError) as e:
        Settings.from_env({"RB_WEB_PORT": "70000"})
    assert str(e.value).startswith("RB_WEB_PORT: '70000' is not valid")
    with pytest.raises(SettingsError) as e:
        Settings.from_env({"RB_LOG_LEVEL": "loud"})
    assert "'loud'" in str(e.value) and "'debug'" in str(e.value)  # the allowed values are listed
    with pytest.raises(SettingsError, match="RB_HEARTBEAT_INTERVAL_S"):
        Settings.from_env({"RB_HEARTBEAT_INTERVAL_S": "20"})


def test_a_bad_secret_value_is_not_echoed():
    with pytest.raises(SettingsError) as e:
        Settings.from_env({"RB_SASL_PASSWORD": "hunter2", "RB_SASL_MECHANISM": "PLAIN"})
    assert "hunter2" not in str(e.value)


def test_the_agent_side_settings_ignore_worker_only_fields():
    from streams.kafka.client_settings import ClientSettings, KafkaSettings

    env = {
        "RB_PARTITIONS": "zero",
        "RB_STORE": "redis://",
        "RB_BROKER": "k:1",
        "RB_CLIENT_DEADLINE_MS": "500",
    }
    c = ClientSettings.from_env(env)
    assert c.bootstrap_servers == "k:1" and c.client_deadline_ms == 500
    assert KafkaSettings.from_env(env).steps_topic == "rb.steps"
    with pytest.raises(SettingsError, match="RB_PARTITIONS"):
        Settings.from_env(env)


def test_with_revalidates_and_does_not_reread_the_environment(monkeypatch):
    s = Settings.from_env({})
    monkeypatch.setenv("RB_PARTITIONS", "9")
    assert s.with_(topic_prefix="x").partitions == 8
    with pytest.raises(SettingsError, match="RB_PARTITIONS"):
        s.with_(partitions=0)


def test_qdrant_url_is_also_read_from_qdrant_url():
    assert Settings.from_env({"QDRANT_URL": "http://q:6333"}).qdrant_url == "http://q:6333"
    assert (
        Settings.from_env({"QDRANT_URL": "http://q", "RB_QDRANT_URL": "https://r"}).qdrant_url == "https://r"
    )
    with pytest.raises(SettingsError, match="RB_QDRANT_URL"):
        Settings.from_env({"RB_QDRANT_URL": "q:6333"})


def test_a_flag_is_checked_alone_and_cross_field_rules_when_all_are_known():
    from streams.cli.main import build_parser, main

    # --heartbeat-interval-s 20 alone breaks "below the session timeout"; with --session-timeout-s 30 it is fine
    args = build_parser().parse_args(["config", "--heartbeat-interval-s", "20", "--session-timeout-s", "30"])
    assert args.heartbeat_interval_s == 20.0
    assert main(["config", "--json", "--heartbeat-interval-s", "20", "--session-timeout-s", "30"]) == 0
    assert main(["config", "--heartbeat-interval-s", "20"]) == 2


# -- secrets fail closed (issue 32): a named secret that cannot be read is an error, never unset


def _bad_secret(tmp_path, kind):
    """A path for each way a secret file can be wrong."""
    p = tmp_path / f"secret-{kind}"
    if kind == "empty":
        p.write_text("")
    elif kind == "newline_only":
        p.write_text("\n")
    elif kind == "blank":
        p.write_text("  \t \r\n")
    elif kind == "binary":
        p.write_bytes(b"\xff\xfe\x00\x81token")
    elif kind == "directory":
        p.mkdir()
    elif kind == "too_large":
        p.write_text("x" * (64 * 1024 + 1))
    elif kind == "dangling_link":
        p.symlink_to(tmp_path / "nowhere")
    # "missing": nothing at p
    return p


BAD_SECRETS = {
    "missing": "does not exist",
    "dangling_link": "does not exist",
    "empty": "is empty",
    "newline_only": "is empty",
    "blank": "is empty",
    "binary": "is not UTF-8 text",
    "directory": "is not a regular file",
    "too_large": "is larger than",
}


@pytest.mark.parametrize("var", ["RB_WEB_TOKEN", "RB_CONTROL_KEY", "RB_QDRANT_API_KEY", "RB_SASL_PASSWORD"])
@pytest.mark.parametrize("kind", sorted(BAD_SECRETS))
def test_a_bad_secret_file_is_one_error_naming_its_variable(tmp_path, var, kind):
    path = _bad_secret(tmp_path, kind)
    with pytest.raises(SettingsError) as e:
        Settings.from_env({var + "_FILE": str(path)})
    msg = str(e.value)
    assert msg.startswith(f"{var}_FILE: ") and BAD_SECRETS[kind] in msg and "\n" not in msg
    assert str(path) in msg


@pytest.mark.parametrize("kind", sorted(set(BAD_SECRETS) - {"missing"}))
def test_a_bad_file_in_the_secrets_directory_is_an_error_naming_its_variable(tmp_path, kind):
    folder = tmp_path / "secrets"
    folder.mkdir()
    bad = _bad_secret(tmp_path, kind)
    bad.rename(folder / "RB_WEB_TOKEN")
    with pytest.raises(SettingsError) as e:
        Settings.from_env({"RB_SECRETS_DIR": str(folder)})
    assert str(e.value).startswith("RB_WEB_TOKEN (in RB_SECRETS_DIR): ") and BAD_SECRETS[kind] in str(e.value)


def test_a_secret_absent_from_the_secrets_directory_is_simply_unset(tmp_path):
    (tmp_path / "RB_CONTROL_KEY").write_text("k\n")
    s = Settings.from_env({"RB_SECRETS_DIR": str(tmp_path)})
    assert s.secret(s.control_key) == "k" and s.secret(s.web_token) == ""


def test_a_missing_secrets_directory_or_a_file_in_its_place_is_an_error(tmp_path):
    with pytest.raises(SettingsError, match=r"^RB_SECRETS_DIR: .* does not exist$"):
        Settings.from_env({"RB_SECRETS_DIR": str(tmp_path / "unmounted")})
    (tmp_path / "file").write_text("RB_WEB_TOKEN=x")
    with pytest.raises(SettingsError, match=r"^RB_SECRETS_DIR: .* is not a directory$"):
        Settings.from_env({"RB_SECRETS_DIR": str(tmp_path / "file")})


def test_the_agent_side_settings_fail_closed_on_secrets_too(tmp_path):
    from streams.kafka.client_settings import ClientSettings

    with pytest.raises(SettingsError, match="RB_SECRETS_DIR"):
        ClientSettings.from_env({"RB_SECRETS_DIR": str(tmp_path / "unmounted")})
    with pytest.raises(SettingsError, match="RB_SASL_PASSWORD_FILE"):
        ClientSettings.from_env({"RB_SASL_PASSWORD_FILE": str(_bad_secret(tmp_path, "binary"))})


def test_a_good_secret_file_keeps_its_text_but_one_trailing_newline(tmp_path):
    p = tmp_path / "token"
    p.write_text(" t0k\u00e9n \n", encoding="utf-8")
    assert Settings.from_env({"RB_WEB_TOKEN_FILE": str(p)}).web_token.get_secret_value() == " t0k\u00e9n "
    p.write_bytes(b"crlf\r\n")
    assert Settings.from_env({"RB_WEB_TOKEN_FILE": str(p)}).web_token.get_secret_value() == "crlf"


# -- the worker's web port: no anonymous /runs and /metrics beyond loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.53", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_a_loopback_web_host_needs_no_token(host):
    s = Settings.from_env({"RB_WEB_HOST": host})
    assert not s.web_exposed
    s.check_web_exposure()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "10.1.2.3", "worker-1", "localhost.example"])
def test_a_public_web_host_without_a_token_is_refused_in_one_line(host):
    s = Settings.from_env({}, web_host=host)
    assert s.web_exposed
    with pytest.raises(SettingsError) as e:
        s.check_web_exposure()
    msg = str(e.value)
    assert msg.startswith(f"RB_WEB_HOST: {host!r} is reachable from other machines") and "\n" not in msg
    assert "RB_WEB_TOKEN" in msg and "RB_WEB_ALLOW_ANONYMOUS=true" in msg


def test_a_public_web_host_is_allowed_with_a_token_or_an_explicit_opt_out():
    Settings.from_env({"RB_WEB_HOST": "0.0.0.0", "RB_WEB_TOKEN": "t"}).check_web_exposure()
    s = Settings.from_env({"RB_WEB_HOST": "0.0.0.0", "RB_WEB_ALLOW_ANONYMOUS": "true"})
    s.check_web_exposure()
    assert s.web_exposed and s.web_allow_anonymous
    assert Settings().web_allow_anonymous is False


def test_tenants_are_validated_and_need_a_control_key():
    s = Settings.from_env({}, tenants=" acme,globex ", control_key="k")
    assert s.tenant_names == ("acme", "globex")
    assert s.tenant_topic("acme", "deadletter") == "rb.acme.deadletter"
    assert Settings.from_env({}).tenant_names == ()
    for bad in ("a.b", "x" * 65, "acme,acme", "white space"):
        with pytest.raises(SettingsError, match="RB_TENANTS"):
            Settings.from_env({}, tenants=bad, control_key="k")
    with pytest.raises(SettingsError, match="RB_CONTROL_KEY: required with RB_TENANTS"):
        Settings.from_env({}, tenants="acme")


def test_the_decision_key_is_a_secret_shared_by_client_and_worker_and_required_with_tenants():
    from streams.kafka.client_settings import ClientSettings

    c = ClientSettings.from_env({"RB_DECISION_KEY": "dk"})
    assert c.secret(c.decision_key) == "dk" and c.as_dict(mask_secrets=True)["decision_key"] == "****"
    assert "decision_key" in Settings.SECRETS and "decision_key" in ClientSettings.SECRETS
    assert Settings.from_env({"RB_DECISION_KEY": "dk"}).check_decision_key() is True
    assert Settings.from_env({}).check_decision_key() is False  # single-tenant: a warning at start
    with pytest.raises(SettingsError, match="RB_DECISION_KEY: required with RB_TENANTS"):
        Settings.from_env({}, tenants="acme", control_key="k").check_decision_key()


def test_the_default_app_id_derives_from_the_topic_prefix_and_the_default_prefix_keeps_rb_streams():
    assert Settings.from_env({}).app_id == "rb-streams"  # existing deployments keep their group
    assert Settings.from_env({"RB_TOPIC_PREFIX": "other2"}).app_id == "other2-streams"
    assert Settings.from_env({"RB_TOPIC_PREFIX": "other2", "RB_APP_ID": ""}).app_id == "other2-streams"
    assert Settings.from_env({}, topic_prefix="late1").app_id == "late1-streams"
    assert Settings.from_env({"RB_TOPIC_PREFIX": "x", "RB_APP_ID": "mine"}).app_id == "mine"


def test_a_copy_for_another_prefix_does_not_keep_the_first_prefixs_app_id():
    s = Settings.from_env({"RB_TOPIC_PREFIX": "a"})
    assert s.with_(topic_prefix="b").app_id == "b-streams"
    assert s.with_(web_port=7000).app_id == "a-streams"
    assert Settings.from_env({"RB_APP_ID": "mine"}).with_(topic_prefix="b").app_id == "mine"  # explicit: kept


@pytest.mark.parametrize("bad", ["a b", "x/y", "é", "a" * 121])
def test_an_app_id_that_cannot_name_kafka_topics_fails_with_one_line(bad):
    with pytest.raises(SettingsError, match="RB_APP_ID"):
        Settings.from_env({"RB_APP_ID": bad})


def test_an_app_id_and_prefix_whose_claim_topic_would_not_fit_kafka_fail_at_start_up():
    with pytest.raises(SettingsError, match=r"RB_APP_ID.*claim topic"):
        Settings.from_env({"RB_APP_ID": "a" * 120, "RB_TOPIC_PREFIX": "p" * 130})
