"""Where else the event log goes, as a job spec or Python sets it: OpenTelemetry traces, a Kafka
topic. Settings only: the listeners that send (and their optional clients) are imported when
one is configured."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TracesConfig(BaseModel):
    """OpenTelemetry spans of the event log's records, sent over OTLP/HTTP (the ``otel`` extra;
    see :mod:`flink_agents.observability.otel`)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str = Field(
        default="http://127.0.0.1:4318/v1/traces",
        description="The collector's OTLP/HTTP traces URL (protobuf bodies).",
    )
    service_name: str = Field(default="flink-agents", description="The ``service.name`` resource.")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers sent with each export; a value may be an environment "
        'reference ("${env:NAME}"), the way to pass a token.',
    )
    timeout_s: float = Field(default=10.0, gt=0, description="Timeout of one export request.")
