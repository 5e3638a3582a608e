"""Where the event log's records go: a JSON-lines file (:class:`JsonLinesSink`, read back by
:func:`read_records`), the metrics counted from them (:class:`MetricsListener`), a Kafka topic
(:mod:`~flink_agents.observability.sinks.kafka_log`) and OpenTelemetry spans
(:mod:`~flink_agents.observability.sinks.otel`, the ``otel`` extra), and their settings.

The Kafka and OpenTelemetry sinks are imported by their module path only, when one is
configured: this face loads neither client.
"""

from flink_agents.observability.sinks.json_lines import JsonLinesSink, read_records
from flink_agents.observability.sinks.metrics import MetricsListener, MetricsSink
from flink_agents.observability.sinks.queued import QueuedSink
from flink_agents.observability.sinks.sink_config import KafkaEventLogConfig, TracesConfig

__all__ = [
    "JsonLinesSink",
    "KafkaEventLogConfig",
    "MetricsListener",
    "MetricsSink",
    "QueuedSink",
    "TracesConfig",
    "read_records",
]
