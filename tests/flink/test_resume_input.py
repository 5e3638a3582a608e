"""Decision records tagged into the operator's one keyed input (flink/resume_input.py)."""

from __future__ import annotations

import json

from flink_agents.flink.resume_input import resume_text, tagger, united_selector
from flink_agents.runtime.json_records import key_selector


def test_a_tagged_decision_is_keyed_like_the_input_it_decides_for():
    inputs, decisions = key_selector("order"), key_selector("customer")
    select = united_selector(inputs)
    record = json.dumps({"customer": "c-1", "wait": "w", "verdict": "approve"})
    tagged = tagger(decisions)(record)
    assert select(tagged) == select(json.dumps({"order": "c-1", "n": 1})) == '"c-1"'
    assert resume_text(tagged) == record


def test_an_input_record_is_not_a_decision():
    text = json.dumps({"order": "x\u001ey"})
    assert resume_text(text) is None
    assert united_selector(key_selector("order"))(text) == json.dumps("x\u001ey")
