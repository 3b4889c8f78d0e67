"""The quota request `tenants add` sends: its wire form, and the flags that shape it."""

from __future__ import annotations

import pytest

from streams.admin.quotas import (
    DEFAULT_PRODUCER_BYTE_RATE,
    AlterClientQuotasRequest,
    AlterClientQuotasRequest_v0,
    Quotas,
    user_of,
)
from streams.cli import main as cli
from streams.kafka.client_settings import SettingsError


def test_the_request_sets_the_users_quotas_and_removes_those_given_as_none() -> None:
    req = AlterClientQuotasRequest("acme", {"producer_byte_rate": 1024.0, "request_percentage": None})
    struct = req.build(AlterClientQuotasRequest_v0)
    assert struct.entries == [
        ([("user", "acme")], [("producer_byte_rate", 1024.0, False), ("request_percentage", 0.0, True)])
    ]
    assert struct.validate_only is False
    assert len(struct.encode()) > 0  # it serialises with Kafka's v0 schema


def test_the_default_quota_limits_the_producer_byte_rate_only_and_the_cli_says_the_same() -> None:
    assert Quotas().as_dict() == {"producer_byte_rate": float(DEFAULT_PRODUCER_BYTE_RATE)}
    assert cli.DEFAULT_PRODUCER_BYTE_RATE == DEFAULT_PRODUCER_BYTE_RATE
    assert Quotas(None).as_dict() == {} and Quotas(None).describe() == "no quota"
    args = cli.build_parser().parse_args(["tenants", "add", "acme"])
    assert args.producer_byte_rate == DEFAULT_PRODUCER_BYTE_RATE and args.request_percentage is None


def test_a_negative_rate_is_one_clear_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(["tenants", "add", "acme", "--producer-byte-rate", "-5"])
    assert exc.value.code == 2
    assert "expected an integer >= 0" in capsys.readouterr().err


def test_only_user_principals_have_a_quota_entity() -> None:
    assert user_of("User:acme") == "acme"
    with pytest.raises(SettingsError):
        user_of("Group:acme")
