from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.fsm import (
    BUILTIN_TRANSITIONS,
    MAX_WINDOW,
    DifficultyFSM,
    FSMParams,
    FSMState,
    validate_params,
)
from streams.core.policy import Policy

S = FSMState
fsm = DifficultyFSM()


def run(scores: list[float], start: FSMState = S.INIT, machine: DifficultyFSM = fsm) -> list[FSMState]:
    """States after each score, feeding the full history each time."""
    state, out, hist = start, [], []
    for x in scores:
        hist.append(x)
        state = machine.transition(state, hist)
        out.append(state)
    return out


def test_states_are_uppercase_names():
    assert [s.value for s in S] == ["INIT", "FAST", "NORMAL", "SLOW", "SKIP", "END"]
    assert all(s.value == s.name for s in S)


def test_defaults_match_the_spec_table():
    p = DifficultyFSM().params
    assert (p.fast_threshold, p.slow_threshold, p.skip_threshold, p.hysteresis_margin) == (
        0.2,
        0.6,
        0.85,
        0.1,
    )
    assert (p.fast_window, p.slow_window, p.skip_window) == (6, 5, 35)
    assert DifficultyFSM().fast_window == 6


@pytest.mark.parametrize("score", [0.0, 0.5, 0.99, 1.0])
def test_init_goes_to_normal_on_first_scored_step_whatever_the_score(score):
    assert fsm.transition(S.INIT, [score]) is S.NORMAL


def test_init_with_empty_history_stays():
    assert fsm.transition(S.INIT, []) is S.INIT


def test_normal_to_fast_needs_six_scores_strictly_below_threshold():
    assert run([0.1] * 6)[-1] is S.FAST
    assert run([0.1] * 6) == [S.NORMAL] * 5 + [S.FAST]


def test_fast_threshold_itself_is_not_easy():
    assert run([0.1] * 5 + [0.2])[-1] is S.NORMAL
    assert run([0.2] * 10)[-1] is S.NORMAL
    assert run([0.19999] * 6)[-1] is S.FAST


def test_fast_window_shorter_history_stays_normal():
    assert run([0.0] * 5) == [S.NORMAL] * 5


def test_normal_to_slow_needs_five_scores_strictly_above_threshold():
    assert run([0.7] * 5) == [S.NORMAL] * 4 + [S.SLOW]
    assert run([0.6] * 10)[-1] is S.NORMAL
    assert run([0.7] * 4 + [0.6])[-1] is S.NORMAL
    assert run([0.60001] * 5)[-1] is S.SLOW


def test_fast_wins_over_slow_when_both_could_hold():
    # Impossible with default thresholds, but with a tiny window and equal-ish thresholds
    # the spec's order (FAST checked first) decides.
    m = DifficultyFSM(fast_threshold=0.5, slow_threshold=0.55, fast_window=1, slow_window=1)
    assert m.transition(S.NORMAL, [0.1]) is S.FAST
    assert m.transition(S.NORMAL, [0.9]) is S.SLOW


def test_fast_exits_only_strictly_above_fast_plus_margin():
    base = [0.1] * 6
    h = [*base, 0.3]
    assert fsm.transition(S.FAST, h) is S.FAST  # 0.3 is not > 0.3
    assert fsm.transition(S.FAST, [*base, 0.30001]) is S.NORMAL
    assert fsm.transition(S.FAST, [*base, 0.25]) is S.FAST  # hysteresis: above 0.2 is not enough


def test_slow_exits_only_strictly_below_slow_minus_margin():
    base = [0.7] * 5
    assert fsm.transition(S.SLOW, [*base, 0.5]) is S.SLOW  # 0.5 is not < 0.5
    assert fsm.transition(S.SLOW, [*base, 0.49999]) is S.NORMAL
    assert fsm.transition(S.SLOW, [*base, 0.55]) is S.SLOW  # below 0.6 is not enough


def test_skip_only_from_slow_after_35_scores_strictly_above_skip_threshold():
    seq = [0.9] * 35
    states = run(seq)
    assert states[4] is S.SLOW
    assert states[33] is S.SLOW
    assert states[34] is S.SKIP  # the 35th score
    assert S.SKIP not in states[:34]


def test_skip_threshold_itself_does_not_count():
    assert run([0.9] * 34 + [0.85])[-1] is S.SLOW
    assert run([0.85] * 60)[-1] is S.SLOW


def test_normal_never_jumps_to_skip():
    assert fsm.transition(S.NORMAL, [0.99] * 40) is S.SLOW


def test_skip_exits_to_normal_below_slow_minus_margin_else_stays():
    h = [0.9] * 35
    assert fsm.transition(S.SKIP, [*h, 0.5]) is S.SKIP
    assert fsm.transition(S.SKIP, [*h, 0.7]) is S.SKIP
    assert fsm.transition(S.SKIP, [*h, 0.49]) is S.NORMAL


def test_end_is_terminal():
    assert fsm.transition(S.END, [0.0] * 10) is S.END
    assert fsm.transition(S.END, [1.0] * 50) is S.END


def test_builtin_never_returns_end():
    assert S.END not in run([0.0] * 10 + [1.0] * 50 + [0.3] * 5)


