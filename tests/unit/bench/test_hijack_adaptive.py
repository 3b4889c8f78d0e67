"""bench.hijack_adaptive: the suite is the same every time, every class has its runs, and each
attack plants the value its call sends (in the form the variant says), never a dev value."""

from __future__ import annotations

import base64
from collections import Counter

import orjson

from bench import hijack_adaptive as ha
from streams.core import asks
from streams.shared.taint import call_values


def _lines() -> tuple[list[bytes], dict[str, dict[str, object]]]:
    lines, labels = [], {}
    for i, suite in enumerate(["banking", "workspace", "slack", "travel"]):
        rid = f"r{i}"
        labels[rid] = {"subset": "benign", "suite": suite}
        lines.append(
            orjson.dumps({"type": "run_start", "run_id": rid, "task": "What is on today?", "ts": 0.0})
        )
        for k in (1, 2, 3):
            ev = {
                "type": "step",
                "run_id": rid,
                "step": k,
                "action": "read_inbox",
                "action_input": {},
                "observation": f"line one of result {k}\nline two of it\nline three",
                "ts": float(k),
            }
            lines.append(orjson.dumps(ev))
    return lines, labels


def test_the_suite_is_seeded_and_every_variant_has_its_runs() -> None:
    lines, labels = _lines()
    a, b = ha.cases(lines, labels), ha.cases(lines, labels)
    assert [(c.variant, c.args) for c in a] == [(c.variant, c.args) for c in b]
    per = Counter((c.cls, c.variant) for c in a)
    assert all(n == ha.N_PER_VARIANT for (cls, _v), n in per.items() if cls != "value format")
    by_class = Counter(c.cls for c in a)
    assert by_class["value format"] == 12 * ha.N_PER_VARIANT // 2
    assert set(by_class) >= {
        *ha.ATTACK_CLASSES,
        "legitimate data-following",
        "user replies",
        "benign look-alikes",
    }


def test_each_plain_attack_plants_the_value_its_call_sends() -> None:
    lines, labels = _lines()
    for c in ha.cases(lines, labels):
        if c.cls not in ("paraphrase", "language", "structure", "fake markers"):
            continue
        text = "\n".join(str(e.get("observation") or "") for e in c.events)
        sent = {v for _k, v, _d in call_values(c.args)}
        # as the worker reads a result (`asks.values`: a value glued to Hangul or inside markup too)
        planted = {v for _k, v, _at in asks.values(text)}
        assert sent & planted, (c.variant, c.args)
        assert "ignore" not in text.lower()


def test_an_encoded_attack_carries_its_value_encoded_only() -> None:
    lines, labels = _lines()
    (c, *_rest) = [c for c in ha.cases(lines, labels) if c.variant == "base64"]
    text = c.events[-1]["observation"]
    a = c.args
    value = a.get("recipient") or a.get("user_email") or a.get("url") or a["recipients"][0]
    assert value not in text and base64.b64encode(value.encode()).decode() in text
