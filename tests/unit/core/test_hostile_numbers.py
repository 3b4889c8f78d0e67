"""No number poisons a run (issue 48: a price of 1e300 made a routed run's cost infinite, stored
as null, and every later event of the run an `internal_error: TypeError ... NoneType + float`).

Hostile numbers (huge, tiny, negative, NaN and infinity spelt as strings, 1e308, integers past
2**63, tokens orjson cannot hold) go into every numeric field of the wire contract, on routed
runs priced at the ceiling and by the prior, over many steps. Every event gets a decision or a
dead-letter with a reason (never `internal_error`), every number the run state holds is finite
(and an integer fits the encoders), the stored routing memory is sane, and the worker (which
decodes the stored bytes) and replay (which keeps the objects) decide alike. A state written
before the bounds, with nulls where numbers belong, is repaired on decode and the run goes on.
"""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.core import routing
from streams.core import state as state_module
from streams.core.events import Limits
from streams.core.policy import Policy
from streams.core.prices import NO_PRICES, PRICE_MAX, ModelPrice, PriceTable, parse_prices
from streams.core.state import TraceState
from streams.replay import Replayer
from tests.driving import sealed
from tests.factories import b, run_start, step
from tests.models import semantics

SEM = semantics()
LIMITS = Limits()
NOW = 1_767_225_600.0
# A table at the ceiling: the dearest prices a table may hold, for every model the runs name.
CEILING = parse_prices(
    {
        "models": {
            "big": {
                "input": PRICE_MAX,
                "cache_write": PRICE_MAX,
                "cache_read": PRICE_MAX,
                "output": PRICE_MAX,
            },
            "small": {"input": 1e-12, "output": 5e-12},
            "huge": {"input": PRICE_MAX, "output": PRICE_MAX, "cache_ttl_s": 30 * 86_400},
        }
    }
)
# Prices built in code skip the file's checks (a plugin, an embedding program): 1e300, the
# issue's price, then overflows a call's cost, which must saturate rather than poison the run.
ABSURD = PriceTable(
    MappingProxyType(
        {"big": ModelPrice(1e300, 1e300, 1e300, 1e300), "small": ModelPrice(1.0, 1.25, 0.1, 5.0)}
    )
)
POLICIES = {
    "ceiling": Policy().with_prices(CEILING),
    "prior": Policy().with_prices(NO_PRICES),
    "absurd": Policy().with_prices(ABSURD),
}


@dataclasses.dataclass(frozen=True)
class Raw:
    """A JSON number token no Python value encodes to (past 64 bits, past a double)."""

    token: bytes


