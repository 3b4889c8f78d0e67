"""Waiting is not looping (issue 38): what makes a call one to wait on, and when a repeat of it
is spaced out in time. Pure functions of the step and the events' own times."""

from __future__ import annotations

from typing import Any

import pytest

from streams.core.monitors.waiting import (
    GAPS_KEPT,
    WAIT_BUDGET_S,
    WAITS_KEPT,
    advance,
    gap,
    kind,
    remember_gap,
    spaced,
)
from streams.core.reading.features import extract
from tests.factories import step


def read(observation: str, error: bool = False, **kw: Any) -> str:
    ev = step(
        "r", 1, action=kw.pop("action", "bash"), observation=observation, observation_is_error=error, **kw
    )
    ev.setdefault("action_input", {"command": "gh run view 4242 --json status"})
    return kind(extract(ev, 20_000))


@pytest.mark.parametrize(
    "observation",
    [
        '{"status": "in_progress"}',
        '{"status": "queued", "conclusion": null}',
        "NAME          READY   STATUS              RESTARTS   AGE\nweb-7d4b9c    0/1     ContainerCreating   0          20s",
        "web-7d4b9c    0/1     Init:0/2   0   5s",
        "state: running",
        "The deployment is not ready yet.",
        "Build still running (step 4 of 9)",
    ],
)
def test_a_result_saying_not_yet_is_a_pending_state(observation: str) -> None:
    assert read(observation) == "pending"


@pytest.mark.parametrize(
    "observation,error",
    [
        ("HTTP 503 Service Unavailable: please retry later", True),
        ('{"error": "429 Too Many Requests: rate limit exceeded"}', True),
        ("curl: (56) Recv failure: Connection reset by peer", True),
        ("requests.exceptions.ReadTimeout: Read timed out. (read timeout=10)", True),
        ("The service is temporarily unavailable, try again in a minute.", False),
        ("502 Bad Gateway", False),
    ],
)
def test_a_failure_of_the_moment_is_a_transient_error(observation: str, error: bool) -> None:
    assert read(observation, error) == "transient"


@pytest.mark.parametrize(
    "observation,error",
    [
        ("FAILED tests/test_x.py::test_x - AssertionError: 1 != 2", True),
        ("[Command timed out after 120 seconds. The command is still hung.]", True),  # it hung itself
        ('{"status": "completed", "conclusion": "success"}', False),
        ("web-7d4b9c    1/1     Running   0          140s", False),
        ("def retry(n):\n" + "    return n\n" * 200, False),  # a long file that names a retry is no error
        ("django/core/files/uploadedfile.py:class TemporaryUploadedFile(UploadedFile):", False),
        ("Address: https://example.test/Fandom_in_Contemporary_TV_Series", False),
    ],
)
def test_other_results_are_not_waited_on(observation: str, error: bool) -> None:
    assert read(observation, error) == ""


def test_a_file_opened_with_a_read_tool_is_content_not_a_pending_state() -> None:
    view = {"command": "view", "path": "django/db/models/query.py"}
    note = "   773\t        # trickier so it's not done yet.\n"
    assert read(note, action="str_replace_editor", action_input=view) == ""
    assert read(note) == "pending"  # the same text printed by a command: a status it polls


def test_a_command_that_only_sleeps_is_a_wait_and_an_edit_never_is() -> None:
    assert read("", action_input={"command": "sleep 30"}) == "sleep"
    assert read("", action_input={"command": "sleep 30 && rm -rf build"}) == ""
    assert (
        read(
            '{"status": "queued"}',
            action="str_replace_editor",
            action_input={"command": "create", "path": "a"},
        )
        == ""
    )


def test_a_repeat_is_spaced_when_real_time_passed_not_model_time() -> None:
    assert spaced(30.0, None, [])  # polling every 30 s
    assert not spaced(0.5, None, [])  # hammering
    assert not spaced(None, None, [])  # no timestamps: nothing is known to have passed
    usual = [8.0] * 4  # an agent whose every step takes 8 s of model time
    assert not spaced(12.0, None, usual)  # one more slow step is not a wait
    assert spaced(40.0, None, usual)
    assert spaced(2.0, 1.0, [])  # a backoff: the gap doubled
    assert spaced(4.0, 2.0, [])
    assert not spaced(1.5, 1.0, [])  # jitter, not a backoff
    assert not spaced(16.0, 8.0, [10.0] * 4)  # doubled, but no longer than two usual steps


def test_the_run_pace_is_learnt_only_from_ordinary_steps_and_stays_bounded() -> None:
    gaps: list[float] = []
    for k in range(3 * GAPS_KEPT):
        gaps = remember_gap(gaps, float(k), waits=False)
    assert len(gaps) == GAPS_KEPT and gaps[-1] == 3 * GAPS_KEPT - 1
    assert remember_gap(gaps, 999.0, waits=True) == gaps  # a wait's gap is not the run's pace
    assert remember_gap(gaps, None, waits=False) == gaps


def test_a_wait_is_advised_on_once_per_budget_and_ends_with_a_new_result() -> None:
    waits: list[list[Any]] = []
    advised = []
    for k in range(1, 100):  # a call every minute
        waits, due, _ = advance(waits, "ci", 0.0, 1, 60.0 * k, True, False, WAIT_BUDGET_S)
        if due is not None:
            advised.append((k, due.calls))
    assert [k for k, _ in advised] == [20, 40, 60, 80]
    waits, due, _ = advance(waits, "ci", 0.0, 1, 60.0 * 100, False, True, WAIT_BUDGET_S)
    assert waits == [] and due is None


def test_waits_stay_bounded_and_a_forgotten_one_expires() -> None:
    waits: list[list[Any]] = []
    for k in range(50):
        waits, _, _ = advance(waits, f"call{k}", float(k), k, float(k), True, False, WAIT_BUDGET_S)
    assert len(waits) == WAITS_KEPT
    waits, _, _ = advance(waits, "other", 1e6, 1, 1e6, False, False, WAIT_BUDGET_S)
    assert waits == []


def test_a_clock_that_runs_backwards_or_overflows_means_no_time_passed() -> None:
    assert gap(10.0, 5.0) is None
    assert gap(-1e308, 1e308) is None  # inf
    assert gap(None, 5.0) is None and gap(1.0, 31.0) == 30.0
    assert not spaced(gap(100.0, 0.0), None, [])
