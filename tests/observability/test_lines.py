"""The fast path: a sink that takes lines gets, without any record being built, the very JSON
lines the typed records write (the records stay the log's documented schema)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_core import to_json

from examples.weather import build_agent
from flink_agents.api import ChatMessage, InputEvent
from flink_agents.durable.call import DurableCall
from flink_agents.durable.identity import CallIdentity, RunId
from flink_agents.observability import EventLogConfig, parse_record
from flink_agents.observability import event_log as log_module
from flink_agents.observability.lines import members_line, payload_pairs, render_line
from flink_agents.observability.log_records import (
    CallFinished,
    EventSent,
    RunStarted,
    construct,
    record_json,
)
from flink_agents.observability.payloads import PayloadWriter
from flink_agents.runtime import run_local
from tests.observability import agents
from tests.observability.agents import KEY_VARIABLE, SECRET, Collector
from tests.observability.test_payloads import Client
from tests.sample_agents import unheard_agent

RUN = {"time": 1.5, "agent": "a", "key": {"user": 7}, "seq": 3}

PAYLOADS: list[Any] = [
    None,
    {"q": "h\u00e9llo \u2713", "n": 1.5, "big": 10**20, "more": [None, True, -0.0]},
    InputEvent(input={"city": "Oslo"}),
    [ChatMessage(role="user", content='line\nbreak "quoted" \\ tab\t')],
    {"client": Client(), "api_key": "k", "nested": [{"Authorization": "Bearer x"}]},
    {"reply": f"the key is {SECRET}"},
    {"text": "x" * 100},
    ("a", 1, b"bytes", float("inf")),
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_payloads_json_is_the_json_of_its_record_value(payload):
    writer = PayloadWriter(max_chars=60, secrets=[SECRET])
    assert writer.json(payload) == to_json(writer(payload))  # as a record writes it


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_line_rendered_from_fields_is_the_records_json_line(payload):
    writer = PayloadWriter(max_chars=60, secrets=[SECRET])
    examples: list[tuple[Any, dict[str, Any], dict[str, Any]]] = [
        (RunStarted, {**RUN, "kind": "run_started"}, {"input": payload}),
        (
            EventSent,
            {
                **RUN,
                "kind": "event_sent",
                "event_id": "e2",
                "event_type": "T",
                "upstream_id": None,
                "action": "act",
            },
            {"payload": payload},
        ),
        (
            CallFinished,
            {
                **RUN,
                "kind": "call",
                "event_id": "e1",
                "action": "act",
                "call_id": "c0",
                "call_kind": "tool",
                "function": "m:f",
                "target": None,
                "provider": None,
                "outcome": "failed",
                "attempts": 2,
                "latency_ms": 3.25,
                "usage": None,
                "error": 'ValueError: "bad"',
            },
            {"arguments": {"args": [payload], "kwargs": {}}, "result": payload},
        ),
    ]
    for record_type, fields, payloads in examples:
        written = {name: writer(value) for name, value in payloads.items()}
        record = construct(record_type, **fields, **written)
        line = render_line(fields, writer.json, *payload_pairs(payloads))
        assert line == record_json(record).encode()
        assert members_line(fields, writer.members(payloads)) == line


@pytest.mark.parametrize("max_chars", [60, 2000])
@pytest.mark.parametrize("payload", PAYLOADS)
def test_payloads_rendered_together_are_each_rendered_alone(payload, max_chars):
    writer = PayloadWriter(max_chars=max_chars, secrets=[SECRET])
    values = {"arguments": {"args": [payload], "kwargs": {}}, "result": payload}
    alone = b",".join(b'"%s":%s' % (name.encode(), writer.json(v)) for name, v in values.items())
    assert writer.members(values) == alone


def _lines(path: Path) -> list[dict[str, Any]]:
    """The file's records as JSON objects (keys in their order), run after run (runs of
    different keys interleave as they were scheduled), without what differs from one run to
    the next (the clock)."""
    found = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        record.update(time=0, **({"latency_ms": 0} if "latency_ms" in record else {}))
        found.append(record)
    return sorted(found, key=lambda r: (json.dumps(r["key"]), r["seq"]))


@pytest.mark.parametrize(
    ("agent", "inputs", "key", "max_chars"),
    [
        (build_agent, [{"city": "Oslo"}, {"city": "Lisbon"}], "city", 2000),
        (build_agent, [{"city": "Oslo"}], "city", 20),
        (agents.leaky_agent, [{"k": 1, "q": "hi"}], "k", 2000),
        (agents.failing_agent, [{"k": 1, "q": "why"}], "k", 2000),
        (unheard_agent, [{"k": "a", "n": 1}], "k", 2000),  # an event_dropped record
    ],
)
def test_the_file_written_without_records_is_the_file_written_from_them(
    agent, inputs, key, max_chars, tmp_path, monkeypatch
):
    monkeypatch.setenv(KEY_VARIABLE, SECRET)
    Collector.records = []
    fast, typed = tmp_path / "fast.jsonl", tmp_path / "typed.jsonl"
    run_local(
        agent(),
        inputs,
        key=key,
        event_log=EventLogConfig(path=str(fast), max_payload_chars=max_chars),
    )
    run_local(
        agent(),
        inputs,
        key=key,
        event_log=EventLogConfig(path=str(typed), max_payload_chars=max_chars),
        listeners=[Collector()],  # a listener of records: the records are built
    )
    assert [list(r) for r in _lines(fast)] == [list(r) for r in _lines(typed)]  # field order
    assert _lines(fast) == _lines(typed)
    assert len(Collector.records) == len(_lines(typed))
    for line in fast.read_text().splitlines():
        assert record_json(parse_record(line)) == line  # each line is a typed record's JSON
    assert SECRET not in fast.read_text()


class RunRecords(Collector):
    """A listener of run records only (as the status line is): actions take the line path."""

    record_kinds = frozenset({"run_admitted", "run_started", "run_finished"})


def test_a_file_beside_a_listener_of_some_kinds_is_the_same_file(tmp_path):
    Collector.records = []
    fast, mixed = tmp_path / "fast.jsonl", tmp_path / "mixed.jsonl"
    cities = [{"city": "Oslo"}, {"city": "Lisbon"}]
    run_local(build_agent(), cities, key="city", event_log=EventLogConfig(path=str(fast)))
    run_local(
        build_agent(),
        cities,
        key="city",
        event_log=EventLogConfig(path=str(mixed)),
        listeners=[RunRecords()],
    )
    assert _lines(fast) == _lines(mixed)
    kinds = {record.kind for record in Collector.records}
    assert RunRecords.record_kinds <= kinds
    assert not kinds & {"action_started", "action_finished", "event_sent"}  # lines only


def test_with_only_a_file_no_record_is_built(tmp_path, monkeypatch):
    def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a record was built for a sink that takes lines")

    monkeypatch.setattr(log_module, "construct", forbidden)
    path = tmp_path / "events.jsonl"
    [result] = run_local(
        build_agent(), [{"city": "Oslo"}], key="city", event_log=EventLogConfig(path=str(path))
    )
    assert result.error is None
    kinds = {parse_record(line).kind for line in path.read_text().splitlines()}
    assert kinds >= {"run_started", "action_started", "event_sent", "call", "run_finished"}


class KeptLines:
    """A listener of lines, by reference (class-wide, so the test can read them)."""

    lines: list[bytes] = []

    def on_line(self, line: bytes) -> None:
        KeptLines.lines.append(line)


def test_a_listener_of_lines_can_be_named_in_the_config():
    KeptLines.lines = []
    config = EventLogConfig(listeners=["tests.observability.test_lines:KeptLines"])
    run_local(build_agent(), [{"city": "Oslo"}], key="city", event_log=config)
    records = [parse_record(line) for line in KeptLines.lines]
    assert records[0].kind == "run_admitted" and records[-1].kind == "run_finished"
    assert len(records) > 10


class _Lines:
    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def on_line(self, line: bytes) -> None:
        self.lines.append(line)


def _call_line(include_payloads: bool, *listeners: Any) -> dict[str, Any]:
    sink = _Lines()
    log = log_module.EventLog(
        [sink, *listeners], payloads=PayloadWriter(), include_payloads=include_payloads
    )
    identity = CallIdentity(RunId("a", 7, 0), "e1", "act", "c0")
    call = DurableCall(identity, len, args=(["x"],), kwargs={"k": 1})
    log.call_finished(call, "live", 0, attempts=0, value=1)
    (line,) = sink.lines
    return {**json.loads(line), "time": 0, "latency_ms": 0}


@pytest.mark.parametrize("include_payloads", [True, False])
def test_a_call_line_is_the_records_line_with_or_without_payloads(include_payloads):
    rendered = _call_line(include_payloads)
    assert list(rendered) == list(_call_line(include_payloads, Collector()))  # field order
    assert rendered == _call_line(include_payloads, Collector())
    payloads = {"arguments": {"args": [["x"]], "kwargs": {"k": 1}}, "result": 1}
    assert {name: rendered[name] for name in payloads} == (
        payloads if include_payloads else dict.fromkeys(payloads)
    )