def test_overrides_change_the_rules():
    m = DifficultyFSM(fast_threshold=0.15, fast_window=8, slow_window=4, slow_threshold=0.65)
    assert run([0.1] * 7, machine=m)[-1] is S.NORMAL
    assert run([0.1] * 8, machine=m)[-1] is S.FAST
    assert run([0.16] * 8, machine=m)[-1] is S.NORMAL
    assert run([0.7] * 4, machine=m)[-1] is S.SLOW
    assert run([0.65] * 4, machine=m)[-1] is S.NORMAL


def test_override_of_margin_moves_both_exits():
    m = DifficultyFSM(hysteresis_margin=0.0)
    assert m.transition(S.FAST, [0.1] * 6 + [0.21]) is S.NORMAL
    assert m.transition(S.SLOW, [0.7] * 5 + [0.59]) is S.NORMAL


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fast_threshold": 1.5}, "fast_threshold must be within"),
        ({"slow_threshold": -0.1}, "slow_threshold must be within"),
        ({"fast_window": 0}, "fast_window must be within"),
        ({"skip_window": MAX_WINDOW + 1}, "skip_window must be within"),
        ({"fast_window": 2.5}, "fast_window must be an integer"),
        ({"fast_threshold": "0.1"}, "fast_threshold must be a number"),
        ({"fast_threshold": True}, "fast_threshold must be a number"),
        ({"fast_threshold": 0.7}, "must be below slow_threshold"),
        ({"fast_threshold": 0.6, "slow_threshold": 0.6}, "must be below slow_threshold"),
        ({"skip_threshold": 0.5}, "skip_threshold"),
        ({"fast_threshold": float("nan")}, "fast_threshold must be within"),
    ],
)
def test_invalid_overrides_raise_a_clear_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DifficultyFSM(**kwargs)


def test_unknown_override_names_are_rejected():
    with pytest.raises(ValueError, match="unknown fsm_thresholds parameter"):
        validate_params({"fast_treshold": 0.1})


def test_validate_params_keeps_defaults_for_unspecified():
    p = validate_params({"slow_window": 3})
    assert p == FSMParams(slow_window=3)


def test_custom_transition_can_end_a_run():
    def end_after_3(current, history, params):
        return S.END if len(history) >= 3 else S.NORMAL

    fn = Policy().with_transition("test_end_after_3", end_after_3).transition("test_end_after_3")
    assert fn(S.NORMAL, [0.5, 0.5], FSMParams()) is S.NORMAL
    assert fn(S.NORMAL, [0.5] * 3, FSMParams()) is S.END


def test_unknown_transition_name_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown fsm_transition 'nope'"):
        Policy().transition("nope")


def test_end_on_skip_ends_a_run_where_default_would_skip():
    params = FSMParams(skip_window=2)
    history = [0.9, 0.9]
    assert BUILTIN_TRANSITIONS["default"](S.SLOW, history, params) is S.SKIP
    assert BUILTIN_TRANSITIONS["end_on_skip"](S.SLOW, history, params) is S.END
    assert BUILTIN_TRANSITIONS["end_on_skip"](S.NORMAL, [0.5], params) is S.NORMAL


def test_bounded_window_gives_the_same_answer_as_full_history():
    # The worker only keeps max_window scores; the answer must not change.
    import random

    rnd = random.Random(7)
    full: list[float] = []
    state_full = state_win = S.INIT
    for _ in range(2000):
        full.append(rnd.choice([0.05, 0.1, 0.4, 0.7, 0.9, 0.95]))
        state_full = fsm.transition(state_full, full)
        state_win = fsm.transition(state_win, full[-fsm.params.max_window :])
        assert state_full is state_win


scores = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(scores, min_size=1, max_size=80))
def test_fast_never_entered_with_fewer_than_fast_window_scores(seq):
    states = run(seq)
    for i, s in enumerate(states):
        if s is S.FAST:
            assert i + 1 >= 6


@settings(max_examples=300, deadline=None)
@given(st.lists(scores, min_size=1, max_size=80))
def test_every_entry_into_fast_or_slow_is_justified_by_its_window(seq):
    states = run(seq)
    prev = S.INIT
    for i, s in enumerate(states):
        if prev is S.NORMAL and s is S.FAST:
            assert all(x < 0.2 for x in seq[i - 5 : i + 1])
        if prev is S.NORMAL and s is S.SLOW:
            assert all(x > 0.6 for x in seq[i - 4 : i + 1])
        if s is S.SKIP and prev is not S.SKIP:
            assert prev is S.SLOW
            assert i + 1 >= 35 and all(x > 0.85 for x in seq[i - 34 : i + 1])
        prev = s


@settings(max_examples=300, deadline=None)
@given(st.lists(scores, min_size=1, max_size=80))
def test_exits_respect_hysteresis(seq):
    states = run(seq)
    prev = S.INIT
    for i, s in enumerate(states):
        if prev is S.FAST and s is S.NORMAL:
            assert seq[i] > 0.3
        if prev is S.FAST and s is S.FAST:
            assert seq[i] <= 0.3
        if prev in (S.SLOW, S.SKIP) and s is S.NORMAL:
            assert seq[i] < 0.5
        if prev in (S.SLOW, S.SKIP) and s not in (S.NORMAL,):
            assert seq[i] >= 0.5
        # no direct FAST <-> SLOW/SKIP jumps
        assert not (prev is S.FAST and s in (S.SLOW, S.SKIP))
        assert not (prev in (S.SLOW, S.SKIP) and s is S.FAST)
        assert s is not S.INIT
        prev = s
