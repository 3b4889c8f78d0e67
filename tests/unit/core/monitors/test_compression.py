"""cyclic_compression: re-summarising to the same state without progress."""

from __future__ import annotations

from .trajectories import Run, bash, edit, step

CHURN = "cyclic_compression"
RECAP = (
    "Summary so far: the task is to fix the flaky upload test. I looked at tests/test_upload.py and "
    "uploader.py; the test fails intermittently with a timeout. Next I should inspect the retry logic."
)


def test_same_recap_three_times_without_progress_fires(sem):
    run = Run(sem, task="Fix the flaky upload test")
    run.feed(step(RECAP), bash("cat uploader.py | head", "def upload(...): ..."))
    run.feed(step(RECAP.replace("Next I should", "Next, I should")))
    assert CHURN not in run.results[-1].fired
    res = run.feed(bash("ls tests", "test_upload.py"), step(RECAP))
    assert CHURN in res.fired
    assert "re-summarised" in res.text
    # a file read and a directory listed came between: never "no new changes or findings"
    assert "at most 1 step of new work" in res.text and "no new changes" not in res.text


def test_recaps_with_changes_between_do_not_fire(sem):
    run = Run(sem, task="Fix the flaky upload test")
    for i in range(4):
        run.feed(step(RECAP))
        run.feed(edit(f"src/upload_{i}.py", "a", "b"), edit(f"src/retry_{i}.py", "a", "b"))
    assert not run.fired_anywhere(CHURN)


def test_condensation_events_are_summaries(sem):
    run = Run(sem)
    for _ in range(4):
        run.feed(step("", "condense", None, RECAP))
    assert run.fired_anywhere(CHURN)


def test_recaps_with_new_listings_and_reads_between_do_not_fire(sem):
    # a listing of another directory is a finding even when it holds the same names
    run = Run(sem, task="Fix the flaky upload test")
    for i in range(8):
        run.feed(step(RECAP), bash(f"ls {i}", "upload.py\nretry.py"))
        if i % 2 == 0:
            run.feed(bash(f"cat notes{i}.txt", f"note {i}: retry twice"))
    assert not run.fired_anywhere(CHURN)


def test_recaps_with_the_same_read_again_between_still_fire(sem):
    run = Run(sem)
    run.feed(bash("cat uploader.py", "def upload(): ..."))
    for _ in range(4):
        run.feed(step(RECAP), bash("cat uploader.py", "def upload(): ..."))
    fired = [r for r in run.results if CHURN in r.fired]
    assert fired and "no new changes or findings in between" in (fired[0].text or "")
