from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.kafka.client_settings import SettingsError
from streams.settings import Settings, tenant_token_var
from streams.worker.app import Worker
from streams.worker.web_auth import OPERATOR, Reader, WebAuth, authorized, guard


def test_without_a_token_everything_is_allowed():
    assert authorized("", None) and authorized("", "Bearer x")


def test_the_token_must_come_as_a_bearer_header():
    assert authorized("t0k", "Bearer t0k")
    assert not authorized("t0k", None)
    assert not authorized("t0k", "t0k")
    assert not authorized("t0k", "Bearer t0")
    assert not authorized("t0k", "Basic dDBr")


class View:
    def json(self, value, status=200, headers=None):
        return (status, value, headers)


async def handler(view, request, run_id, reader):
    return (200, run_id, reader)


def test_guard_answers_401_with_a_challenge_or_calls_through_with_the_reader():
    guarded = guard(WebAuth("t0k", {"acme": "a-t0k"}))(handler)
    denied = asyncio.run(guarded(View(), SimpleNamespace(headers={}), run_id="r"))
    assert denied[0] == 401 and "RB_WEB_TOKEN" in denied[1]["error"]
    assert denied[2] == {"WWW-Authenticate": 'Bearer realm="rb-streams"'}
    ok = asyncio.run(guarded(View(), SimpleNamespace(headers={"Authorization": "Bearer t0k"}), run_id="r"))
    assert ok == (200, "r", OPERATOR)
    acme = asyncio.run(
        guarded(View(), SimpleNamespace(headers={"Authorization": "Bearer a-t0k"}), run_id="r")
    )
    assert acme == (200, "r", Reader("acme"))
    anyone = guard(WebAuth(""))(handler)  # no token: everyone reads as the operator
    assert asyncio.run(anyone(View(), SimpleNamespace(headers={}), run_id="r")) == (200, "r", OPERATOR)


def test_each_token_reads_for_its_own_tenant_and_the_operators_for_all():
    auth = WebAuth("op-t0k", {"acme": "acme-t0k", "globex": "globex-t0k"})
    assert auth.reader("Bearer op-t0k") == OPERATOR and OPERATOR.may_read("anyone")
    acme = auth.reader("Bearer acme-t0k")
    assert acme == Reader("acme") and acme.may_read("acme") and not acme.may_read("globex")
    assert auth.reader("Bearer globex-t0k") == Reader("globex")
    # near misses, another scheme, prefixes and suffixes, several tokens at once: no reader
    for header in (
        None,
        "",
        "Bearer",
        "acme-t0k",
        "Basic acme-t0k",
        "Bearer acme-t0",
        "Bearer acme-t0kx",
        "Bearer ACME-T0K",
        "Bearer acme-t0k,op-t0k",
        "Bearer acme-t0k op-t0k",
        "Bearer op-t0k\x00",
    ):
        assert auth.reader(header) is None, header


