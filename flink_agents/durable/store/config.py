"""Which action-state store a job uses, as configuration a host (the Flink operator) builds."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flink_agents.durable.store.base import ActionStateStore
from flink_agents.durable.store.codec import DEFAULT_SECRET_ENV, secret_from_env
from flink_agents.durable.store.kafka import KafkaActionStateStore, KafkaStoreConfig
from flink_agents.durable.store.memory import InMemoryActionStateStore


class StoreConfig(BaseModel):
    """``kind: memory`` (one process, lost with it: tests and local runs) or ``kind: kafka``.

    ``mismatch_policy`` is the default for agents whose config does not set
    ``durable.mismatch_policy`` (see docs/durable-execution.md).
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["memory", "kafka"] = "memory"
    bootstrap_servers: str | list[str] | None = None
    topic: str = "flink-agents-action-state"
    partitions: int = Field(default=4, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    min_insync_replicas: int | None = Field(default=None, ge=1)
    #: Environment variable holding the HMAC secret (unset or empty: unsigned JSON records).
    secret_env: str = DEFAULT_SECRET_ENV
    mismatch_policy: Literal["fail", "warn"] = "fail"

    @model_validator(mode="after")
    def _kafka_needs_servers(self) -> StoreConfig:
        if self.kind == "kafka" and not self.bootstrap_servers:
            raise ValueError("a kafka store needs bootstrap_servers")
        return self

    def build(self) -> ActionStateStore:
        """A new store; the Kafka one creates its topic if absent (compacted, see the docs)."""
        if self.kind == "memory":
            return InMemoryActionStateStore(secret=secret_from_env(self.secret_env))
        assert self.bootstrap_servers is not None
        return KafkaActionStateStore(
            KafkaStoreConfig(
                bootstrap_servers=self.bootstrap_servers,
                topic=self.topic,
                partitions=self.partitions,
                replication_factor=self.replication_factor,
                min_insync_replicas=self.min_insync_replicas,
                secret_env=self.secret_env,
            )
        )
