"""Which action-state store a job uses and every setting of it: the one store configuration.

A job spec's ``store`` section, the Python API (``AgentsExecutionEnvironment(store=...)``) and
``KafkaActionStateStore`` itself all take a `StoreConfig`; ``python -m scripts.regenerate``
publishes it as part of the job spec's JSON Schema. The Kafka settings are declared once, in
`KafkaStoreSettings` (kafka.py, which cannot import this module: it builds the store).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from flink_agents.durable.store._base import ActionStateStore
from flink_agents.durable.store._in_memory import InMemoryActionStateStore
from flink_agents.durable.store._placement import CRC32_PLACEMENT, Placement
from flink_agents.durable.store.kafka import KafkaActionStateStore, KafkaStoreSettings


class StoreConfig(KafkaStoreSettings):
    """``kind: memory`` (one process, lost with it: tests and local runs) or ``kind: kafka``.

    ``mismatch_policy`` is the default for agents whose config does not set
    ``durable.mismatch_policy`` (see docs/durable-execution.md); ``record_arguments`` whether a
    call's record carries its arguments (docs/state-store.md). The inherited settings are the
    Kafka store's (docs/state-store.md); a memory store uses only ``secret_env`` and
    ``max_record_bytes``.
    """

    kind: Literal["memory", "kafka"] = "memory"
    mismatch_policy: Literal["fail", "warn"] = Field(
        default="fail",
        description="For agents that do not set durable.mismatch_policy: what a replay does "
        "when a call differs from its record.",
    )
    record_arguments: bool = Field(
        default=True,
        description="Record each call's arguments (their JSON, at most 8 KiB per call) for "
        "mismatch diffs and the replay tool; off: smaller records, no arguments shown.",
    )

    @model_validator(mode="after")
    def _kafka_needs_servers(self) -> StoreConfig:
        if self.kind == "kafka" and not self.bootstrap_servers:
            raise ValueError("a kafka store needs bootstrap_servers")
        return self

    def signing_secret(self, *, required: bool = True) -> bytes | None:
        """As for a Kafka store; a memory store's records never leave the process, so it signs
        only when a secret is set (pickled payloads need one) and never requires one."""
        return super().signing_secret(required=required and self.kind == "kafka")

    def build(self, max_parallelism: int | None = None) -> ActionStateStore:
        """A new store; the Kafka one creates its topic if absent (compacted, see the docs).

        ``max_parallelism``: the Flink job's (its key groups), for ``placement: key-groups``;
        None (outside Flink): records are placed by crc32.
        """
        placement = self.placement_for(max_parallelism)
        if self.kind == "memory":
            return InMemoryActionStateStore(
                secret=self.signing_secret(),
                max_record_bytes=self.max_record_bytes,
                placement=placement,
            )
        return KafkaActionStateStore(self, placement=placement)

    def placement_for(self, max_parallelism: int | None) -> Placement:
        """The placement a store of this configuration uses in a job of ``max_parallelism``
        key groups (None: not a Flink job)."""
        if self.placement == "key-groups" and max_parallelism is not None:
            return Placement(max_parallelism)
        return CRC32_PLACEMENT
