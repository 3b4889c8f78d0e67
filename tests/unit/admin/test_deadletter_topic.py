"""`rb-streams deadletters` without a broker: durations, filters and the line a record gets
(the reading itself: tests/integration/test_deadletters.py)."""

from __future__ import annotations

import orjson
import pytest

from streams.admin import deadletter_topic as dl


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


HOSTILE = "\x1b[2J\x1b[H\x9b31m forged line\nrb-streams: all good\r\u202e"


def test_every_field_of_a_record_is_escaped_on_its_line() -> None:
    """A dead-letter topic anyone can write (single-tenant mode) cannot clear the screen,
    colour it or start a forged line."""
    rec = dl.record_of(
        HOSTILE.encode(), orjson.dumps({**RECORD, "reason": HOSTILE, "run_id": HOSTILE, "detail": HOSTILE}), 0
    )
    text = dl.line(rec)
    assert text.isprintable() and "\x1b" not in text and "\x9b" not in text and "\n" not in text
    assert "\\x1b[2J" in text  # shown, escaped
    keyed = dl.line(dl.record_of(HOSTILE.encode(), orjson.dumps({**RECORD, "run_id": None}), 0))
    assert keyed.isprintable() and "\\x1b" in keyed  # no run_id: the key names the run, escaped


@pytest.mark.parametrize(
    "value",
    [
        b"\x1b[2J not json at all\n{}",  # not JSON: wrapped
        b'{"reason": "x", "detail": "\xc2\x9b31m C1 control"}',  # JSON with a raw C1 control
        b'{\n"reason":\n"multi-line"}',  # JSON over several lines
        b'{"reason": NaN}',  # what Python reads and strict JSON does not
        b"[1, 2]",  # JSON, not an object
    ],
)
def test_json_output_is_one_line_of_ascii_json_whatever_was_written(value: bytes) -> None:
    out = dl.json_line(dl.record_of(b"k\x1b", value, 1_700_000_000_000))
    assert out.isascii() and out.isprintable() and "\n" not in out
    parsed = orjson.loads(out)  # strict JSON
    assert isinstance(parsed, dict)
    if "not_a_deadletter" in parsed:
        assert parsed["bytes"] == len(value) and parsed["key"] == "k\x1b"


def test_a_dead_letter_is_printed_as_written_in_json() -> None:
    assert orjson.loads(dl.json_line(dl.record_of(b"run-1", orjson.dumps(RECORD), 0))) == RECORD


def test_the_limit_keeps_the_newest_records_across_partitions_oldest_first() -> None:
    def at(ts: float) -> dl.Record:
        return dl.record_of(None, orjson.dumps({**RECORD, "processed_ts": ts}), 0)

    old_partition = [at(t) for t in (1, 2, 3, 4)]  # read first, all older
    new_partition = [at(t) for t in (10, 11)]
    mixed = [at(t) for t in (5, 12)]
    got = dl.newest([new_partition, old_partition, mixed], 3)
    assert [r.ts for r in got] == [10, 11, 12]
    assert [r.ts for r in dl.newest([old_partition], 10)] == [1, 2, 3, 4]
