"""The run state and the decision are bounded by construction: adversarial maximal events
(every string field at its limit, huge paths, many path keys, deep nesting, many tool calls)
never make a state or a decision near its cap, and no step exceeds a time budget. Over the cap,
`Engine.seal` makes the event an internal_error (stage `state_size`) and the run keeps its last good
state, so nothing the changelog or the steering topic would refuse is ever written."""

from __future__ import annotations

import time
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.core.events import Limits
from streams.core.monitors import MONITORS
from streams.core.reading.features import PATH_KEYS
from streams.core.state import TraceState
from tests.driving import sealed
from tests.factories import b, run_start, step
from tests.models import semantics

LIMITS = Limits()
SEM = semantics()
# What the tests prove a state stays under on adversarial input (RELIABILITY.md states it): half
# the cap. Realistic runs stay under 16 KiB (test_engine's 5,000-step test).
STATE_BOUND = 32 * 1024
DECISION_BOUND = 16 * 1024
STEP_BUDGET_S = 0.5  # generous: a normal step takes ~0.3 ms, the 2-core CI machine is shared


class Table(dict[str, TraceState]):
    """The run table as the worker uses it: read, step, seal, store the sealed bytes."""

    def feed(self, ev: dict[str, Any]) -> tuple[Any, float]:
        raw = b(ev)
        t0 = time.perf_counter()
        res = sealed(raw, self.get, LIMITS, 1.0, SEM, key=ev["run_id"].encode())
        took = time.perf_counter() - t0
        if res.state_bytes is not None:
            self[res.run_id] = TraceState.decode(res.state_bytes)
        return res, took


def _fit(ev: dict[str, Any]) -> dict[str, Any]:
    """Shrink the longest string fields until the event is within the event size limit."""
    while len(b(ev)) > LIMITS.max_event_bytes:
        over = len(b(ev)) - LIMITS.max_event_bytes
        key = max((k for k, v in ev.items() if isinstance(v, str)), key=lambda k: len(ev[k]))
        ev[key] = ev[key][: max(0, len(ev[key]) - over - 64)]
    return ev


