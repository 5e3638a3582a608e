"""The event log on a Kafka topic (real broker): every record produced, read back in each run's
order, and `flink-agents trace --topic` rebuilds the runs from it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from examples.weather import build_agent
from flink_agents.cli import main
from flink_agents.observability import EventLogConfig, KafkaEventLogConfig, read_records
from flink_agents.observability.sinks.kafka_log import KafkaEventLogSink, read_topic
from flink_agents.runtime import run_local

pytestmark = pytest.mark.kafka

CITIES = [{"city": "Oslo"}, {"city": "Lisbon"}, {"city": "Berlin"}]


@pytest.fixture
def topic_config(kafka_bootstrap: str) -> KafkaEventLogConfig:
    return KafkaEventLogConfig(
        topic=f"test-event-log-{uuid.uuid4().hex[:12]}",
        bootstrap_servers=kafka_bootstrap,
        partitions=3,
    )


def _per_run(records: list) -> dict:
    runs: dict = {}
    for record in records:
        runs.setdefault((record.agent, str(record.key), record.seq), []).append(record)
    return runs


def test_every_record_reaches_the_topic_in_each_runs_order(tmp_path: Path, topic_config):
    path = tmp_path / "events.jsonl"
    config = EventLogConfig(path=str(path), kafka=topic_config)
    run_local(build_agent(), CITIES, key="city", event_log=config)

    from_file = list(read_records(path))
    from_topic = list(read_topic(topic_config))
    assert len(from_topic) == len(from_file) > 0
    assert _per_run(from_topic) == _per_run(from_file)  # same records, same order per run


def test_trace_reads_a_topic(topic_config, capsys):
    run_local(build_agent(), CITIES[:1], key="city", event_log=EventLogConfig(kafka=topic_config))
    args = ["trace", "--topic", topic_config.topic, "--bootstrap", topic_config.servers]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith('run weather_react "Oslo" #0  succeeded')
    assert "call tool:call_0_0  tool  live" in out


def test_a_sink_given_from_python_is_closed_with_everything_acknowledged(topic_config):
    sink = KafkaEventLogSink(topic_config)
    run_local(build_agent(), CITIES[:1], key="city", listeners=[sink])
    assert sink.failed == 0
    assert len(list(read_topic(topic_config))) > 10


def test_trace_needs_a_file_or_a_topic_but_not_both(tmp_path: Path, capsys):
    assert main(["trace"]) == 2
    assert main(["trace", str(tmp_path / "x.jsonl"), "--topic", "t"]) == 2
    assert "needs an event log file or --topic" in capsys.readouterr().err


def test_trace_of_a_missing_topic_is_a_usage_error(kafka_bootstrap, capsys):
    topic = f"test-event-log-none-{uuid.uuid4().hex[:12]}"
    assert main(["trace", "--topic", topic, "--bootstrap", kafka_bootstrap]) == 2
    assert f"no event log topic {topic!r}" in capsys.readouterr().err
