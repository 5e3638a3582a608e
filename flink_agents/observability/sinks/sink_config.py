"""Where else the event log goes, as a job spec or Python sets it: OpenTelemetry traces, a Kafka
topic. Settings only: the listeners that send (and their optional clients) are imported when
one is configured."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from flink_agents.api.resources import refuse_literal_secrets


class TracesConfig(BaseModel):
    """OpenTelemetry spans of the event log's records, sent over OTLP/HTTP (the ``otel`` extra;
    see :mod:`flink_agents.observability.sinks.otel`)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str = Field(
        default="http://127.0.0.1:4318/v1/traces",
        description="The collector's OTLP/HTTP traces URL (protobuf bodies).",
    )
    service_name: str = Field(default="flink-agents", description="The ``service.name`` resource.")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers sent with each export; a whole value may be an environment "
        'reference ("${env:NAME}"), the way to pass a token.',
    )
    timeout_s: float = Field(default=10.0, gt=0, description="Timeout of one export request.")

    # A token under a header is given by reference, as a resource's is (docs/security.md).
    _no_literal_secrets = field_validator("headers")(refuse_literal_secrets)


class KafkaEventLogConfig(BaseModel):
    """The event log on a Kafka topic: one JSON record per value, keyed by run (``[agent, key,
    seq]`` as JSON) so that a run's records keep their order in one partition. The topic is
    created if absent (``cleanup.policy=delete``: a log, not a table)."""

    model_config = ConfigDict(extra="forbid")

    topic: str = Field(min_length=1)
    bootstrap_servers: str | list[str] = "127.0.0.1:9092"
    partitions: int = Field(default=4, ge=1, description="For a created topic.")
    replication_factor: int = Field(default=1, ge=1, description="For a created topic.")
    retention_ms: int | None = Field(
        default=None, ge=1, description="``retention.ms`` of a created topic (none: the broker's)."
    )
    linger_ms: int = Field(default=50, ge=0, le=900_000, description="Producer batching delay.")
    compression_type: Literal["gzip", "zstd", "lz4", "snappy"] | None = "zstd"
    client_id: str = Field(default="flink-agents-event-log", min_length=1)

    @property
    def servers(self) -> str:
        """``bootstrap_servers`` as librdkafka takes them (comma-separated)."""
        servers = self.bootstrap_servers
        return servers if isinstance(servers, str) else ",".join(servers)