HOSTILE: list[Any] = [
    0,
    1,
    -1,
    2**31 - 1,
    2**53,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64 - 1,
    -(2**63),
    1e308,
    -1e308,
    1.7976931348623157e308,
    5e-324,
    -5e-324,
    1e-300,
    -0.0,
    0.5,
    "NaN",
    "nan",
    "Infinity",
    "-inf",
    "1e999",
    "0x7fffffff",
    Raw(b"1e400"),
    Raw(b"-1e400"),
    Raw(b"1" + b"0" * 400),
    Raw(b"18446744073709551616"),
    Raw(b"-99999999999999999999999"),
    Raw(b"1e-400"),
]
number = st.one_of(
    st.sampled_from(HOSTILE),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**70), 2**70),
)
USAGE_KEYS = (
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    # not in the schema (ignored by it), but routing reads them: providers' own spellings
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
STEP_FIELDS = ("tokens", "difficulty", "ts", "action_input", "usage", "step")
START_FIELDS = ("ts", "token_budget", "monitor_weights", "monitor_thresholds", "fsm_thresholds", "escalation")


def encode(ev: dict[str, Any]) -> bytes:
    """The event's bytes; a Raw value or an integer past 64 bits is spliced in as a token."""
    raws: dict[str, bytes] = {}

    def place(v: Any) -> Any:
        if isinstance(v, Raw) or (type(v) is int and not -(2**63) <= v < 2**64):
            name = f"__raw{len(raws)}__"
            raws[name] = v.token if isinstance(v, Raw) else str(v).encode()
            return name
        if isinstance(v, dict):
            return {k: place(x) for k, x in v.items()}
        return v

    data = orjson.dumps(place(ev))
    for name, token in raws.items():
        data = data.replace(orjson.dumps(name), token, 1)
    return data


@st.composite
def hostile_run(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    """(policy name, the run's events): a routed run_start with some hostile numbers, then
    steps whose numbers are hostile, with a valid step now and then."""
    start = run_start(
        "h",
        model="big",
        model_routing=draw(st.sampled_from([{"FAST": "small", "SLOW": "huge"}, {"FAST": "small"}])),
        e_traces_enabled=False,
    )
    for name in draw(st.lists(st.sampled_from(START_FIELDS), max_size=2, unique=True)):
        v = draw(number)
        start[name] = {
            "monitor_weights": {"loop": v},
            "monitor_thresholds": {"loop": v},
            "fsm_thresholds": {"fast_threshold": v},
            "escalation": {"stop_after": v},
        }.get(name, v)
    events = [encode(start)]
    for n in range(1, draw(st.integers(5, 30)) + 1):
        ev = step(
            "h",
            n,
            usage={"input_tokens": 2**53, "output_tokens": 2**53},
            thought=draw(st.sampled_from(["Run the tests.", "Check it again.", "x" * 3000])),
            observation=draw(st.sampled_from(["1 failed", "ok", "pending, try again"])),
        )
        for name in draw(st.lists(st.sampled_from(STEP_FIELDS), max_size=3, unique=True)):
            if name == "usage":
                keys = draw(st.lists(st.sampled_from(USAGE_KEYS), min_size=1, max_size=4, unique=True))
                ev["usage"] = {k: draw(number) for k in keys}
            elif name == "step":
                if draw(st.integers(0, 3)) == 0:
                    ev["step"] = draw(number)
            else:
                ev[name] = draw(number)
        events.append(encode(ev))
    return draw(st.sampled_from(sorted(POLICIES))), events


def bad_numbers(obj: Any, path: str = "state") -> list[str]:
    """Where `obj` (a state as held in memory: dataclasses, slotted ones, dicts, lists) holds a
    float that is not finite, or an integer the encoders cannot hold."""
    bad: list[str] = []
    stack: list[tuple[Any, str]] = [(obj, path)]
    while stack:
        v, where = stack.pop()
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                bad.append(f"{where} = {v!r}")
        elif isinstance(v, int):
            if not -(2**63) <= v < 2**64:
                bad.append(f"{where} = {v!r}")
        elif isinstance(v, dict):
            stack.extend((x, f"{where}.{k}") for k, x in v.items())
        elif isinstance(v, list | tuple):
            stack.extend((x, f"{where}[{i}]") for i, x in enumerate(v))
        elif dataclasses.is_dataclass(v):
            stack.extend((getattr(v, f.name), f"{where}.{f.name}") for f in dataclasses.fields(v))
    return bad


def worker_and_replay(policy: Policy, events: list[bytes]) -> list[tuple[Any, Any]]:
    """Feed `events` to a worker-like table (the state decoded from its stored bytes at every
    event, as after a restart) and to replay; check each answer and state on the way."""
    rp = Replayer(sem=SEM, clock=lambda: NOW, policy=policy)
    stored: dict[str, bytes] = {}
    answers = []
    for raw in events:
        s = sealed(
            raw,
            lambda rid: TraceState.decode(stored[rid]) if rid in stored else None,
            LIMITS,
            NOW,
            SEM,
            policy=policy,
        )
        decision, dead = rp.feed(raw)
        if s.deadletter is not None:
            assert s.deadletter["reason"] != "internal_error", s.deadletter["detail"]
            assert s.deadletter["detail"]
        else:
            assert s.decision is not None or s.state is not None
        if s.state_bytes is not None and s.state is not None:
            assert bad_numbers(s.state) == []
            assert s.state.routing is None or routing.sane(s.state.routing), s.state.routing
            back = TraceState.decode(s.state_bytes)
            assert back.encode() == s.state_bytes  # nothing was written as null that was a number
            assert back.routing == s.state.routing
            stored[s.run_id or ""] = s.state_bytes
        mine = None if s.decision_bytes is None else orjson.loads(s.decision_bytes)
        theirs = None if decision is None else orjson.loads(orjson.dumps(decision))
        assert mine == theirs  # worker and replay: the same rule, the same decision
        assert (s.deadletter or {}).get("reason") == (dead or {}).get("reason")
        answers.append((mine, s.deadletter))
    return answers


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(hostile_run())
def test_hostile_numbers_never_make_a_stored_number_infinite_or_an_event_an_internal_error(
    run: tuple[str, list[bytes]],
) -> None:
    name, events = run
    worker_and_replay(POLICIES[name], events)


def test_usage_at_the_wire_maximum_on_the_ceiling_prices_saturates_the_cost_and_the_run_goes_on() -> None:
    """The issue's run, within what a table may now say: every call at 2**53 tokens on models
    priced at the ceiling, and the run's time jumping from -1e308 to 1e308."""
    start = run_start(
        "h", model="big", model_routing={"FAST": "small", "SLOW": "huge"}, ts=-1e308, e_traces_enabled=False
    )
    usage = {k: 2**53 for k in USAGE_KEYS[:4]}
    steps = [
        step("h", n, usage=usage, tokens=2**53, difficulty=0.05, ts=(1e308 if n % 2 else -1e308))
        for n in range(1, 41)
    ]
    answers = worker_and_replay(POLICIES["ceiling"], [b(start), *map(b, steps)])
    assert all(d is not None and dead is None for d, dead in answers)
    assert all(d["routing_reason"] for d, _ in answers)
    assert all(d["tokens_used"] <= 2**53 for d, _ in answers)


# The stored failing example: a waited call (a pending result, repeated) whose wait began at
# a step with `ts` -1e23. The wait's length is then ~1e23 s, and the budgets advised on
# (`Wait.advised`, a count) came to ~8e19, past 64 bits: the state failed to encode and the
# event was an internal_error, on every policy.
_LONG_AGO_USAGE = b'"usage":{"input_tokens":9007199254740992,"output_tokens":9007199254740992}'
LONG_AGO_WAIT = [
    b'{"type":"run_start","schema_version":1,"run_id":"h","ts":1700000000.0,"model":"big",'
    b'"model_routing":{"FAST":"small","SLOW":"huge"},"e_traces_enabled":false}',
    *(
        b'{"type":"step","schema_version":1,"run_id":"h","step":%d,"thought":"Run the tests.",'
        b'"action":"read_file","action_input":{"path":"a.py"},"observation":"%s",'
        b'"observation_is_error":false,"tokens":100,"model_id":"m","ts":%s,%s}'
        % (n, obs, ts, _LONG_AGO_USAGE)
        for n, obs, ts in [
            (1, b"1 failed", b"1700000001.0"),
            (2, b"1 failed", b"1700000002.0"),
            (3, b"pending, try again", b"-99999999999999999999999"),
            (4, b"pending, try again", b"1700000004.0"),
            (5, b"1 failed", b"1700000005.0"),
        ]
    ),
]


def test_a_wait_begun_at_a_time_far_in_the_past_counts_its_budgets_within_64_bits() -> None:
    for name in sorted(POLICIES):
        answers = worker_and_replay(POLICIES[name], LONG_AGO_WAIT)
        assert all(dead is None for _, dead in answers), (name, answers)


def test_a_waits_advised_budgets_are_clamped_and_not_advised_on_again_past_the_cap() -> None:
    from streams.core.monitors import waiting

    kept, due, mine = waiting.advance([], "k", -1e23, 3, 1.7e9, True, False, 1200.0)
    assert due is not None and due.advised == routing.COUNT_MAX and bad_numbers(kept) == []
    assert orjson.loads(orjson.dumps(kept)) == kept
    kept, due, mine = waiting.advance(kept, "k", -1e23, 3, 3e3, True, False, 1200.0)
    assert due is None and mine is not None and mine.advised == routing.COUNT_MAX


HUGE_COUNT = "9" * 40  # past 64 bits
RUNNER_SUMMARIES = [
    f"==== {HUGE_COUNT} failed, {HUGE_COUNT} passed in 1.0s ====",
    f"Ran {HUGE_COUNT} tests in 1s\nFAILED (failures={HUGE_COUNT})",
    f"Tests run: {HUGE_COUNT}, Failures: {HUGE_COUNT}, Errors: {HUGE_COUNT}",
    f"Tests:  {HUGE_COUNT} failed, {HUGE_COUNT} passed, {HUGE_COUNT} total",
    f"test result: ok. {HUGE_COUNT} passed; {HUGE_COUNT} failed",
    f"  {HUGE_COUNT} passing\n  {HUGE_COUNT} failing",
    f"==== {'9' * 5000} failed in 1.0s ====",  # past what `int` parses from a string
]


def test_a_test_runner_summary_with_counts_past_64_bits_is_read_clamped_and_the_run_goes_on() -> None:
    """The counts a result's test summary prints are producer input too: stored in the run's
    state (the trajectory scorer's `tests`), they once failed its encoding (an internal_error)."""
    from streams.core.reading.observation import test_counts

    for text in RUNNER_SUMMARIES:
        got = test_counts(text)
        assert got is not None and all(0 <= n <= routing.COUNT_MAX for n in got), (text[:40], got)
    assert test_counts("==== 1 failed, 007 passed in 1.0s ====") == (1, 7)
    evs = [b(run_start("h", model="big", model_routing={"FAST": "small"}, e_traces_enabled=False))]
    for n in range(1, 2 * len(RUNNER_SUMMARIES) + 1):
        text = RUNNER_SUMMARIES[n % len(RUNNER_SUMMARIES)]
        evs.append(
            b(step("h", n, action="run", action_input={"cmd": "pytest"}, observation=text, ts=1.7e9 + 20 * n))
        )
    for name in sorted(POLICIES):
        assert all(dead is None for _, dead in worker_and_replay(POLICIES[name], evs)), name


POISON: list[Any] = [None, "NaN", -1, -1e308, 1e308, 2**64 - 1, [], {}, "x", True, [None, None]]
MEMORY_KEYS = sorted([*routing.start(None, None, 0.0), "cost", "base", "b", "dollars"])


def _feed(stored: dict[str, bytes], ev: dict[str, Any]) -> Any:
    """One event through the worker's path: the run's state decoded from its stored bytes."""
    s = sealed(
        b(ev),
        lambda rid: TraceState.decode(stored[rid]) if rid in stored else None,
        LIMITS,
        NOW,
        SEM,
        policy=POLICIES["ceiling"],
    )
    assert s.deadletter is None and s.state is not None and s.state_bytes is not None, s.deadletter
    stored[ev["run_id"]] = s.state_bytes
    return s


def _routed_state() -> tuple[TraceState, bytes]:
    """A routed run after a few steps, as stored."""
    stored: dict[str, bytes] = {}
    for ev in [run_start("h", model="big", model_routing={"FAST": "small"}, e_traces_enabled=False)] + [
        step("h", n, difficulty=0.05, usage={"input_tokens": 1000, "output_tokens": 200}) for n in (1, 2, 3)
    ]:
        s = _feed(stored, ev)
    return s.state, stored["h"]


def test_a_state_stored_with_null_costs_by_earlier_code_is_repaired_and_the_run_keeps_its_decisions() -> None:
    """The issue's poisoned state: the costs (and a time) written as null. Decoded, the memory
    is sane, what held is kept, and the next events are decided."""
    _, raw = _routed_state()
    d = orjson.loads(raw)
    kept = {k: d["routing"][k] for k in ("calls", "ctx", "out", "on")}
    d["routing"].update(cost=None, base=None, t=None)
    st_ = TraceState.decode(orjson.dumps(d))
    assert st_.routing is not None and routing.sane(st_.routing)
    assert {k: st_.routing[k] for k in kept} == kept and st_.routing["cost"] == 0.0
    stored = {"h": orjson.dumps(d)}
    for n in (4, 5, 6):
        assert _feed(stored, step("h", n, difficulty=0.05)).decision is not None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(MEMORY_KEYS), st.sampled_from(POISON)), min_size=1, max_size=4))
