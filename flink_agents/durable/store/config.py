"""Which action-state store a job uses and every setting of it: the one store configuration.

A job spec's ``store`` section, the Python API (``AgentsExecutionEnvironment(store=...)``) and
``KafkaActionStateStore`` itself all take a `StoreConfig`; ``python -m scripts.regenerate``
publishes it as part of the job spec's JSON Schema. Ranges are librdkafka's, so a bad value is
refused when the spec is read, not when the job starts on the cluster.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flink_agents.durable.store.base import ActionStateStore
from flink_agents.durable.store.codec import DEFAULT_SECRET_ENV, secret_from_env
from flink_agents.durable.store.kafka import KafkaActionStateStore
from flink_agents.durable.store.memory import InMemoryActionStateStore

#: librdkafka's upper bound for its integer settings (a signed 32-bit int).
_INT32_MAX = 2**31 - 1
#: librdkafka's upper bound for `linger.ms` and `request.timeout.ms` (15 minutes).
_MAX_MS = 900_000


class StoreConfig(BaseModel):
    """``kind: memory`` (one process, lost with it: tests and local runs) or ``kind: kafka``.

    ``mismatch_policy`` is the default for agents whose config does not set
    ``durable.mismatch_policy`` (see docs/durable-execution.md). The settings from
    ``bootstrap_servers`` on are the Kafka store's (docs/state-store.md); a memory store ignores
    them.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["memory", "kafka"] = "memory"
    mismatch_policy: Literal["fail", "warn"] = Field(
        default="fail",
        description="For agents that do not set durable.mismatch_policy: what a replay does "
        "when a call differs from its record.",
    )
    secret_env: str = Field(
        default=DEFAULT_SECRET_ENV,
        description="Environment variable holding the HMAC secret; unset or empty: unsigned "
        "JSON records.",
    )
    bootstrap_servers: str | list[str] | None = Field(
        default=None, description="Kafka brokers (required for kind: kafka)."
    )
    topic: str = Field(default="flink-agents-action-state", description="Store topic, one per job.")
    partitions: int = Field(
        default=4, ge=1, description="Partition count, fixed for the topic's life."
    )
    replication_factor: int = Field(default=1, ge=1, description="For a created topic.")
    min_insync_replicas: int | None = Field(
        default=None,
        ge=1,
        description="`min.insync.replicas` for a created topic; none keeps the broker default.",
    )
    retention_ms: int | None = Field(
        default=None,
        ge=1,
        description="None: `cleanup.policy=compact`. Else `compact,delete` with this "
        "`retention.ms`, a backstop for states never pruned.",
    )
    linger_ms: int = Field(default=5, ge=0, le=_MAX_MS, description="Producer batching delay.")
    batch_size: int = Field(
        default=512 * 1024,
        ge=1,
        le=_INT32_MAX,
        description="Producer batch size in bytes, before compression: fewer, larger requests.",
    )
    compression_type: Literal["gzip", "zstd", "lz4", "snappy"] | None = Field(
        default="zstd",
        description="Batch compression (none: uncompressed). zstd needs Kafka 2.1+ brokers; "
        "it made these records about 40 % smaller than gzip.",
    )
    max_pending: int = Field(
        default=10_000,
        ge=1,
        # The producer queues twice as many writes (their delivery reports wait for a flush).
        le=_INT32_MAX // 2,
        description="Unacknowledged writes allowed before `put` blocks on a flush.",
    )
    request_timeout_ms: int = Field(
        default=30_000, ge=1, le=_MAX_MS, description="Timeout of one request to Kafka."
    )
    delivery_timeout_ms: int = Field(
        default=120_000,
        ge=1,
        le=_INT32_MAX,
        description="How long the producer keeps retrying one write (across broker restarts).",
    )
    restore_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="Upper bound for a restore, and for waiting on the topic's metadata at start.",
    )
    client_id: str = Field(
        default="flink-agents-store", min_length=1, description="Prefix of Kafka client ids."
    )

    @model_validator(mode="after")
    def _kafka_needs_servers(self) -> StoreConfig:
        if self.kind == "kafka" and not self.bootstrap_servers:
            raise ValueError("a kafka store needs bootstrap_servers")
        return self

    def build(self) -> ActionStateStore:
        """A new store; the Kafka one creates its topic if absent (compacted, see the docs)."""
        if self.kind == "memory":
            return InMemoryActionStateStore(secret=secret_from_env(self.secret_env))
        return KafkaActionStateStore(self)
