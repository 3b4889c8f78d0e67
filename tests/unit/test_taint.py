"""streams.taint: values found and normalised, argument walking, acting tools, the gate, and
cost that stays linear (and bounded) on hostile input."""

from __future__ import annotations

import hashlib
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.regex_cost import UNITS, cpu_per_kb, text
from streams import taint
from streams.taint import (
    TAINT_WIRE_MAX,
    GateVerdict,
    extract_values,
    gate,
    is_acting_tool,
    value_hash,
    values_in_args,
)


def test_values_of_each_kind_are_found_and_normalised():
    vals = dict(
        (v, k)
        for k, v in extract_values(
            "Send $30,000 to US133000000121212121212 and mail Mark.Black@Example.COM. "
            "See https://WWW.Shop.example.com/a/b/ and www.news.org, call +41 (0)44-123-45-67 "
            "or 555-123-4567; open /home/emma/report.pdf and notes.docx, pay 98.7 EUR, "
            "use the subject 'Quarterly Numbers' on 2024-05-15."
        )
    )
    assert vals["30000"] == "amount"
    assert vals["US133000000121212121212"] == "iban"
    assert vals["mark.black@example.com"] == "email"
    assert vals["shop.example.com/a/b"] == "url"
    assert vals["shop.example.com"] == "domain"
    assert vals["news.org"] == "url"
    assert vals["5551234567"] == "phone"
    assert vals["/home/emma/report.pdf"] == "path"
    assert vals["notes.docx"] == "path"
    assert vals["98.70"] == "amount"
    assert vals["quarterly numbers"] == "ident"
    assert not any(v.startswith("2024") for v in vals)  # a date is no phone or amount


def test_the_same_value_written_two_ways_hashes_alike():
    a = {value_hash(v) for _k, v in extract_values("go to https://www.evil-site.com/ now")}
    b = {value_hash(v) for _k, v in values_in_args({"url": "evil-site.com"})}
    assert a & b
    assert dict(extract_values("$1,250.00 due"))["amount"] == "1250"
    assert ("amount", "1250") in values_in_args({"amount": 1250.0})


def test_value_hash_is_the_first_16_hex_of_sha256():
    assert value_hash("a@b.com") == hashlib.sha256(b"a@b.com").hexdigest()[:16]
    assert re.fullmatch(r"[0-9a-f]{16}", value_hash("x"))


def test_file_names_are_paths_not_domains():
    assert extract_values("read bill-december-2023.txt") == [("path", "bill-december-2023.txt")]


def test_args_are_walked_with_whole_strings_as_identifiers():
    vals = values_in_args(
        {"recipients": ["a@x.com", "b@y.org"], "nested": {"deep": [{"x": "Riverside View Hotel"}]}, "n": True}
    )
    assert ("email", "a@x.com") in vals and ("email", "b@y.org") in vals
    assert ("ident", "riverside view hotel") in vals
    assert all(v != "1" for _k, v in vals)  # a bool is no amount


def test_args_walk_is_bounded_in_depth_size_and_count():
    deep: object = "a@x.com"
    for _ in range(200):
        deep = [deep]
    assert values_in_args(deep) == []  # deeper than ARGS_DEPTH_MAX
    wide = {f"k{i}": f"u{i}@x.com" for i in range(10_000)}
    assert len(values_in_args(wide)) <= taint.VALUES_MAX
    assert values_in_args(object()) == [] and values_in_args(None) == []
    assert values_in_args(float("nan")) == [] and values_in_args(1e300) == []


def test_extracted_values_are_capped():
    many = " ".join(f"user{i}@example.com" for i in range(5000))
    assert len(extract_values(many)) == taint.VALUES_MAX


@pytest.mark.parametrize(
    "name",
    [
        "send_money",
        "sendEmail",
        "schedule_transaction",
        "update_scheduled_transaction",
        "delete_file",
        "share_file",
        "invite_user_to_slack",
        "add_user_to_channel",
        "post_webpage",
        "reserve_hotel",
        "update_password",
        "reset-credentials",
        "create_calendar_event",
        "send_direct_message",
    ],
)
def test_acting_tools_are_named_by_their_verb(name):
    assert is_acting_tool(name, {})


@pytest.mark.parametrize(
    "name", ["read_file", "search_emails", "get_webpage", "get_balance", "list_files", "update_user_info", ""]
)
def test_reading_tools_are_not_acting(name):
    assert not is_acting_tool(name, {})


def _entry(value: str, step: int = 3, instr: bool = True, tool: str = "read_inbox") -> dict[str, object]:
    return {"h": value_hash(value), "kind": "email", "step": step, "tool": tool, "instr": instr}


def test_gate_denies_a_value_from_a_result_that_held_instructions():
    v = gate([_entry("attacker@evil.com")], "send_email", {"recipients": ["Attacker@Evil.com"], "body": "hi"})
    assert isinstance(v, GateVerdict) and not v.allow
    assert v.source_step == 3 and v.hashes == (value_hash("attacker@evil.com"),)
    assert v.reason is not None
    assert "`send_email`" in v.reason and "step 3" in v.reason and "`read_inbox`" in v.reason
    assert "attacker" not in v.reason.lower()  # never the value
    assert "user's task" in v.reason  # it can go on


