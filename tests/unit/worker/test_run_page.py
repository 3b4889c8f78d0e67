"""A run's page (`streams.run_page`, `GET /runs/{id}/view`): it shows what the run's summary
and step log hold, every text escaped and cut, and it answers behind the same token and the
same tenant rule as `/runs/{id}` (handlers called as test_views calls them, no broker)."""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest

from streams.core.monitors import Semantics
from streams.replay import Replayer
from streams.run_page import (
    CSP,
    ELLIPSIS,
    ITEMS_MAX,
    LINK_MAX,
    ROWS_MAX,
    TEXT_MAX,
    render_run_page,
    render_runs_page,
    steps_from_decisions,
    view_url,
)
from streams.worker.views import page_input
from tests.unit.worker.test_views import App, Request, View, installed, listing, tenants_installed

REAL_DEV = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "real-dev"
# a real mini-swe-agent run on which monitors fire and steer (its texts reach the page)
REAL_RUN = "mini-swe-agent-gemini-3-pro-preview-django__django-11299"

HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "'><svg onload=alert(1)>"]
HUGE = "<script>" + "A" * 1_000_000


class HtmlView(View):
    def html(self, value: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
        return 200, value, headers or {}


def call(app: App, path: str, run_id: str, token: str | None = None) -> Any:
    return asyncio.run(app.pages[path](HtmlView(), Request(token), run_id))


def real_run(sem: Semantics) -> tuple[Replayer, list[dict[str, Any]], dict[int, float]]:
    """The real run replayed through the core: the replayer, its decisions, cost per step."""
    data = REAL_DEV / "mini_swe_agent.jsonl"
    if not data.is_file():
        pytest.skip("real dev runs not present")
    rp = Replayer(sem=sem, clock=lambda: 1_767_225_600.0)
    decisions, costs = [], {}
    for line in data.read_bytes().splitlines():
        if orjson.loads(line)["run_id"] != REAL_RUN:
            continue
        d, dl = rp.feed(line)
        assert dl is None
        if d is not None:
            decisions.append(d)
            costs[d["step"]] = rp.states[REAL_RUN].cost_usd
    return rp, decisions, costs


def shown(t: str) -> str:
    return html.escape(t[:TEXT_MAX], quote=True)


def test_the_page_of_a_real_run_holds_every_fired_monitor_and_every_steering_text(sem: Semantics) -> None:
    rp, decisions, costs = real_run(sem)
    fired = {m for d in decisions for m in d["monitors"]["fired"]}
    texts = [i["text"] for d in decisions for i in d["injections"]]
    assert fired and texts  # the run was chosen for it
    st = rp.states[REAL_RUN]
    page = render_run_page(st.summary(), steps_from_decisions(decisions, costs))
    assert page.count("<tr>") == 1 + len(decisions)  # the header row, one row per step
    for m in fired:
        assert html.escape(m) in page
    for t in texts:
        assert shown(t) in page
    assert f"run {REAL_RUN}" in page and html.escape(str(st.outcome)) in page
    assert page.count("<circle") == sum(d["difficulty"] is not None for d in decisions)
    assert "<script" not in page.lower()

    # the worker's page: the step log it keeps (the last 20), the last steering text on its step
    summary, steps = page_input(st, None)
    page = render_run_page(summary, steps)
    kept = st.step_log_entries()
    assert kept and page.count("<tr>") == 1 + len(kept) and "cost so far" in page
    for m in {m for e in kept for m in e["monitors_fired"]}:
        assert html.escape(m) in page
    if any(e["step"] == st.last_monitor_injection_step for e in kept):
        assert shown(str(st.last_monitor_injection_text)) in page


def hostile_summary() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary: dict[str, Any] = {
        "run_id": HOSTILE[0],
        "org_id": HOSTILE[1],
        "state": HOSTILE[2],
        "step": HOSTILE[0],
        "outcome": HUGE,
        "experiment": HOSTILE[1],
        "arm": HUGE,
        "injections_by_source": {h: h for h in HOSTILE} | {f"k{i}": i for i in range(1000)},
        "e_trace_calls": HUGE,
        "rung": HUGE,
        "rung_reason": {"text": HUGE},
        "deadletter": {"reason": HUGE, "detail": HUGE},
        "cost_usd": float("nan"),
    }
    entry: dict[str, Any] = {
        "step": HOSTILE[1],
        "fsm_state": HUGE,
        "difficulty": HUGE,
        "model": HUGE,
        "monitors_fired": [*HOSTILE, HUGE] * 100,
        "injection_sources": [HUGE],
        "steering": [*HOSTILE, HUGE] * 100,
        "action": HUGE,
        "action_reason": {"text": HUGE},
        "suppressed": HUGE,
        "skipped_reason": HUGE,
        "gate_refusals": [*HOSTILE, HUGE] * 100,
        "cost_usd": HUGE,
    }
    steps = [entry, {"step": 2, "fsm_state": "SLOW", "difficulty": float("inf")}] * (ROWS_MAX // 2 + 10)
    return summary, steps


def test_hostile_text_is_escaped_and_cut_and_the_page_stays_bounded() -> None:
    summary, steps = hostile_summary()
    page = render_run_page(summary, steps)
    low = page.lower()
    assert "<script" not in low and "<img" not in low and "<svg onload" not in low
    assert not re.search(r"<[^>]*\sonerror\s*=", low) and not re.search(r"<[^>]*\sonload\s*=", low)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&quot;&gt;&lt;img" in page
    assert "A" * (TEXT_MAX + 1) not in page  # every text cut
    assert f"{len(steps) - ROWS_MAX} more steps not shown" in page
    assert "no scored step" in page and "<circle" not in page  # no finite difficulty: no point
    assert page.count("<tr>") == 1 + ROWS_MAX + 1
    # a row holds a bounded number (lists: ITEMS_MAX) of bounded texts, whatever the input
    one = render_run_page(summary, steps[:1])
    assert len(one) < 4 * ITEMS_MAX * (TEXT_MAX + 100)  # a 1 MB text in every field: ~40 kB
    assert len(page) < (ROWS_MAX + 1) * len(one)
    assert '<meta http-equiv="Content-Security-Policy"' in page and "<script" not in one.lower()


def test_a_step_without_texts_shows_its_injection_sources_counted() -> None:
    page = render_run_page({"run_id": "r"}, [{"step": 0, "injection_sources": ["e3"] * 14 + ["monitor"]}])
    assert "(e3 \u00d714, monitor)" in page
    many = render_run_page({"run_id": "r"}, [{"step": 0, "injection_sources": [f"s{i}" for i in range(99)]}])
    assert f"s{ITEMS_MAX - 1}, {ELLIPSIS})" in many and f"s{ITEMS_MAX}," not in many


def test_the_page_of_a_run_with_no_step_and_no_cost_renders() -> None:
    page = render_run_page({"run_id": "r", "state": "INIT", "step": 0})
    assert "no scored step" in page and "cost so far</dt>" not in page and "<tr>" in page


def test_the_view_answers_html_behind_the_token_and_404s_like_the_run_view(sem: Semantics) -> None:
    app, _ = installed(sem, token="s3cret")
    assert call(app, "/runs/{run_id}/view", "r")[0] == 401
    assert call(app, "/runs/{run_id}/view", "r", token="wrong")[0] == 401
    status, page, headers = call(app, "/runs/{run_id}/view", "r", token="s3cret")
    assert status == 200 and page.startswith("<!DOCTYPE html>") and "run r" in page
    assert "script-src" not in headers["Content-Security-Policy"]  # default-src 'none': none
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert call(app, "/runs/{run_id}/view", "nobody", token="s3cret") == call(
        app, "/runs/{run_id}", "nobody", token="s3cret"
    )
    assert call(app, "/runs/{run_id}/view", "nobody", token="s3cret")[0] == 404


def test_another_tenants_run_page_answers_as_an_unknown_run(sem: Semantics) -> None:
    app, _ = tenants_installed(sem)
    path = "/runs/{run_id}/view"
    assert call(app, path, "a-0", token="acme-t0k")[0] == 200
    assert call(app, path, "b-0", token="acme-t0k") == call(app, "/runs/{run_id}", "b-0", token="acme-t0k")
    assert call(app, path, "b-0", token="acme-t0k")[0] == 404
    assert call(app, path, "b-bad", token="acme-t0k") == (404, {"error": "unknown run", "run_id": "b-bad"})
    status, page, _ = call(app, path, "b-0", token="bee-t0k")
    assert status == 200 and "run b-0" in page
    assert call(app, path, "b-0", token="op-t0k")[0] == 200
    assert call(app, path, "a-0")[0] == 401


BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def list_as(app: App, accept: str | None, token: str | None = None, **query: str) -> Any:
    req = Request(token, query)
    if accept is not None:
        req.headers["Accept"] = accept
    return asyncio.run(app.pages["/runs"](HtmlView(), req))


def test_runs_links_each_run_to_its_page_in_json_and_for_a_browser(sem: Semantics) -> None:
    app, _ = listing(sem, token="s3cret")
    status, body = list_as(app, None, token="s3cret")
    assert status == 200 and [r["view"] for r in body] == [f"/runs/{r['run_id']}/view" for r in body]
    for accept in ("*/*", "application/json", "application/json, text/html", ""):
        assert list_as(app, accept, token="s3cret") == (200, body), accept  # JSON as before
    status, page, headers = list_as(app, BROWSER_ACCEPT, token="s3cret")
    assert status == 200 and page.startswith("<!DOCTYPE html>")
    assert headers["Content-Security-Policy"] == CSP and "<script" not in page.lower()
    for r in body:
        assert f'<a href="/runs/{r["run_id"]}/view">{r["run_id"]}</a>' in page
    assert "next page" not in page  # all on one page
    status, page, _ = list_as(app, BROWSER_ACCEPT, token="s3cret", limit="3", org="acme")
    assert page.count('<a href="/runs/') == 3 and '<a href="?limit=3&amp;after=a-2&amp;org=acme">' in page
    # the same auth and the same refusals: no token 401, a bad limit 400 (JSON)
    assert list_as(app, BROWSER_ACCEPT)[0] == 401
    status, body = list_as(app, BROWSER_ACCEPT, token="s3cret", limit="0")
    assert status == 400 and "limit" in body["error"]


def test_the_runs_list_escapes_run_ids_in_text_and_in_links() -> None:
    hostile = [
        '"><script>alert(1)</script>',
        "a/../b?x=1#y",
        "' onmouseover='x",
        "\x00\x1b" + "\U0001f600" * 254,
    ]
    huge = "A" * 10_000  # longer than any run id may be: no link, the id cut
    runs = [{"run_id": h, "view": view_url(h), "state": h, "outcome": h} for h in [*hostile, huge]]
    page = render_runs_page(runs)
    low = page.lower()
    assert "<script" not in low and not re.search(r"<[^>]*\sonmouseover\s*=", low)
    hrefs = re.findall(r'<a href="([^"]*)">', page)
    assert hrefs == [html.escape(view_url(h)) for h in hostile]
    assert all(re.fullmatch(r"/runs/[A-Za-z0-9%._~-]+/view", h) for h in hrefs)  # one path segment each
    assert "A" * 201 not in page and page.count("<tr>") == 1 + len(runs)
    # the next page's link is whole: an `after` id of 256 characters of any kind, or none at all
    longest = "\U0001f600" * 256
    assert f'href="?after={quote(longest, safe="")}"' in render_runs_page([], {"after": longest})
    assert "next page" not in render_runs_page([], {"after": "A" * (LINK_MAX + 1)})
