"""The worker's HTTP views: the runs it holds, run state, its step log, its page (HTML,
`streams.run_page`), metrics, liveness and readiness.

Faust's own /table and /router pages are off (they would show raw table values, i.e. step
text); these are the only way in, and all but /health and /ready need a bearer token when
one is set. In multi-tenant mode a tenant's token reads only its own runs, steps and metrics:
another tenant's run answers as an unknown one (404, the same body as an id nobody uses), a
list of another org is refused (403), and its /metrics carries its org's series only
(`web_auth`, `Metrics.render_org`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import faust

from ..core.state import TraceState
from ..run_page import CSP, render_run_page, render_runs_page, view_url
from ..shared.untrusted import scrub
from .deadlettered import ANY
from .metrics import Metrics
from .web_auth import OPERATOR, Reader, WebAuth, guard


def install(
    app: faust.App,
    table: Any,
    lookup: Callable[[str], TraceState | None],
    metrics: Metrics,
    token: str | WebAuth,
    ready: Callable[[], bool],
    stalled: Callable[[], dict[str, float]],
    deadlettered: Callable[[str, str | None], dict[str, Any] | None] = lambda _run_id, _tenant: None,
    not_progressing: Callable[[], dict[str, float]] = dict,
    held: Callable[[], Mapping[str, str]] = dict,
    tenants: bool = False,
    missing: Callable[[], list[str]] = list,
) -> None:
    """Register the views on `app`; run views are routed to the worker holding the run.
    `token`: the operator's token, or every token (`WebAuth`: the tenants' too).
    `deadlettered(run_id, tenant)`: what this worker dead-lettered of a run lately (its first
    reason) from `tenant`'s topic (deadlettered.ANY: any), so that a run whose run_start was
    refused answers why rather than a bare 404.
    `not_progressing`: partitions with events waiting and none evaluated past the stall
    threshold (partition -> seconds): the worker is not ready. `held`: run_id -> org of the
    runs this worker holds (`GET /runs`); `tenants`: multi-tenant mode, where a list names
    its org. `missing`: what else keeps the worker from being ready, named by /ready
    (`broker`: the broker does not answer; `partitions`: it owns none of the steps topic)."""

    auth = token if isinstance(token, WebAuth) else WebAuth(token)

    def scope(reader: Reader) -> str | None:
        return ANY if reader.tenant is None else reader.tenant

    def not_found(view: Any, run_id: str, reader: Reader) -> Any:
        dl = deadlettered(run_id, scope(reader))
        if dl is not None:
            return view.json({"error": "run dead-lettered", "run_id": run_id, "deadletter": dl}, status=404)
        return view.json({"error": "unknown run", "run_id": run_id}, status=404)

    def readable(run_id: str, reader: Reader) -> TraceState | None:
        """The run's state if `reader` may read it; another tenant's run reads as no run."""
        st = lookup(run_id)
        return st if st is not None and reader.may_read(st.config.org_id) else None

    guarded = guard(auth)

    @app.page("/runs")
    @guarded
    async def runs_view(view: Any, request: Any, reader: Reader = OPERATOR) -> Any:
        status, body = list_runs(held(), lookup, request.query, tenants, reader)
        if status == 200 and wants_html(request.headers):
            page = render_runs_page(body, next_page(request.query, body))
            return view.html(page, headers={"Content-Security-Policy": CSP, "Vary": "Accept"})
        return view.json(body, status=status, headers={"Vary": "Accept"})

    @app.page("/runs/{run_id}")
    @guarded
    @app.table_route(table=table, match_info="run_id")
    async def run_view(view: Any, request: Any, run_id: str, reader: Reader = OPERATOR) -> Any:
        st = readable(run_id, reader)
        if st is None:
            return not_found(view, run_id, reader)
        return view.json(run_summary(st, deadlettered(run_id, scope(reader))))

    @app.page("/runs/{run_id}/steps")
    @guarded
    @app.table_route(table=table, match_info="run_id")
    async def steps_view(view: Any, request: Any, run_id: str, reader: Reader = OPERATOR) -> Any:
        st = readable(run_id, reader)
        if st is None:
            return not_found(view, run_id, reader)
        return view.json({"run_id": run_id, "step": st.last_step, "steps": st.step_log_entries()})

    @app.page("/runs/{run_id}/view")
    @guarded
    @app.table_route(table=table, match_info="run_id")
    async def page_view(view: Any, request: Any, run_id: str, reader: Reader = OPERATOR) -> Any:
        st = readable(run_id, reader)
        if st is None:
            return not_found(view, run_id, reader)
        summary, steps = page_input(st, deadlettered(run_id, scope(reader)))
        # text/html; charset=utf-8. The CSP header is lost when Faust forwards the request to
        # the run's owner (it keeps the body and content type only): the page carries it too.
        return view.html(render_run_page(summary, steps), headers={"Content-Security-Policy": CSP})

    @app.page("/metrics")
    @guarded
    async def metrics_view(view: Any, request: Any, reader: Reader = OPERATOR) -> Any:
        body, ctype = metrics.render() if reader.tenant is None else metrics.render_org(reader.tenant)
        return view.bytes(body, content_type=ctype)

    @app.page("/health")
    async def health_view(view: Any, request: Any) -> Any:
        return view.json({"status": "ok"})

    @app.page("/ready")
    async def ready_view(view: Any, request: Any) -> Any:
        return ready_answer(view, ready(), stalled(), not_progressing(), missing())


def run_summary(st: TraceState, dl: dict[str, Any] | None) -> dict[str, Any]:
    """`GET /runs/{id}`'s body: the run's summary, and `dl`, what this worker dead-lettered of
    the run lately (a started run some of whose events were refused: a gap, a conflict)."""
    body = st.summary()
    why = body.get("rung_reason")
    if isinstance(why, dict) and isinstance(why.get("text"), str):
        # a state stored before texts were scrubbed may hold raw event text: scrub it again
        body["rung_reason"] = {**why, "text": scrub(why["text"])}
    if dl is not None:
        body["deadletter"] = dl
    return body


def page_input(st: TraceState, dl: dict[str, Any] | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What `GET /runs/{id}/view` renders: `/runs/{id}`'s body with the run's cost so far, and
    `/runs/{id}/steps`' entries, the last steering text the run kept on the step it answered
    (the step log keeps sources only, the state the last monitor text)."""
    summary = {**run_summary(st, dl), "cost_usd": st.cost_usd, "cost_estimated": st.cost_estimated}
    steps = st.step_log_entries()
    last, said = st.last_monitor_injection_step, st.last_monitor_injection_text
    if last is not None and said:
        for e in steps:
            if e["step"] == last:
                e["steering"] = [scrub(said)]
    return summary, steps