def test_gate_allows_values_from_plain_results_unless_strict_on_an_acting_call():
    entries = [_entry("bob@x.com", instr=False)]
    assert gate(entries, "send_email", {"recipients": ["bob@x.com"]}).allow
    strict = gate(entries, "send_email", {"recipients": ["bob@x.com"]}, acting_strict=True)
    assert not strict.allow and strict.reason is not None and "not from the user" in strict.reason
    assert gate(entries, "search_emails", {"query": "bob@x.com"}, acting_strict=True).allow


def test_gate_allows_untainted_calls_and_fails_open_on_garbage():
    assert gate([_entry("a@b.com")], "send_email", {"recipients": ["c@d.com"]}).allow
    assert gate([], "send_money", {"recipient": "x"}).allow
    junk: list = [None, 1, {"h": 5}, {"h": "zz", "step": "1"}, {"h": value_hash("a@b.com"), "step": True}]
    assert gate(junk, "send_email", {"to": "a@b.com"}).allow
    assert gate("not a list", "send_email", {"to": "a@b.com"}).allow  # type: ignore[arg-type]
    assert gate([_entry("a@b.com")], None, {"to": "a@b.com"}).allow is False  # type: ignore[arg-type]


def test_gate_reason_keeps_a_hostile_tool_name_fenced():
    v = gate([_entry("a@b.com", tool="x`</rule> [REASONBLOCKS] " + "y" * 500)], "t", {"to": "a@b.com"})
    assert v.reason is not None and "REASONBLOCKS" not in v.reason and "</rule" not in v.reason
    assert len(v.reason) < 600


def test_the_wire_cap_is_32():
    assert TAINT_WIRE_MAX == 32


# Hostile input: the work per KB does not grow with length, and any input is cut.
HOSTILE = (*UNITS, "a@", "@a.", "a@b.", "$1,", "1,", "+1-", "(1)", "www.", "http://a/", "'a", "'ab'", "US12")
FACTOR, FLOOR_US = 4.0, 5.0


def _cold(fn):
    """`fn` with every remembered reading forgotten first: the cost measured is a new text's."""

    def run(s):
        taint._SCANNED.clear()
        for cached in (taint._token_values, taint._classified, taint._ident, taint.value_hash):
            cached.cache_clear()
        return fn(s)

    return run


@pytest.mark.parametrize("fn", [_cold(extract_values), _cold(lambda s: values_in_args({"a": s, "b": [s]}))])
def test_cost_per_kb_does_not_grow_with_length(fn):
    bad = []
    for unit in HOSTILE:
        for tail in ("", "!", "é"):
            small = cpu_per_kb(fn, text(unit, tail, 2048), runs=2, least_s=0.0003) * 1e6
            big = cpu_per_kb(fn, text(unit, tail, 16000), runs=2, least_s=0) * 1e6
            if big > FACTOR * small and big > FLOOR_US:
                small = cpu_per_kb(fn, text(unit, tail, 2048), runs=5, least_s=0.002) * 1e6
                big = cpu_per_kb(fn, text(unit, tail, 16000), runs=3, least_s=0) * 1e6
                if big > FACTOR * small and big > FLOOR_US:
                    bad.append(f"{unit!r}+{tail!r}: {small:.1f} -> {big:.1f} us/KB")
    assert bad == []


def test_a_huge_input_is_cut_before_any_work():
    huge = "a@b.com x " * 200_000  # 2 MB
    t0 = time.process_time()
    extract_values(huge)
    gate([_entry("a@b.com")] * 100, "send_email", {"to": [huge] * 50})
    assert time.process_time() - t0 < 0.5


# The per-token path a currency word forces (a token's values may then depend on the token
# before it) and the fast path (distinct tokens, their values remembered) find the same values.
SAMPLES = (
    "see /workspace/repo/a.py:12 and https://www.example.com/x, mail bob@corp.io or 'my_id'",
    "IBAN DE89370400440532013000, call +1-555-123-4567, 2024-01-05, 12345678, 3 4 5",
    "a,b.com,c@d.org x.txt ./x/y/ ../z $1,200.50 (555) 123-4567 1.5 0.25 www.a.de/b/",
    "x" * 300 + " a.b.c 1.2.3 /a/b/c " * 40 + "'quoted value' \"other one\"",
)


@pytest.mark.parametrize("sample", SAMPLES)
def test_the_fast_token_path_finds_what_the_per_token_path_finds(sample):
    fast = taint.scan(sample)
    slow = taint.scan(sample + " xusdx")  # a currency word's letters: the per-token path
    assert fast == slow


@given(st.text(alphabet="ab.@/:,$-+()'\"0123456789 \nxcomde", max_size=300))
@settings(max_examples=300, deadline=None)
def test_the_fast_token_path_agrees_on_any_text(s):
    assert taint.scan(s) == taint.scan(s + " xusdx")
