"""The event log's configuration: in a job spec (paths relative to the spec) and listeners by
reference."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from flink_agents.flink.job import load_job
from flink_agents.observability import (
    EventLogConfig,
    JsonLinesSink,
    MetricsListener,
    TracesConfig,
    build_event_log,
)
from tests.observability.agents import Collector


def test_a_job_specs_event_log_file_is_relative_to_the_spec(tmp_path: Path):
    spec = tmp_path / "jobs" / "job.yaml"
    spec.parent.mkdir()
    spec.write_text(
        "name: j\nagent: examples.weather:build_agent\nsource: {kind: list, path: in.jsonl}\n"
        "key: city\nevent_log:\n  path: 'logs/events-{subtask}.jsonl'\n  max_payload_chars: 50\n"
    )
    config = load_job(spec).event_log_config()
    assert config is not None
    assert config.path == str(tmp_path / "jobs" / "logs" / "events-{subtask}.jsonl")
    assert config.max_payload_chars == 50


def test_the_file_is_per_subtask_and_referenced_listeners_are_built(tmp_path: Path):
    config = EventLogConfig(
        path=str(tmp_path / "events-{subtask}.jsonl"),
        listeners=["tests.observability.agents:Collector"],
    )
    log = build_event_log(config, subtask=3)
    assert log is not None
    sink, collector = log.listeners
    assert isinstance(sink, JsonLinesSink) and sink.path == tmp_path / "events-3.jsonl"
    assert isinstance(collector, Collector)
    log.close()


def test_a_reference_that_is_no_listener_is_refused():
    with pytest.raises(TypeError, match="no on_record or on_line method"):
        build_event_log(EventLogConfig(listeners=["pathlib:Path"]))


def test_nothing_configured_is_no_event_log_and_listeners_alone_only_count():
    assert build_event_log(None) is None
    log = build_event_log(None, [Collector()])
    assert log is not None and log.include_payloads is False


def test_a_job_spec_sends_the_event_log_to_kafka_and_as_traces(tmp_path: Path):
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: j\nagent: examples.weather:build_agent\nsource: {kind: list, path: in.jsonl}\n"
        "key: city\nevent_log:\n"
        "  kafka: {topic: agent-events, bootstrap_servers: 'broker:9092', partitions: 2}\n"
        "  traces:\n    endpoint: http://collector:4318/v1/traces\n    service_name: tickets\n"
        "    headers: {authorization: '${env:OTEL_TOKEN}'}\n"
    )
    config = load_job(spec).event_log_config()
    assert config is not None and config.kafka is not None and config.traces is not None
    assert (config.kafka.topic, config.kafka.servers, config.kafka.partitions) == (
        "agent-events",
        "broker:9092",
        2,
    )
    assert config.traces.endpoint == "http://collector:4318/v1/traces"
    assert config.traces.service_name == "tickets"
    assert config.traces.headers == {"authorization": "${env:OTEL_TOKEN}"}


def test_an_unknown_setting_of_the_kafka_event_log_is_refused():
    with pytest.raises(ValueError, match="extra"):
        EventLogConfig.model_validate({"kafka": {"topic": "t", "acks": "all"}})


def test_a_referenced_counter_is_told_counts_not_records():
    log = build_event_log(EventLogConfig(listeners=["flink_agents.observability:MetricsListener"]))
    assert log is not None and log.listeners == ()
    [counter] = log.counters
    assert isinstance(counter, MetricsListener)


def test_trace_export_headers_refuse_a_literal_token() -> None:
    with pytest.raises(ValidationError, match="/authorization"):
        TracesConfig(headers={"authorization": "Bearer abcdef123456"})
    TracesConfig(headers={"authorization": "${env:OTEL_TOKEN}"})
