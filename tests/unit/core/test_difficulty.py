from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core.difficulty import BUILTIN_SCORERS, DEFAULT_SCORER, on_thought
from streams.core.reading.features import extract
from streams.core.scoring.heuristic import heuristic_score as score_step
from streams.core.scoring.heuristic import signals


@pytest.mark.parametrize("text", ["", "   ", "\n\t", None, "!!! ...", "\u200b"])
def test_empty_text_scores_one_half(text):
    assert score_step(text) == 0.5


def test_score_is_the_documented_sigmoid_of_the_weighted_signals():
    text = 'maybe the error is in "src/app.py"'
    s = signals(text)
    raw = 0.30 * s["hedging"] + 0.25 * s["length"] + 0.25 * s["error"] + 0.20 * s["entity"]
    assert score_step(text) == pytest.approx(1 / (1 + math.exp(-6 * (raw - 0.5))))


def test_plain_short_text_is_easy():
    assert score_step("List the files.") < 0.2


def test_more_hedging_never_lowers_the_score():
    base = "I will open the config file and read the settings there carefully"
    a = score_step(base)
    b = score_step(base + " maybe")
    c = score_step(base + " maybe perhaps hmm")
    assert a < b < c


def test_more_error_language_never_lowers_the_score():
    base = "The command finished and printed its output to the console"
    a = score_step(base)
    b = score_step(base + " error")
    c = score_step(base + " error traceback exception")
    assert a < b < c


def test_entities_and_length_raise_the_score():
    assert score_step("look at src/a.py and pkg.mod.fn and 'x y'") > score_step("look at it")
    assert score_step("word " * 400) > score_step("word " * 10)


def test_length_signal_caps_at_500_words():
    assert signals("w " * 500)["length"] == 1.0
    assert signals("w " * 5000)["length"] == 1.0


def test_entity_signal_caps_at_10():
    assert signals(" ".join(f"a{i}.b{i}" for i in range(30)))["entity"] == 1.0


@given(st.text(max_size=3000))
def test_score_is_always_within_bounds(text):
    s = score_step(text)
    assert 0.0 <= s <= 1.0
    assert all(0.0 <= v <= 1.0 for v in signals(text).values())


def test_a_text_scorer_is_called_on_the_thought_cut_to_the_limit_and_keeps_no_memory():
    seen = []
    scorer = on_thought(lambda text: seen.append(text) or 0.3)
    d, mem = scorer(extract({"thought": "abcdef", "observation": "boom"}, 3), {"k": 1})
    assert (d, mem, seen) == (0.3, None, ["abc"])
    assert scorer(extract({"thought": None}, 3), None)[0] == 0.3 and seen[-1] is None


def test_both_built_in_scorers_exist_and_trajectory_is_the_default():
    assert set(BUILTIN_SCORERS) == {"heuristic", "trajectory"}
    assert DEFAULT_SCORER == "trajectory"
    assert BUILTIN_SCORERS["heuristic"](extract({"thought": "List the files."}, 100), None) == (
        score_step("List the files."),
        None,
    )


def test_the_built_in_scorers_cannot_be_changed():
    with pytest.raises(TypeError):
        BUILTIN_SCORERS["mine"] = BUILTIN_SCORERS["heuristic"]  # type: ignore[index]
