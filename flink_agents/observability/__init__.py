"""Observability: the event log (typed records with lineage), the listener protocol, how a job
configures it, and its sinks (see docs/operations.md).

The core is small: the records (:mod:`~flink_agents.observability.log_records`), the emission
point (:class:`EventLog`, :mod:`~flink_agents.observability.event_log`, with its fast path for
JSON lines in :mod:`~flink_agents.observability.lines` and payloads cut and scrubbed by
:class:`PayloadWriter`), the listener protocols (:class:`EventListener`, :class:`LineListener`,
:class:`RunCounter`) and the settings (:class:`EventLogConfig`,
:func:`build_event_log`). Where records go is in :mod:`~flink_agents.observability.sinks`: a
JSON-lines file, metrics, a Kafka topic, OpenTelemetry spans.

The engine and its durable calls emit into an :class:`EventLog`; a host builds one from an
:class:`EventLogConfig` and its own listeners (:func:`build_event_log`), or passes none.
"""

from flink_agents.observability.call_refs import call_kind
from flink_agents.observability.event_log import ActionWatch, EventLog
from flink_agents.observability.lines import LineListener
from flink_agents.observability.listener import EventListener, Observer, RunCounter
from flink_agents.observability.log_config import EventLogConfig, build_event_log
from flink_agents.observability.log_records import (
    ActionFinished,
    ActionStarted,
    BudgetDecision,
    BudgetNoted,
    CallFinished,
    CallKind,
    CallOutcome,
    ConnectionNoted,
    EventDropped,
    EventSent,
    LogRecord,
    RunAdmitted,
    RunFinished,
    RunStarted,
    RunStatus,
    WaitChange,
    WaitNoted,
    parse_record,
)
from flink_agents.observability.payloads import PayloadWriter
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
    "BudgetDecision",
    "BudgetNoted",
    "CallFinished",
    "CallKind",
    "CallOutcome",
    "ConnectionNoted",
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
    "PayloadWriter",
    "RunAdmitted",
    "RunCounter",
    "RunFinished",
    "RunStarted",
    "RunStatus",
    "TracesConfig",
    "WaitChange",
    "WaitNoted",
    "build_event_log",
    "call_kind",
    "parse_record",
    "read_records",
]
