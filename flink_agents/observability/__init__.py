"""Observability: the event log (typed records with lineage), its listeners and sinks, metrics
counted from it, and the trace tree (see docs/operations.md).

The engine and its durable calls emit into an :class:`EventLog`; a host builds one from an
:class:`EventLogConfig` and its own listeners (:func:`build_event_log`), or passes none.
"""

from flink_agents.observability.config import EventLogConfig, build_event_log
from flink_agents.observability.exports import KafkaEventLogConfig, TracesConfig
from flink_agents.observability.file_sink import JsonLinesSink
from flink_agents.observability.lines import LineListener
from flink_agents.observability.listener import EventListener, Observer, RunCounter
from flink_agents.observability.log import ActionWatch, EventLog
from flink_agents.observability.metrics import MetricsListener, MetricsSink
from flink_agents.observability.records import (
    ActionFinished,
    ActionStarted,
    CallFinished,
    EventDropped,
    EventSent,
    LogRecord,
    RunAdmitted,
    RunFinished,
    RunStarted,
    parse_record,
)

__all__ = [
    "ActionFinished",
    "ActionStarted",
    "ActionWatch",
    "CallFinished",
    "EventDropped",
    "EventListener",
    "EventLog",
    "EventLogConfig",
    "EventSent",
    "JsonLinesSink",
    "KafkaEventLogConfig",
    "LineListener",
    "LogRecord",
    "MetricsListener",
    "MetricsSink",
    "Observer",
    "RunAdmitted",
    "RunCounter",
    "RunFinished",
    "RunStarted",
    "TracesConfig",
    "build_event_log",
    "parse_record",
]
