"""The worker's HTTP views without a broker or a web server: the handlers `views.install`
registers, called with a recording view (Faust's routing and aiohttp are covered by the
integration tests: test_observability.py, test_poison.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson

from streams.core.monitors import Semantics
from streams.worker import views
from streams.worker.metrics import Metrics
from streams.worker.web_auth import WebAuth
from tests.factories import run_start, step
from tests.unit.worker.harness import GatedStore, rig


class App:
    """Records what `install` registers: path -> handler."""

    def __init__(self) -> None:
        self.pages: dict[str, Callable[..., Any]] = {}

    def page(self, path: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.pages[path] = fn
            return fn

        return register

    def table_route(self, table: Any, match_info: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return lambda fn: fn  # routing to the owner: Faust's job


class View:
    def json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        return status, data

    def bytes(self, body: bytes, content_type: str) -> tuple[int, bytes]:
        return 200, body


class Request:
    def __init__(self, token: str | None = None, query: dict[str, str] | None = None) -> None:
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.query = query or {}


def installed(
    sem: Semantics, token: str = "", ready: bool = True, stalled: dict[str, float] | None = None
) -> tuple[App, Any]:
    r = rig(sem, GatedStore())

    async def setup() -> None:
        for ev in (run_start("r"), step("r", 1)):
            await r.feed(ev)
            await r.drain()

    asyncio.run(setup())
    app = App()
    views.install(
        app,  # type: ignore[arg-type]
        r.table,
        r.runs.lookup,
        r.metrics,
        token,
        lambda: ready,
        lambda: stalled or {},
        deadlettered=r.processor.deadlettered.get,
    )
    return app, r


def call(app: App, path: str, *args: Any, token: str | None = None) -> tuple[int, Any]:
    return asyncio.run(app.pages[path](View(), Request(token), *args))  # type: ignore[no-any-return]


def test_a_run_and_its_step_log_are_served_and_an_unknown_run_is_404(sem: Semantics) -> None:
    app, _ = installed(sem)
    status, body = call(app, "/runs/{run_id}", "r")
    assert status == 200 and body["run_id"] == "r" and body["step"] == 1
    status, body = call(app, "/runs/{run_id}/steps", "r")
    assert status == 200 and [s["step"] for s in body["steps"]] == [0, 1]
    assert call(app, "/runs/{run_id}", "nobody") == (404, {"error": "unknown run", "run_id": "nobody"})


def test_the_token_guards_runs_and_metrics_but_not_health(sem: Semantics) -> None:
    app, _ = installed(sem, token="s3cret")
    assert call(app, "/runs/{run_id}", "r")[0] == 401
    assert call(app, "/metrics")[0] == 401
    assert call(app, "/runs/{run_id}", "r", token="s3cret")[0] == 200
    status, body = call(app, "/metrics", token="s3cret")
    assert status == 200 and b"rb_steps_processed_total" in body
    assert call(app, "/health") == (200, {"status": "ok"})


def test_ready_is_503_while_recovering_or_stalled_and_names_the_partition(sem: Semantics) -> None:
    app, _ = installed(sem)
    assert call(app, "/ready") == (200, {"ready": True})
    app, _ = installed(sem, ready=False)
    assert call(app, "/ready") == (503, {"ready": False})
    app, _ = installed(sem, stalled={"3": 45.0})
    assert call(app, "/ready") == (503, {"ready": False, "stalled_partitions": {"3": 45.0}})


def test_metrics_render_from_the_metrics_object() -> None:
    m = Metrics()
    body, ctype = m.render()
    assert ctype.startswith("text/plain") and b"rb_decisions_emitted_total" in body


def test_a_run_whose_run_start_was_dead_lettered_answers_with_the_reason(sem: Semantics) -> None:
    app, r = installed(sem)

    async def refused() -> None:
        await r.feed(run_start("bad", task_profile="nonexistent"))
        await r.feed(step("bad", 1))  # unknown_run from here on: the cause stays the first reason
        await r.feed(step("r", 5))  # a gap in a started run: out_of_order

    asyncio.run(refused())
    status, body = call(app, "/runs/{run_id}", "bad")
    assert status == 404 and body["error"] == "run dead-lettered"
    dl = body["deadletter"]
    assert dl["reason"] == "invalid_config" and "unknown task_profile 'nonexistent'" in dl["detail"]
    assert dl["step"] is None and dl["count"] == 2 and dl["last_reason"] == "unknown_run"
    status, body = call(app, "/runs/{run_id}", "r")
    assert status == 200 and body["deadletter"]["reason"] == "out_of_order"
    assert call(app, "/runs/{run_id}", "nobody")[1] == {"error": "unknown run", "run_id": "nobody"}


def listing(sem: Semantics, tenants: bool = False, token: str = "") -> tuple[App, Any]:
    """A worker's views over runs of two orgs: r (the default org), a-0..a-4 (acme), b-0 (bee)."""
    r = rig(sem, GatedStore())

    async def setup() -> None:
        events = [run_start("r"), *(run_start(f"a-{i}", org_id="acme") for i in range(5))]
        for ev in [*events, run_start("b-0", org_id="bee")]:
            await r.feed(ev)
            await r.drain()

    asyncio.run(setup())
    app = App()
    views.install(
        app,  # type: ignore[arg-type]
        r.table,
        r.runs.lookup,
        r.metrics,
        token,
        lambda: True,
        dict,
        held=r.runs.held.orgs,
        tenants=tenants,
    )
    return app, r


