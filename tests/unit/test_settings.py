from __future__ import annotations

import pytest

from streams.settings import Settings, SettingsError


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
        ({"RB_STORE": "redis://"}, "RB_STORE"),
        ({"RB_TOPIC_PREFIX": "has space"}, "RB_TOPIC_PREFIX"),
        ({"RB_LOG_LEVEL": "loud"}, "RB_LOG_LEVEL"),
    ],
)
def test_invalid_configuration_fails_fast_naming_the_variable(env, var):
    with pytest.raises(SettingsError, match=var):
        Settings.from_env(env)


def test_broker_forms_are_normalised():
    s = Settings.from_env({"RB_BROKER": "kafka://a:1;kafka://b:2"})
    assert s.bootstrap_servers == "a:1,b:2"
    assert s.faust_broker == "kafka://a:1;kafka://b:2"
    assert Settings.from_env({"RB_BROKER": "a:1,b:2"}).bootstrap_servers == "a:1,b:2"


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
    from streams.cli import build_parser

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
