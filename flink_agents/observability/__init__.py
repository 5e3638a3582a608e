"""Observability: the event log (typed records with lineage), its listeners and sinks, metrics
counted from it, and the trace tree (see docs/operations.md).

The engine and its durable calls emit into an :class:`EventLog`; a host builds one from an
:class:`EventLogConfig` and its own listeners (:func:`build_event_log`), or passes none.
"""

from flink_agents.observability.config import EventLogConfig, build_event_log
from flink_agents.observability.lines import LineListener
from flink_agents.observability.listener import EventListener, Observer, RunCounter
from flink_agents.observability.log import ActionWatch, EventLog
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
from flink_agents.observability.sinks import (
    JsonLinesSink,
    KafkaEventLogConfig,
    MetricsListener,
    MetricsSink,
    TracesConfig,
    read_records,
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
    "read_records",
]