def _nested(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = {"path": leaf, "x": [leaf]} if depth < 6 else [leaf]
    return leaf


text = st.sampled_from(["a/", "x", "é", "../", "src/m.py ", "\n", " ", "0x1f", "Error: ", "\x1b[31m"])


@st.composite
def maximal_step(draw: st.DrawFn, run_id: str, k: int) -> dict[str, Any]:
    n = draw(st.sampled_from([1_000, 20_000, 60_000, 120_000]))
    unit = draw(text)
    big = (unit * (n // len(unit) + 1))[:n]
    shape = draw(
        st.sampled_from(["paths", "many_paths", "command", "nested", "tool_calls", "string", "message"])
    )
    action: str | None = draw(
        st.sampled_from(["edit", "bash", "str_replace_editor", "read_file", "x" * 1024])
    )
    action_input: Any
    if shape == "paths":
        action_input = {key: big[: n // len(PATH_KEYS)] + str(k) for key in PATH_KEYS}
    elif shape == "many_paths":
        action_input = {"path": [f"{big[:200]}/{i}.py" for i in range(400)], "command": "create"}
    elif shape == "command":
        action, action_input = "bash", " ".join(f"pytest {big[:300]}{i}.py" for i in range(200))
    elif shape == "nested":
        action_input = _nested(draw(st.integers(1, 40)), big[:2000])
    elif shape == "tool_calls":
        action_input = [{"name": f"t{i}", "arguments": {"path": big[:500] + str(i)}} for i in range(100)]
    elif shape == "message":
        action, action_input = None, None
    else:
        action_input = big
    return _fit(
        step(
            run_id,
            k,
            thought=big,
            action=action,
            action_input=action_input,
            observation=big,
            observation_is_error=draw(st.booleans()),
            agent=(unit * 256)[:256],
            model_id="m" * 256,
        )
    )


@st.composite
def adversarial_run(draw: st.DrawFn) -> list[dict[str, Any]]:
    rid = "r" * 256
    weights = {m: 0.5 for m in MONITORS}  # a key naming no monitor is refused (invalid_run_start)
    start = run_start(
        rid,
        task="t" * 100_000,
        org_id="o" * 256,
        project_id="p" * 256,
        agent_name="a" * 256,
        framework="f" * 256,
        model="m" * 256,
        monitor_weights=weights,
        monitors_off=list(MONITORS[:2]) * 32,
        monitor_thresholds={m: 1.0 for m in MONITORS},
        escalation={"escalate_model_after": 1, "stop_after": 2, "escalation_model": "e" * 256},
        model_routing={s: (s.lower() * 64)[:256] for s in ("FAST", "NORMAL", "SLOW", "SKIP")},
        metadata={"k": "v" * 50_000},
    )
    return [_fit(start), *(draw(maximal_step(rid, k)) for k in range(1, draw(st.integers(2, 12))))]


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(adversarial_run())
def test_adversarial_maximal_events_keep_state_and_decision_under_their_bounds_and_time_budget(events):
    table = Table()
    for ev in events:
        res, took = table.feed(ev)
        assert res.rejection is None, res.rejection
        assert len(res.state_bytes) <= STATE_BOUND, (ev["type"], len(res.state_bytes))
        if res.decision_bytes is not None:
            assert len(res.decision_bytes) <= DECISION_BOUND
        assert took <= STEP_BUDGET_S, (ev["type"], ev.get("step"), took)


def test_the_issue_reproduction_three_events_with_a_250_kb_path_stay_small():
    table = Table()
    rid = "r"
    path = "/" + "a/" * 120_000
    sizes = []
    refused, _ = table.feed(_fit(run_start(rid, monitor_weights={f"k{i}": 1.0 for i in range(14_000)})))
    assert refused.rejection.reason == "invalid_run_start" and "'k0'" in refused.rejection.detail
    for ev in (
        run_start(rid),
        step(rid, 1, action="edit", action_input={"path": path}),
        step(rid, 2, action="edit", action_input={"path": path + "b"}),
    ):
        res, _ = table.feed(_fit(ev))
        assert res.rejection is None
        sizes.append(len(res.state_bytes))
    assert max(sizes) < 8 * 1024, sizes  # was 197 KB, 758 KB and 1.26 MB
    assert rid in table


def test_monitor_weights_are_stored_cleaned_and_a_key_naming_no_monitor_is_refused():
    table = Table()
    res, _ = table.feed(run_start("r", monitor_weights={"semantic_loop": 2.0, "nope": 1.0}))
    assert res.rejection.reason == "invalid_run_start" and "monitor_weights" in res.rejection.detail
    assert "'nope'" in res.rejection.detail and "r" not in table
    table.feed(run_start("r", monitor_weights={"semantic_loop": 2.0, "late_sprawl": -1}))
    assert table["r"].config.monitor_weights == {"semantic_loop": 1.0, "late_sprawl": 0.0}


def test_a_state_over_the_cap_is_an_internal_error_and_the_run_keeps_its_last_good_state():
    table = Table()
    table.feed(run_start("r"))
    table.feed(step("r", 1))
    good = table["r"]
    small = Limits(max_state_bytes=len(good.encode()) + 50)  # step 2's longer thought will not fit
    ev = step("r", 2, thought="Let me look at " + " ".join(f"m{i}.py" for i in range(80)), action="edit")
    res = sealed(b(ev), table.get, small, 2.0, SEM, key=b"r")
    assert res.rejection is not None and res.rejection.reason == "internal_error"
    assert res.failed_stage == "state_size" and "state_size: OversizeError" in res.rejection.detail
    assert res.decision_bytes is None or res.rejection is not None  # no decision goes out
    kept = TraceState.decode(res.state_bytes)
    assert kept.last_step == 2 and kept.monitors == good.monitors and kept.history == good.history
    table["r"] = kept
    nxt = sealed(b(step("r", 3)), table.get, LIMITS, 3.0, SEM, key=b"r")
    assert nxt.rejection is None and nxt.decision is not None and nxt.decision["step"] == 3


def test_a_decision_over_its_cap_is_an_internal_error_too():
    tiny = Limits(max_decision_bytes=200)
    table = Table()
    res = sealed(b(run_start("r")), table.get, tiny, 1.0, SEM, key=b"r")
    assert res.rejection is not None and res.failed_stage == "state_size"
    assert "decision would be" in res.rejection.detail
    assert orjson.loads(b(run_start("r")))["run_id"] == "r"
