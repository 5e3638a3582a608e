"""How a host is told to keep an event log: in a job spec, or from Python."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.refs import import_reference
from flink_agents.observability.event_log import EventLog
from flink_agents.observability.lines import LineListener
from flink_agents.observability.listener import EventListener, Observer, RunCounter
from flink_agents.observability.payloads import (
    DEFAULT_MAX_PAYLOAD_CHARS,
    PayloadWriter,
    referenced_secrets,
)
from flink_agents.observability.sinks.json_lines import JsonLinesSink
from flink_agents.observability.sinks.sink_config import KafkaEventLogConfig, TracesConfig

SUBTASK_PLACEHOLDER = "{subtask}"


class EventLogConfig(BaseModel):
    """The event log of a job: a JSON-lines file, listeners, and how much of a payload to keep."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(
        default=None,
        description="JSON-lines file the records are appended to (relative to the job spec). "
        f"'{SUBTASK_PLACEHOLDER}' in it is replaced by the operator's subtask index, so that "
        "parallel instances write separate files.",
    )
    listeners: list[str] = Field(
        default_factory=list,
        description="Listeners as module:attr references: a class or function called with no "
        "arguments that returns an object with an on_record(record) method (or on_line(line), "
        "for each record's JSON line), or a counter (the methods of "
        "flink_agents.observability.RunCounter).",
    )
    kafka: KafkaEventLogConfig | None = Field(
        default=None, description="Also produce the records to a Kafka topic."
    )
    traces: TracesConfig | None = Field(
        default=None, description="Also export the records as OpenTelemetry spans."
    )
    max_payload_chars: int = Field(
        default=DEFAULT_MAX_PAYLOAD_CHARS,
        ge=0,
        description="Payloads (inputs, events, call arguments and results) longer than this, "
        "as JSON, are cut to this many characters.",
    )

    sample_runs: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        description="The fraction of runs whose records are written, for very high rates: each "
        "run is in or out by a hash of its identity (agent, key, seq), the same on every "
        "execution of it; a failed run left out still gets its run_started and run_finished "
        "records. The metrics count every run. 1: every run.",
    )

    def resolved(self, base_dir: Path) -> EventLogConfig:
        """This config with a relative ``path`` made relative to ``base_dir``."""
        if self.path is None or Path(self.path).is_absolute():
            return self
        return self.model_copy(update={"path": str((base_dir / self.path).resolve())})

    def listeners_for(self, subtask: int = 0) -> list[Observer]:
        """The configured listeners, the file sink first (opened now)."""
        found: list[Observer] = []
        if self.path is not None:
            found.append(JsonLinesSink(self.path.replace(SUBTASK_PLACEHOLDER, str(subtask))))
        if self.kafka is not None:
            from flink_agents.observability.sinks.kafka_log import KafkaEventLogSink

            found.append(KafkaEventLogSink(self.kafka))
        if self.traces is not None:
            from flink_agents.observability.sinks.otel import SpanListener  # the optional extra

            found.append(SpanListener.exporting(self.traces))
        found.extend(_listener(ref) for ref in self.listeners)
        return found


def build_event_log(
    config: EventLogConfig | None,
    listeners: Sequence[Observer] = (),
    *,
    plan_data: Any = None,
    environ: Mapping[str, str] | None = None,
    subtask: int = 0,
) -> EventLog | None:
    """The event log a host passes to its engine, or None when nothing listens.

    ``listeners`` (record listeners or counters, such as the metrics) are added to the
    configured ones. Without a config they only count (no payloads are written). ``plan_data``
    (the plan's JSON value) names the environment variables whose values never appear in a
    record.
    """
    every: list[Observer] = [
        *(config.listeners_for(subtask) if config is not None else []),
        *listeners,
    ]
    if not every:
        return None
    payloads = PayloadWriter(
        config.max_payload_chars if config is not None else DEFAULT_MAX_PAYLOAD_CHARS,
        referenced_secrets(plan_data, environ),
    )
    return EventLog(
        every,
        payloads=payloads,
        include_payloads=config is not None,
        sample=config.sample_runs if config is not None else 1.0,
    )


def _listener(ref: str) -> Observer:
    made = import_reference(ref)()
    if not isinstance(made, EventListener | LineListener | RunCounter):
        raise TypeError(
            f"event log listener {ref!r} made {made!r}, which has no on_record or on_line method "
            "(nor the methods of a RunCounter)"
        )
    return made