def get_runs(app: App, token: str | None = None, **query: str) -> tuple[int, Any]:
    return asyncio.run(app.pages["/runs"](View(), Request(token, query)))  # type: ignore[no-any-return]


def test_get_runs_lists_the_runs_held_by_id_paged_with_limit_and_after(sem: Semantics) -> None:
    app, _ = listing(sem)
    status, body = get_runs(app)
    assert status == 200 and [x["run_id"] for x in body] == ["a-0", "a-1", "a-2", "a-3", "a-4", "b-0", "r"]
    assert body[0] == {
        "run_id": "a-0",
        "org_id": "acme",
        "state": body[0]["state"],
        "step": 0,
        "finished": False,
        "outcome": None,
        "view": "/runs/a-0/view",
    }
    pages, after = [], ""
    while True:
        status, page = get_runs(app, limit="3", after=after)
        assert status == 200
        pages.append([x["run_id"] for x in page])
        if len(page) < 3:
            break
        after = page[-1]["run_id"]
    assert pages == [["a-0", "a-1", "a-2"], ["a-3", "a-4", "b-0"], ["r"]]
    assert [x["run_id"] for x in get_runs(app, org="bee")[1]] == ["b-0"]
    for bad in ("0", "x", "100000"):
        status, body = get_runs(app, limit=bad)
        assert status == 400 and "limit" in body["error"]


def test_get_runs_is_per_org_in_multi_tenant_mode_and_behind_the_token(sem: Semantics) -> None:
    app, _ = listing(sem, tenants=True, token="s3cret")
    assert get_runs(app, org="acme")[0] == 401
    status, body = get_runs(app, token="s3cret")
    assert status == 400 and "org" in body["error"]
    status, body = get_runs(app, token="s3cret", org="acme", limit="2")
    assert status == 200 and [x["run_id"] for x in body] == ["a-0", "a-1"]
    assert {x["org_id"] for x in get_runs(app, token="s3cret", org="acme")[1]} == {"acme"}


TENANT_TOPICS = {"mt.acme.steps": "acme", "mt.bee.steps": "bee"}
TOKENS = {"acme": "acme-t0k", "bee": "bee-t0k"}


def tenants_installed(sem: Semantics) -> tuple[App, Any]:
    """Multi-tenant mode: acme's runs a-0, a-1; bee's b-0 and a refused b-bad; acme also wrote
    into bee's b-0 and into an id nobody uses (both dead-lettered into acme's own topic)."""
    r = rig(sem, GatedStore(), tenant_of=TENANT_TOPICS.get)
    routed = {"model_routing": {"NORMAL": "m"}, "e_traces_enabled": False}

    async def setup() -> None:
        acme, bee = "mt.acme.steps", "mt.bee.steps"
        for ev, topic in (
            (run_start("a-0", **routed), acme),
            (step("a-0", 1), acme),
            (run_start("a-1"), acme),
            (run_start("b-0", **routed), bee),
            (step("b-0", 1, thought="bee's secret plan"), bee),
            (run_start("b-bad", task_profile="nonexistent"), bee),
            (step("b-0", 2, thought="acme writes into bee's run"), acme),
            (step("never-used", 2), acme),
        ):
            await r.feed(ev, topic=topic)
            await r.drain()

    asyncio.run(setup())
    app = App()
    views.install(
        app,  # type: ignore[arg-type]
        r.table,
        r.runs.lookup,
        r.metrics,
        WebAuth("op-t0k", TOKENS),
        lambda: True,
        dict,
        deadlettered=r.processor.deadlettered.get,
        held=r.runs.held.orgs,
        tenants=True,
    )
    return app, r


