"""Records built from the engine's trusted values equal pydantic's unvalidated construction, and
their JSON lines are pydantic's."""

from __future__ import annotations

from typing import Any

import pytest

from flink_agents.api.chat import TokenUsage
from flink_agents.observability.log_records import (
    ActionFinished,
    ActionStarted,
    CallFinished,
    EventDropped,
    EventSent,
    NotAnEventLogRecord,
    RunAdmitted,
    RunFinished,
    RunStarted,
    WaitNoted,
    construct,
    parse_record,
    record_json,
)

RUN = {"time": 1.5, "agent": "a", "key": {"user": 7}, "seq": 3}

EXAMPLES: list[tuple[type[Any], dict[str, Any]]] = [
    (RunAdmitted, RUN),
    (RunStarted, {**RUN, "input": {"q": "h\u00e9llo \u2713", "n": 1.5, "more": [None, True]}}),
    (RunFinished, {**RUN, "status": "succeeded", "latency_ms": 2.5, "outputs": 1}),
    (RunFinished, {**RUN, "status": "failed", "latency_ms": 2.5, "error": "boom"}),
    (ActionStarted, {**RUN, "action": "act", "event_id": "e1", "event_type": "InputEvent"}),
    (
        ActionFinished,
        {**RUN, "action": "act", "event_id": "e1", "event_type": "InputEvent", "latency_ms": 1.0},
    ),
    (
        EventSent,
        {**RUN, "event_id": "e2", "event_type": "T", "upstream_id": "e1", "action": "act"},
    ),
    (
        EventDropped,
        {**RUN, "event_id": "e2", "event_type": "T", "upstream_id": "e1", "action": "act"},
    ),
    (
        CallFinished,
        {
            **RUN,
            "event_id": "e1",
            "action": "act",
            "call_id": "c0",
            "call_kind": "model",
            "function": "m:f",
            "outcome": "live",
            "latency_ms": 3.0,
            "usage": TokenUsage(input_tokens=4, output_tokens=2),
            "result": {"content": "ok"},
        },
    ),
    (
        WaitNoted,
        {
            **RUN,
            "wait_id": "w1",
            "wait_kind": "approval",
            "change": "paused",
            "deadline_ms": 1_796_245_301_000,
            "request": {"amount": 30},
        },
    ),
    (
        WaitNoted,
        {
            **RUN,
            "wait_id": "w1",
            "wait_kind": "approval",
            "change": "resumed",
            "verdict": "edited",
            "by": "ann",
        },
    ),
]


@pytest.mark.parametrize(("record_type", "fields"), EXAMPLES)
def test_a_constructed_record_equals_pydantics_and_reads_back(record_type, fields):
    built = construct(record_type, **fields)
    expected = record_type.model_construct(**fields)
    assert built == expected
    assert built.model_dump() == expected.model_dump()
    assert built.model_fields_set == expected.model_fields_set
    assert record_json(built) == expected.model_dump_json()
    assert parse_record(record_json(built)) == record_type.model_validate(fields)


@pytest.mark.parametrize(("record_type", "fields"), EXAMPLES)
def test_a_validated_record_writes_pydantics_json_line(record_type, fields):
    record = record_type.model_validate(fields)
    assert record_json(record) == record.model_dump_json()


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"\xff not text", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"city": "Oslo"}', 'no "kind" field (every record has one: run_started, call, ...)'),
        ('{"kind": "nothing"}', "\"kind\" is 'nothing', not one of 'run_admitted', "),
        (
            '{"time": 1, "agent": "a", "key": 1, "seq": "x", "kind": "run_admitted"}',
            'a "run_admitted" record, but seq: input should be a valid integer, ',
        ),
        (
            '{"kind": "call", "agent": "a"}',
            'a "call" record, but time: field required (and 9 more)',
        ),
    ],
)
def test_a_line_that_is_no_record_says_where_and_why_in_a_sentence(line, why):
    with pytest.raises(NotAnEventLogRecord) as info:
        parse_record(line, "events.jsonl:7")
    message = str(info.value)
    assert message.startswith(f"events.jsonl:7: not an event log record: {why}")
    assert "pydantic" not in message and "tagged-union" not in message
