"""Kafka-backed action-state store (kafka-python).

- Topic: created if absent, `cleanup.policy=compact` (plus `delete` when `retention_ms` is set),
  partitions, replication factor and `min.insync.replicas` from `KafkaStoreConfig`.
- Record key: canonical JSON of the full `ActionStateKey` (compaction keeps the last record per
  key, so the key must identify one action's state). Partition: chosen by the store with
  `partition_for` (crc32 of `[agent, key]`), so one Flink key's states share a partition.
- Producer: `acks=all`, idempotent, retried until `delivery_timeout_ms`; `put` only enqueues,
  `flush` waits for every acknowledgement and raises `StoreWriteError` for any that failed.
- Restore reads each partition from the marker's low offset to its end at restore time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any, Literal

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.codec import has_zstd
from kafka.errors import KafkaError, TopicAlreadyExistsError
from pydantic import BaseModel, Field

from flink_agents.runtime.store.codec import DEFAULT_SECRET_ENV, RecordCodec, secret_from_env
from flink_agents.runtime.store.errors import StoreError, StoreWriteError
from flink_agents.runtime.store.log import LogRecord, LogStore

logger = logging.getLogger(__name__)


class KafkaStoreConfig(BaseModel):
    """Configuration of a `KafkaActionStateStore` (see docs/state-store.md)."""

    bootstrap_servers: str | list[str]
    topic: str
    partitions: int = Field(default=4, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    #: `min.insync.replicas` for a created topic; None keeps the broker default.
    min_insync_replicas: int | None = Field(default=None, ge=1)
    #: None: compaction only. Otherwise `compact,delete` with this `retention.ms`, a backstop
    #: for states that were never pruned (see the docs).
    retention_ms: int | None = Field(default=None, ge=1)
    #: Environment variable holding the HMAC secret; unset or empty means unsigned JSON.
    secret_env: str = DEFAULT_SECRET_ENV
    linger_ms: int = Field(default=5, ge=0)
    #: Producer batch size in bytes (before compression). Large batches and compression cut
    #: the producer thread's CPU, which competes with the event loop for the GIL: kafka-python
    #: checksums every batch in pure Python unless the `crc32c` package is installed.
    batch_size: int = Field(default=512 * 1024, ge=1)
    #: Default: zstd (15x cheaper than kafka-python's gzip level 9, 40% smaller) if the
    #: `zstandard` package is installed (apache-beam, under apache-flink, brings it; brokers need
    #: Kafka 2.1+), else gzip from the standard library.
    compression_type: Literal["gzip", "zstd", "lz4", "snappy"] | None = Field(
        default_factory=lambda: "zstd" if has_zstd() else "gzip"
    )
    #: Unacknowledged writes allowed before `put` blocks on a flush.
    max_pending: int = Field(default=10_000, ge=1)
    request_timeout_ms: int = Field(default=30_000, ge=1)
    #: How long the producer keeps retrying one write (across broker restarts).
    delivery_timeout_ms: int = Field(default=120_000, ge=1)
    #: Upper bound for a restore, and for waiting on the topic's metadata at start.
    restore_timeout_s: float = Field(default=300.0, gt=0)
    client_id: str = "flink-agents-store"


class KafkaActionStateStore(LogStore):
    """`ActionStateStore` on a compacted Kafka topic."""

    def __init__(self, config: KafkaStoreConfig) -> None:
        self.config = config
        super().__init__(
            topic=config.topic,
            partitions=config.partitions,
            codec=RecordCodec(secret_from_env(config.secret_env)),
            max_pending=config.max_pending,
        )
        self._ensure_topic()
        self._producer = KafkaProducer(
            bootstrap_servers=config.bootstrap_servers,
            client_id=config.client_id,
            acks="all",
            enable_idempotence=True,
            max_in_flight_requests_per_connection=5,
            linger_ms=config.linger_ms,
            batch_size=config.batch_size,
            compression_type=config.compression_type,
            request_timeout_ms=config.request_timeout_ms,
            delivery_timeout_ms=config.delivery_timeout_ms,
        )
        self._consumer = self._new_consumer("offsets")  # metadata and end offsets only
        self._tps = [TopicPartition(config.topic, p) for p in range(config.partitions)]
        self._wait_for_partitions()

    def _ensure_topic(self) -> None:
        topic_configs = {"cleanup.policy": "compact"}
        if self.config.retention_ms is not None:
            topic_configs["cleanup.policy"] = "compact,delete"
            topic_configs["retention.ms"] = str(self.config.retention_ms)
        if self.config.min_insync_replicas is not None:
            topic_configs["min.insync.replicas"] = str(self.config.min_insync_replicas)
        admin = KafkaAdminClient(
            bootstrap_servers=self.config.bootstrap_servers,
            client_id=f"{self.config.client_id}-admin",
            request_timeout_ms=self.config.request_timeout_ms,
        )
        try:
            new = NewTopic(
                self.topic,
                num_partitions=self.config.partitions,
                replication_factor=self.config.replication_factor,
                topic_configs=topic_configs,
            )
            admin.create_topics([new])
            logger.info("created store topic %r with %s", self.topic, topic_configs)
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()

    def _wait_for_partitions(self) -> None:
        deadline = time.monotonic() + self.config.restore_timeout_s
        while True:
            found = self._consumer.partitions_for_topic(self.topic)
            if found:
                break
            if time.monotonic() > deadline:
                raise StoreError(f"topic {self.topic!r} has no metadata")
            time.sleep(0.2)  # metadata of a just-created topic propagates asynchronously
        if len(found) != self.partitions:
            raise StoreError(
                f"topic {self.topic!r} has {len(found)} partitions, configured {self.partitions}; "
                "the partitioning of states depends on the count, so it must match"
            )

    def _send(self, partition: int, key: bytes, value: bytes | None) -> Any:
        return self._producer.send(self.topic, key=key, value=value, partition=partition)

    def _await(self, handles: list[Any], timeout: float | None) -> list[int]:
        try:
            self._producer.flush(timeout=timeout)
        except KafkaError as exc:
            raise StoreWriteError(f"flush of {len(handles)} writes timed out: {exc}") from exc
        offsets: list[int] = []
        failures: list[Exception] = []
        for future in handles:
            try:
                offsets.append(future.get(timeout=0).offset)
            except KafkaError as exc:
                failures.append(exc)
        if failures:
            raise StoreWriteError(
                f"{len(failures)} of {len(handles)} writes to {self.topic!r} were not "
                f"acknowledged; first error: {failures[0]!r}"
            )
        return offsets

    def _end_offsets(self) -> dict[int, int]:
        return {tp.partition: end for tp, end in self._consumer.end_offsets(self._tps).items()}

    def _read(self, starts: dict[int, int]) -> Iterator[LogRecord]:
        ends = self._end_offsets()
        todo = {tp for tp in self._tps if starts[tp.partition] < ends[tp.partition]}
        if not todo:
            return
        # A fresh consumer per restore: reusing one across assignments left a partition
        # without fetches in kafka-python 3, and restores are rare.
        reader = self._new_consumer("restore")
        try:
            reader.assign(list(todo))
            for tp in todo:
                reader.seek(tp, starts[tp.partition])
            deadline = time.monotonic() + self.config.restore_timeout_s
            while todo:
                if time.monotonic() > deadline:
                    raise StoreError(f"restore of {self.topic!r} did not finish in time")
                for tp, records in reader.poll(timeout_ms=500).items():
                    for record in records:
                        if record.offset < ends[tp.partition]:
                            yield tp.partition, record.offset, record.key, record.value
                # Compacted-away offsets are skipped: compare positions, not offsets seen.
                done = {tp for tp in todo if reader.position(tp) >= ends[tp.partition]}
                if done:
                    reader.pause(*done)
                    todo -= done
        finally:
            reader.close()

    def _new_consumer(self, role: str) -> KafkaConsumer:
        return KafkaConsumer(
            bootstrap_servers=self.config.bootstrap_servers,
            client_id=f"{self.config.client_id}-{role}",
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=self.config.request_timeout_ms,
        )

    def close(self) -> None:
        """Flush, then close the producer and the reader."""
        try:
            self.flush(timeout=self.config.delivery_timeout_ms / 1000)
        finally:
            self._producer.close()
            self._consumer.close()