def wants_html(headers: Mapping[str, str]) -> bool:
    """A browser's request: its Accept header names HTML first (a browser's does; curl's
    `*/*`, a client's `application/json` or none get JSON)."""
    accept = headers.get("Accept") or ""
    first = accept.split(",", 1)[0].split(";", 1)[0].strip().lower()
    return first in ("text/html", "application/xhtml+xml")


def next_page(query: Mapping[str, str], page: list[dict[str, Any]]) -> dict[str, str] | None:
    """The query of the page after `page` of `GET /runs` (None: `page` is the last)."""
    limit = int(query.get("limit", str(LIST_LIMIT)))  # list_runs checked it
    if len(page) < limit:
        return None
    nxt = {"limit": str(limit), "after": page[-1]["run_id"]}
    if query.get("org"):
        nxt["org"] = query["org"]
    return nxt


LIST_LIMIT = 100  # runs per page of GET /runs unless ?limit= says otherwise
LIST_LIMIT_MAX = 1000


def list_runs(
    held: Mapping[str, str],
    lookup: Callable[[str], TraceState | None],
    query: Mapping[str, str],
    tenants: bool = False,
    reader: Reader = OPERATOR,
) -> tuple[int, Any]:
    """`GET /runs?limit=&after=&org=`: (status, body). The body is a JSON list of the runs this
    worker holds, by run id, the first `limit` after the run id `after` (the last of the
    previous page; a page shorter than `limit` is the last), each {run_id, org_id, state,
    step, finished, outcome, view} (`view`: the path of the run's page). In multi-tenant mode `org` is required: one tenant's list (a
    tenant's token lists its own, and is refused another org's: 403). Only the page's runs are
    read from the table."""
    raw = query.get("limit", str(LIST_LIMIT))
    if not raw.isdigit() or not 1 <= int(raw) <= LIST_LIMIT_MAX:
        return 400, {"error": f"limit: an integer from 1 to {LIST_LIMIT_MAX}", "limit": raw[:100]}
    org = query.get("org")
    if reader.tenant is not None:
        if org is not None and org != reader.tenant:
            return 403, {"error": "forbidden: this token reads its own tenant's runs only (leave out org)"}
        org = reader.tenant
    if tenants and not org:
        return 400, {"error": "org: required in multi-tenant mode (GET /runs?org=<tenant>)"}
    after = query.get("after", "")
    ids = sorted(r for r, o in held.items() if r > after and (org is None or o == org))
    page = []
    for run_id in ids:
        st = lookup(run_id)
        if st is None:  # evicted since it was counted
            continue
        s = st.summary()
        entry = {k: s[k] for k in ("run_id", "org_id", "state", "step", "finished", "outcome")}
        entry["view"] = view_url(run_id)
        page.append(entry)
        if len(page) == int(raw):
            break
    return 200, page


def ready_answer(
    view: Any, ready: bool, stuck: dict[str, float], idle: dict[str, float], missing: list[str] | None = None
) -> Any:
    """/ready: 200 only when ready with no partition stalled or not progressing; else 503,
    naming the partitions and what is missing (`{"ready": false, "missing": ["broker"]}`)."""
    ok = ready and not stuck and not idle
    body: dict[str, Any] = {"ready": ok}
    if missing:
        body["missing"] = missing
    if stuck:
        body["stalled_partitions"] = stuck
    if idle:
        body["not_progressing"] = idle
    return view.json(body, status=200 if ok else 503)