def test_a_tenants_token_lists_only_its_own_runs_and_is_refused_another_orgs_list(sem: Semantics) -> None:
    app, _ = tenants_installed(sem)
    status, body = get_runs(app, token="acme-t0k")
    assert status == 200 and [x["run_id"] for x in body] == ["a-0", "a-1"]
    assert [x["run_id"] for x in get_runs(app, token="acme-t0k", org="acme")[1]] == ["a-0", "a-1"]
    for org in ("bee", "", "ACME", "acme ", "*"):
        status, body = get_runs(app, token="acme-t0k", org=org)
        assert status == 403 and "own tenant" in body["error"], org
    assert [x["run_id"] for x in get_runs(app, token="bee-t0k")[1]] == ["b-0"]
    # the operator reads every tenant, one at a time; no token, or a wrong one, nothing
    assert [x["run_id"] for x in get_runs(app, token="op-t0k", org="bee")[1]] == ["b-0"]
    assert get_runs(app, org="bee")[0] == 401 and get_runs(app, token="acme-t0kbee-t0k")[0] == 401


def test_another_tenants_run_answers_a_tenants_token_as_an_id_nobody_uses(sem: Semantics) -> None:
    app, _ = tenants_installed(sem)

    def shape(run_id: str, path: str = "/runs/{run_id}", token: str = "acme-t0k") -> tuple[int, str]:
        status, body = call(app, path, run_id, token=token)
        return status, orjson.dumps(body).decode().replace(run_id, "<id>")

    assert call(app, "/runs/{run_id}", "a-0", token="acme-t0k")[0] == 200
    for path in ("/runs/{run_id}", "/runs/{run_id}/steps"):
        # a run of bee's that acme wrote into, and an id nobody uses that acme wrote into: the
        # same answer (acme's own dead-letter), so acme learns nothing of which ids bee holds
        assert shape("b-0", path) == shape("never-used", path)
        assert shape("b-0", path)[0] == 404
        # bee's refused run: bee's dead-letter is bee's, acme sees an unknown run
        assert call(app, path, "b-bad", token="acme-t0k") == (
            404,
            {"error": "unknown run", "run_id": "b-bad"},
        )
        status, body = call(app, path, "b-0", token="acme-t0k")
        assert "bee's secret plan" not in orjson.dumps(body).decode()
    status, body = call(app, "/runs/{run_id}", "b-bad", token="bee-t0k")
    assert status == 404 and body["deadletter"]["reason"] == "invalid_config"  # bee reads its own
    # bee's run as bee reads it: acme's write into it is acme's dead-letter, not shown to bee
    status, body = call(app, "/runs/{run_id}", "b-0", token="bee-t0k")
    assert status == 200 and body["step"] == 1 and "deadletter" not in body
    assert call(app, "/runs/{run_id}/steps", "b-0", token="bee-t0k")[0] == 200
    status, body = call(app, "/runs/{run_id}", "b-0", token="op-t0k")  # the operator: everything
    assert status == 200 and body["deadletter"]["reason"] == "unknown_run"
    assert call(app, "/runs/{run_id}", "a-0", token="bee-t0k")[0] == 404


def test_a_tenants_metrics_carry_its_orgs_series_only(sem: Semantics) -> None:
    app, _ = tenants_installed(sem)
    status, mine = call(app, "/metrics", token="acme-t0k")
    text = mine.decode()
    assert status == 200 and 'org="acme"' in text and "rb_cost_routed_calls_total" in text
    assert 'org="bee"' not in text and "bee" not in text
    for worker_wide in ("rb_steps_processed", "rb_deadletters", "process_", "python_info", "rb_runs{"):
        assert worker_wide not in text, worker_wide
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert samples and all('org="acme"' in line for line in samples)
    _, theirs = call(app, "/metrics", token="bee-t0k")
    assert 'org="bee"' in theirs.decode() and 'org="acme"' not in theirs.decode()
    _, everything = call(app, "/metrics", token="op-t0k")
    assert b'org="acme"' in everything and b'org="bee"' in everything and b"rb_steps_processed" in everything
    assert call(app, "/metrics")[0] == 401
