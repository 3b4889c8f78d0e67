from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.events import Limits, Rejected, decode, validator
from streams.shared.contract import STEP_MAX, TOKENS_MAX, fast_validator, load_schema
from tests.factories import b, run_finish, run_start, step

BOUNDARY_NUMBERS = [0, -1, 1.0, 0.0, 2.0, 1e3, 2**31 - 1, 2**31, 2**53, 2**53 + 1, 2**63, 2**64 - 1, 2.0**64]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from(BOUNDARY_NUMBERS)
    | st.floats(-2, 2, allow_nan=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=6,
)
BASES = {
    "run_start": run_start("r", model_routing={"FAST": "m"}),
    "step": step("r", 2),
    "run_finish": run_finish("r"),
}


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(sorted(BASES)),
    st.dictionaries(
        st.sampled_from(
            [
                "run_id",
                "step",
                "thought",
                "tokens",
                "difficulty",
                "model_routing",
                "outcome",
                "token_budget",
                "e_traces_enabled",
                "action_input",
                "fsm_thresholds",
                "org_id",
                "type",
                "observation_is_error",
                "usage",
                "served_model",
                "x",
            ]
        ),
        json_values,
        max_size=3,
    ),
)
def test_fast_validator_agrees_with_the_reference_validator(name, mutation):
    ev = {**BASES[name], **mutation}
    ref = validator(name).is_valid(ev)
    try:
        fast_validator(name)(ev)
        fast = True
    except Exception:
        fast = False
    assert fast == ref, ev


def test_both_validators_take_no_float_for_an_integer():
    assert not validator("step").is_valid(step("r", 1.0))
    with pytest.raises(Exception, match="integer"):
        fast_validator("step")(step("r", 2.0))
    decision = {"step": 1.0, "tokens_used": 5.0}
    bad = {e.absolute_path[0] for e in validator("decision").iter_errors(decision) if e.validator == "type"}
    assert bad == {"step", "tokens_used"}


def test_schema_maxima_are_the_stated_bounds():
    props = load_schema("step")["properties"]
    assert props["step"]["maximum"] == STEP_MAX and props["tokens"]["maximum"] == TOKENS_MAX
    counts = props["usage"]["properties"]
    for name in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"):
        assert counts[name]["minimum"] == 0 and counts[name]["maximum"] == TOKENS_MAX
    assert load_schema("run_start")["properties"]["token_budget"]["maximum"] == TOKENS_MAX
    dec = load_schema("decision")["properties"]
    assert dec["step"]["maximum"] == STEP_MAX and dec["tokens_used"]["maximum"] == TOKENS_MAX


@pytest.mark.parametrize(
    "raw",
    [
        b(step("r", 1.0)),
        b(step("r", 1, tokens=5.0)),
        b(run_start("r", token_budget=1e3)),
        b'{"type":"step","schema_version":1,"run_id":"r","step":18446744073709551616}',
        b'{"type":"step","schema_version":1,"run_id":"r","step":2147483648}',
        b'{"type":"step","schema_version":1,"run_id":"r","step":1,"tokens":9007199254740993}',
        b'{"type":"step","schema_version":1.0,"run_id":"r","step":1}',
        b(step("r", 1, usage={"input_tokens": 1.0})),
        b(step("r", 1, usage={"cache_read_tokens": 2**53 + 1})),
        b(step("r", 1, usage={"output_tokens": -1})),
    ],
)
def test_inexact_or_out_of_range_integers_are_schema_violations(raw):
    with pytest.raises(Rejected) as err:
        decode(raw, Limits())
    assert err.value.reason == "schema_violation"


def test_a_deeply_nested_violation_is_explained_without_recursion():
    deep = b"[" * 1000 + b"1" + b"]" * 1000
    raw = (
        b'{"type":"step","schema_version":1,"run_id":"r","step":1,"tokens":"x","action_input":' + deep + b"}"
    )
    with pytest.raises(Rejected) as err:
        decode(raw, Limits())
    assert err.value.reason == "schema_violation" and "tokens" in err.value.detail


def test_a_too_large_event_keeps_the_run_id_and_step_its_head_names():
    """Its dead-letter (and the dead-letter's key) names the run, so `deadletters --run` finds it."""
    big = orjson.dumps(
        {"type": "step", "schema_version": 1, "run_id": "r-7", "step": 3, "thought": "x" * 300_000}
    )
    with pytest.raises(Rejected) as exc:
        decode(big, Limits())
    assert (exc.value.reason, exc.value.run_id, exc.value.step) == ("too_large", "r-7", 3)
    # nothing to go on (or only inside a text, escaped): no run id rather than a wrong one
    for raw in (b"x" * 300_000, orjson.dumps({"thought": '"run_id":"victim"' + "x" * 300_000})):
        with pytest.raises(Rejected) as exc:
            decode(raw, Limits())
        assert exc.value.reason == "too_large" and exc.value.run_id is None


def test_a_steps_usage_and_served_model_are_optional_and_checked():
    usage = {"input_tokens": 35, "cache_read_tokens": 18000, "cache_write_tokens": 1200, "output_tokens": 240}
    ev = decode(
        b(step("r", 1, usage={**usage, "estimated": False}, served_model="claude-haiku-4-5-20251001")),
        Limits(),
    )
    assert ev["usage"]["cache_read_tokens"] == 18000 and ev["served_model"] == "claude-haiku-4-5-20251001"
    decode(b(step("r", 1, usage=None, served_model=None)), Limits())  # null is "not reported"
    decode(b(step("r", 1, usage={"output_tokens": 3, "a_later_count": 1})), Limits())  # unknown keys ignored
    for bad in ({"estimated": "yes"}, [1, 2], "lots"):
        with pytest.raises(Rejected) as err:
            decode(b(step("r", 1, usage=bad)), Limits())
        assert err.value.reason == "schema_violation"
    with pytest.raises(Rejected):
        decode(b(step("r", 1, served_model="m" * 257)), Limits())


@pytest.mark.parametrize(
    ("field", "meant"),
    [("escalaton", "escalation"), ("modle_routing", "model_routing"), ("task_profle", "task_profile")],
)
def test_a_run_start_with_an_unknown_field_is_invalid_run_start_naming_it_with_a_suggestion(
    field: str, meant: str
) -> None:
    with pytest.raises(Rejected) as err:
        decode(b(run_start("r", **{field: {}})), Limits())
    assert err.value.reason == "invalid_run_start"
    assert err.value.run_id == "r"
    assert err.value.detail == f"unknown field {field!r}; did you mean {meant!r}?"


def test_a_run_starts_extensions_stay_open_and_known_fields_are_unchanged() -> None:
    ev = run_start("r", extensions={"my_team": {"anything": [1, "x"]}}, metadata={"k": "v"})
    got = decode(b(ev), Limits())
    assert {k: got[k] for k in ev} == ev  # (the schema's defaults are filled in beside)
    plain = run_start("r", task="t", model="m", model_routing={"FAST": "small"}, token_budget=100)
    got = decode(b(plain), Limits())
    assert {k: got[k] for k in plain} == plain