def test_any_poisoned_routing_memory_decodes_sane_and_the_run_is_decided(
    poison: list[tuple[str, Any]],
) -> None:
    _, raw = _routed_state()
    d = orjson.loads(raw)
    for key, value in poison:
        if key == "used" and isinstance(value, list):
            d["routing"]["used"] = {"big": value}
        else:
            d["routing"][key] = value
    stored = {"h": orjson.dumps(d)}
    assert routing.sane(TraceState.decode(stored["h"]).routing)
    for n in (4, 5):
        s = _feed(stored, step("h", n, difficulty=0.05))
        assert bad_numbers(s.state) == [] and routing.sane(s.state.routing)


def test_a_sane_memory_is_kept_as_it_is() -> None:
    st_, _ = _routed_state()
    assert st_.routing is not None and routing.recover(st_.routing) is st_.routing


STATE_NUMBERS = sorted(
    [*state_module._COUNTS, *state_module._TIMES, "history", "last_monitor_injection_step"]
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(STATE_NUMBERS), st.sampled_from(POISON)), min_size=1, max_size=4))
def test_a_state_with_any_of_its_own_numbers_poisoned_decodes_and_no_event_is_an_internal_error(
    poison: list[tuple[str, Any]],
) -> None:
    """Not only routing's: a null (or a string, a list, a number past every bound) in a count, a
    time or the score history is repaired on decode. The run's next events are decided, or
    dead-lettered for what they are (a step behind a repaired `last_step` is out of order)."""
    _, raw = _routed_state()
    d = orjson.loads(raw)
    for key, value in poison:
        d[key] = [0.5, value] if key == "history" and not isinstance(value, list) else value
    stored = {"h": orjson.dumps(d)}
    back = TraceState.decode(stored["h"])
    assert bad_numbers(back) == [] and all(type(getattr(back, k)) is int for k in state_module._COUNTS)
    for n in (4, 5):
        s = sealed(
            b(step("h", n, difficulty=0.05)),
            lambda rid: TraceState.decode(stored[rid]),
            LIMITS,
            NOW,
            SEM,
            policy=POLICIES["ceiling"],
        )
        if s.deadletter is not None:
            assert s.deadletter["reason"] != "internal_error", s.deadletter["detail"]
            continue
        assert s.state is not None and s.state_bytes is not None and bad_numbers(s.state) == []
        stored["h"] = s.state_bytes


def test_a_state_the_engine_wrote_decodes_to_the_same_bytes() -> None:
    """The repairs leave a sane state exactly as stored (replay keeps objects, the worker bytes)."""
    _, raw = _routed_state()
    assert TraceState.decode(raw).encode() == raw
