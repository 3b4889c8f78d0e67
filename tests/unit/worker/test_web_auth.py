from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.settings import Settings, SettingsError
from streams.worker.app import Worker
from streams.worker.web_auth import authorized, bearer_guard


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


async def handler(view, request, run_id):
    return (200, run_id, None)


def test_guard_answers_401_with_a_challenge_or_calls_through():
    guarded = bearer_guard("t0k")(handler)
    denied = asyncio.run(guarded(View(), SimpleNamespace(headers={}), run_id="r"))
    assert denied[0] == 401 and "RB_WEB_TOKEN" in denied[1]["error"]
    assert denied[2] == {"WWW-Authenticate": 'Bearer realm="rb-streams"'}
    ok = asyncio.run(guarded(View(), SimpleNamespace(headers={"Authorization": "Bearer t0k"}), run_id="r"))
    assert ok == (200, "r", None)
    assert bearer_guard("")(handler) is handler


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
