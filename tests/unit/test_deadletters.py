"""`rb-streams deadletters` without a broker: durations, filters and the line a record gets
(the reading itself: tests/integration/test_deadletters.py)."""

from __future__ import annotations

import orjson
import pytest

from streams import deadletters as dl


@pytest.mark.parametrize(
    ("raw", "seconds"), [("90", 90), ("30s", 30), ("10m", 600), ("2h", 7200), ("1.5d", 129600)]
)
def test_since_takes_a_duration(raw: str, seconds: float) -> None:
    assert dl.parse_since(raw) == seconds


@pytest.mark.parametrize("raw", ["", "ten minutes", "10 min", "-5m", "0", "5w"])
def test_since_refuses_anything_else_in_one_sentence(raw: str) -> None:
    with pytest.raises(ValueError, match="expected a positive duration"):
        dl.parse_since(raw)


def test_the_reasons_are_the_wire_contracts() -> None:
    from streams.worker.metrics import DEADLETTER_REASONS

    assert dl.reasons() == DEADLETTER_REASONS and "invalid_run_start" in dl.reasons()


RECORD = {
    "type": "deadletter",
    "schema_version": 1,
    "reason": "invalid_config",
    "detail": "unknown task_profile 'nonexistent'; known: ['coding', 'pr_review', 'qa']\n" + "x" * 300,
    "run_id": "run-1",
    "step": None,
    "original": "{}",
    "original_bytes": 2,
    "truncated": False,
    "source": None,
    "processed_ts": 1700000000.0,
}


def test_a_record_is_one_line_with_time_run_reason_step_and_a_cut_detail() -> None:
    rec = dl.record_of(b"run-1", orjson.dumps(RECORD), 0)
    text = dl.line(rec)
    assert "\n" not in text
    assert text.startswith(
        "2023-11-14T22:13:20Z  run-1  invalid_config  -  unknown task_profile 'nonexistent'"
    )
    assert len(text) < 250
    step = dl.line(dl.record_of(None, orjson.dumps({**RECORD, "step": 4}), 0))
    assert "  invalid_config  step 4  " in step


def test_a_record_that_is_not_one_is_still_one_line_at_its_kafka_time() -> None:
    rec = dl.record_of(None, b"\xff junk", 1_700_000_000_000)
    assert rec.data is None and dl.line(rec) == "2023-11-14T22:13:20Z  -  (not a dead-letter record: 6 bytes)"


def test_filters_match_run_by_id_or_key_and_reason_exactly() -> None:
    rec = dl.record_of(b"run-1", orjson.dumps(RECORD), 0)
    assert rec.matches(dl.Query()) and rec.matches(dl.Query(run="run-1", reason="invalid_config"))
    assert not rec.matches(dl.Query(run="run-2")) and not rec.matches(dl.Query(reason="invalid_json"))
    keyed = dl.record_of(b"run-3", b"not json", 0)  # no run_id to read: the key names the run
    assert keyed.matches(dl.Query(run="run-3"))
