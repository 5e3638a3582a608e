"""The operator's event log sent to Kafka and as OpenTelemetry spans, configured like a job spec
configures it (the operator runs in this process: PyFlink's loopback mode)."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from examples.weather import build_agent
from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.observability import (
    CallFinished,
    EventLogConfig,
    KafkaEventLogConfig,
    RunFinished,
    TracesConfig,
)
from flink_agents.observability.sinks.kafka_log import read_topic
from tests.observability.otlp import receiving

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

CITIES = ["Berlin", "Lisbon", "Oslo"]


def test_the_operator_produces_its_event_log_to_kafka_and_exports_spans(
    fresh_flink_env, kafka_bootstrap: str
) -> None:
    topic = KafkaEventLogConfig(
        topic=f"test-event-log-{uuid.uuid4().hex[:12]}", bootstrap_servers=kafka_bootstrap
    )
    with receiving() as receiver:
        config = EventLogConfig(kafka=topic, traces=TracesConfig(endpoint=receiver.url))
        agents = AgentsExecutionEnvironment(fresh_flink_env, event_log=config)
        records = [{"city": city} for city in CITIES]
        outputs = agents.from_list(records, key="city").apply(build_agent()).to_datastream()
        assert len(list(outputs.execute_and_collect())) == len(records)

    logged = list(read_topic(topic))
    assert sorted(r.key for r in logged if isinstance(r, RunFinished)) == CITIES
    calls = Counter((r.call_kind, r.outcome) for r in logged if isinstance(r, CallFinished))
    assert calls == {("model", "live"): 9, ("tool", "live"): 6}

    names = Counter(span.name for span in receiver.spans())
    assert names["invoke_agent weather_react"] == 3
    assert names["chat scripted-1"] == 9
    assert names["execute_tool get_temperature"] + names["execute_tool get_advice"] == 6
