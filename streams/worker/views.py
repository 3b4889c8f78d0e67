"""The worker's HTTP views: run state, its step log, metrics, liveness and readiness.

Faust's own /table and /router pages are off (they would show raw table values, i.e. step
text); these are the only way in, and all but /health and /ready need the bearer token when
one is set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import faust

from ..core.state import TraceState
from ..untrusted import scrub
from .metrics import Metrics
from .web_auth import bearer_guard


def install(
    app: faust.App,
    table: Any,
    lookup: Callable[[str], TraceState | None],
    metrics: Metrics,
    token: str,
    ready: Callable[[], bool],
    stalled: Callable[[], dict[str, float]],
    deadlettered: Callable[[str], dict[str, Any] | None] = lambda _run_id: None,
    not_progressing: Callable[[], dict[str, float]] = dict,
) -> None:
    """Register the views on `app`; run views are routed to the worker holding the run.
    `deadlettered`: what this worker dead-lettered of a run lately (its first reason), so
    that a run whose run_start was refused answers why rather than a bare 404.
    `not_progressing`: partitions with events waiting and none evaluated past the stall
    threshold (partition -> seconds): the worker is not ready."""

    def not_found(view: Any, run_id: str) -> Any:
        dl = deadlettered(run_id)
        if dl is not None:
            return view.json({"error": "run dead-lettered", "run_id": run_id, "deadletter": dl}, status=404)
        return view.json({"error": "unknown run", "run_id": run_id}, status=404)

    guarded = bearer_guard(token)

    @app.page("/runs/{run_id}")
    @guarded
    @app.table_route(table=table, match_info="run_id")
    async def run_view(view: Any, request: Any, run_id: str) -> Any:
        st = lookup(run_id)
        if st is None:
            return not_found(view, run_id)
        body = st.summary()
        why = body.get("rung_reason")
        if isinstance(why, dict) and isinstance(why.get("text"), str):
            # a state stored before texts were scrubbed may hold raw event text: scrub it again
            body["rung_reason"] = {**why, "text": scrub(why["text"])}
        dl = deadlettered(run_id)
        if dl is not None:  # a started run some of whose events were refused (a gap, a conflict)
            body["deadletter"] = dl
        return view.json(body)

    @app.page("/runs/{run_id}/steps")
    @guarded
    @app.table_route(table=table, match_info="run_id")
    async def steps_view(view: Any, request: Any, run_id: str) -> Any:
        st = lookup(run_id)
        if st is None:
            return not_found(view, run_id)
        return view.json({"run_id": run_id, "step": st.last_step, "steps": st.step_log_entries()})

    @app.page("/metrics")
    @guarded
    async def metrics_view(view: Any, request: Any) -> Any:
        body, ctype = metrics.render()
        return view.bytes(body, content_type=ctype)

    @app.page("/health")
    async def health_view(view: Any, request: Any) -> Any:
        return view.json({"status": "ok"})

    @app.page("/ready")
    async def ready_view(view: Any, request: Any) -> Any:
        return ready_answer(view, ready(), stalled(), not_progressing())


def ready_answer(view: Any, ready: bool, stuck: dict[str, float], idle: dict[str, float]) -> Any:
    """/ready: 200 only when ready with no partition stalled or not progressing; else 503,
    naming the partitions."""
    ok = ready and not stuck and not idle
    body: dict[str, Any] = {"ready": ok}
    if stuck:
        body["stalled_partitions"] = stuck
    if idle:
        body["not_progressing"] = idle
    return view.json(body, status=200 if ok else 503)