def test_a_tenant_token_needs_an_operator_token_and_is_read_from_its_own_variables(tmp_path):
    with pytest.raises(ValueError, match="operator token"):
        WebAuth("", {"acme": "t"})
    base = {"RB_TENANTS": "acme,globex-eu", "RB_CONTROL_KEY": "k", "RB_WEB_TOKEN": "op"}
    (tmp_path / "globex").write_text("globex-t0k\n")
    s = Settings.from_env(
        {
            **base,
            "RB_TENANT_TOKEN_ACME": "acme-t0k",
            "RB_TENANT_TOKEN_GLOBEX_EU_FILE": str(tmp_path / "globex"),
        }
    )
    assert {t: v.get_secret_value() for t, v in s.tenant_tokens.items()} == {
        "acme": "acme-t0k",
        "globex-eu": "globex-t0k",
    }
    assert tenant_token_var("globex-eu") == "RB_TENANT_TOKEN_GLOBEX_EU"
    assert s.as_dict(mask_secrets=True)["tenant_tokens"] == '{"acme": "****", "globex-eu": "****"}'
    # a worker child process gets its settings as RB_* variables: the tokens come back
    env = {Settings.env_name(k): str(v) for k, v in s.as_dict().items()}
    assert Settings.from_env(env).tenant_tokens == s.tenant_tokens
    # in RB_SECRETS_DIR (a mounted Kubernetes Secret) under the variable's name
    (tmp_path / "RB_TENANT_TOKEN_ACME").write_text("acme-from-dir")
    s = Settings.from_env({**base, "RB_SECRETS_DIR": str(tmp_path)})
    assert s.tenant_tokens["acme"].get_secret_value() == "acme-from-dir"
    # a tenant not served has no token, whatever its variable holds
    assert Settings.from_env({**base, "RB_TENANT_TOKEN_INITECH": "x"}).tenant_tokens == {}
    assert Settings.from_env({"RB_TENANT_TOKEN_ACME": "x"}).tenant_tokens == {}  # single-tenant mode


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"RB_TENANT_TOKEN_ACME": "op"}, r"^RB_TENANT_TOKEN_ACME: the same as RB_WEB_TOKEN"),
        (
            {"RB_TENANT_TOKEN_ACME": "same", "RB_TENANT_TOKEN_GLOBEX": "same"},
            r"^RB_TENANT_TOKEN_GLOBEX: the same as RB_TENANT_TOKEN_ACME",
        ),
        ({"RB_TENANT_TOKEN_ACME": "a", "RB_WEB_TOKEN": ""}, r"^RB_WEB_TOKEN: required with tenant tokens"),
        ({"RB_TENANTS": "a-b,a_b"}, "would share the token variable RB_TENANT_TOKEN_A_B"),
        ({"RB_TENANTS": "x,X"}, "would share the token variable RB_TENANT_TOKEN_X"),
        ({"RB_TENANTS": "x,x_file"}, "would share the token variable RB_TENANT_TOKEN_X_FILE"),
        (
            {"RB_TENANT_TOKEN_ACME_FILE": "/nonexistent/t"},
            r"^RB_TENANT_TOKEN_ACME_FILE: '/nonexistent/t' does not exist",
        ),
    ],
)
def test_tenant_tokens_that_are_not_each_tenants_own_stop_the_start_with_one_line(extra, message):
    base = {"RB_TENANTS": "acme,globex", "RB_CONTROL_KEY": "k", "RB_WEB_TOKEN": "op"}
    with pytest.raises(SettingsError, match=message):
        Settings.from_env({**base, **extra})


def test_the_token_is_a_secret_masked_by_config():
    s = Settings.from_env({"RB_WEB_TOKEN": "t0k"})
    assert s.web_token.get_secret_value() == "t0k" and s.as_dict(mask_secrets=True)["web_token"] == "****"


def test_the_scheme_is_case_insensitive():
    for scheme in ("bearer", "BEARER", "BeArEr"):
        assert authorized("t0k", f"{scheme} t0k")
    assert not authorized("t0k", "Bearer")


@given(st.text())
def test_any_header_text_gets_an_answer_never_an_exception(header):
    scheme, _, credentials = header.strip().partition(" ")
    assert authorized("t0k", header) is (scheme.lower() == "bearer" and credentials.strip() == "t0k")
    assert authorized("t0k", "Bearer " + header) is (header.strip() == "t0k")


def test_header_bytes_that_are_not_utf8_are_refused():
    assert not authorized("t0k", "Bearer \udcff\udcfe")  # aiohttp's surrogate escapes
    assert not authorized("t0k", "Bearer \ud800")  # not even that
    assert authorized("é-token", "Bearer é-token")


def test_a_worker_built_with_an_anonymous_public_web_port_refuses_before_building_anything():
    """Every way of starting a worker goes through Worker(): the check is its first step."""
    s = Settings.from_env({}, web_host="0.0.0.0")
    with pytest.raises(SettingsError, match=r"^RB_WEB_HOST: '0.0.0.0' is reachable"):
        Worker(s, policy=None, semantics=None, retriever=None, metrics=None)  # type: ignore[arg-type]


def test_every_known_token_is_compared_as_a_digest_whichever_matches(monkeypatch):
    """No early exit and no length to time: each request compares 32-byte digests against the
    operator's token and every tenant's."""
    import streams.worker.web_auth as web_auth

    auth = WebAuth("op", {"acme": "a", "globex": "a-much-longer-token"})
    calls: list[tuple[int, int]] = []
    real = web_auth.hmac.compare_digest

    def counting(x: bytes, y: bytes) -> bool:
        calls.append((len(x), len(y)))
        return real(x, y)

    monkeypatch.setattr(web_auth.hmac, "compare_digest", counting)
    for header in ("Bearer op", "Bearer a", "Bearer nope", "Bearer a-much-longer-token"):
        calls.clear()
        auth.reader(header)
        assert calls == [(32, 32)] * 3, header


def test_tenants_given_as_a_flag_decide_whose_token_variables_are_read():
    env = {"RB_TENANT_TOKEN_ACME": "x", "RB_CONTROL_KEY": "k", "RB_WEB_TOKEN": "o", "RB_TENANTS": "bee"}
    assert set(Settings.from_env(env, tenants="acme").tenant_tokens) == {"acme"}
    assert Settings.from_env({**env, "RB_TENANTS": "acme"}, tenants="").tenant_tokens == {}
