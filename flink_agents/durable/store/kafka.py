"""Kafka-backed action-state store (confluent-kafka, that is librdkafka).

- Topic: created if absent, `cleanup.policy=compact` (plus `delete` when `retention_ms` is set),
  partitions, replication factor and `min.insync.replicas` from `KafkaStoreSettings`. A store
  opened for reading (`KafkaActionStateStore.existing`) never creates it: a missing one is an
  error.
- Record key: canonical JSON of the full `ActionStateKey` (compaction keeps the last record per
  key, so the key must identify one action's state). Partition: chosen by the store's
  `Placement` (the key's Flink key group in a Flink job, else crc32 of `[agent, key]`), so one
  Flink key's states share a partition.
- Producer: `acks=all`, idempotent, retried until `delivery_timeout_ms`; `put` only buffers (see
  `LogStore`), `flush` produces the buffered writes, waits for every acknowledgement and raises
  `StoreWriteError` for any that failed. Only a flush produces and flushes run one at a time, so
  `Producer.flush` waits for one batch, never for writes put after it was taken.
- Restore reads each partition it needs (under a key-group placement, those that can hold the
  subtask's key groups) from the marker's low offset to its end at restore time.

Why librdkafka: batching, compression, checksums and network I/O run in its own native threads,
outside the GIL that the engine shares with Flink's operator thread in PyFlink's thread mode
(kafka-python, in pure Python, took about a quarter of that interpreter's CPU; see
bench/results/operator.md). Delivery reports are served by `flush` (or `poll`), in the thread
that calls it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from flink_agents.durable.store._codec import DEFAULT_SECRET_ENV, RecordCodec, secret_from_env
from flink_agents.durable.store._limits import DEFAULT_MAX_RECORD_BYTES, RECORD_HEADROOM
from flink_agents.durable.store._log_store import LogRecord, LogStore
from flink_agents.durable.store._placement import ANY_PLACEMENT, CRC32_PLACEMENT, Placement
from flink_agents.durable.store._store_errors import (
    StoreError,
    StoreSecretMissingError,
    StoreWriteError,
)

logger = logging.getLogger(__name__)
#: librdkafka's own log lines (connection failures, retries) go here instead of stderr.
client_logger = logging.getLogger(f"{__name__}.librdkafka")

#: How long `put` waits for room in the producer's queue before it tries again.
_QUEUE_FULL_WAIT_S = 0.05
#: librdkafka's upper bound for its integer settings (a signed 32-bit int).
_INT32_MAX = 2**31 - 1
#: librdkafka's upper bound for `linger.ms` and `request.timeout.ms` (15 minutes).
_MAX_MS = 900_000


class KafkaStoreSettings(BaseModel):
    """Every setting of the Kafka store, declared once; jobs set them through `StoreConfig`
    (store_config.py), which adds the store's kind. Ranges are librdkafka's, so a bad value is
    refused when a job spec is read, not when the job starts on the cluster."""

    model_config = ConfigDict(extra="forbid")

    secret_env: str = Field(
        default=DEFAULT_SECRET_ENV,
        description="Environment variable holding the HMAC secret records are signed with.",
    )
    signing: Literal["required", "off"] = Field(
        default="required",
        description="required: a Kafka store refuses to start unless secret_env is set, signs "
        "every record and reads only records that verify; off: plain JSON records, neither "
        "signed nor verified, that anyone who can write the topic can forge (docs/security.md).",
    )
    bootstrap_servers: str | list[str] | None = Field(
        default=None, description="Kafka brokers (required for kind: kafka)."
    )
    topic: str = Field(default="flink-agents-action-state", description="Store topic, one per job.")
    partitions: int = Field(
        default=4, ge=1, description="Partition count, fixed for the topic's life."
    )
    placement: Literal["key-groups", "crc32"] = Field(
        default="key-groups",
        description="Where a Flink job's store puts each key's records, fixed for the topic's "
        "life. key-groups: by the key's Flink key group, so a restoring subtask reads only the "
        "partitions of its key groups; crc32: by a hash of agent and key, every subtask reads "
        "every partition (topics written before key-group placement). Outside Flink: crc32.",
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
        description="Buffered writes allowed before `put` blocks on a flush.",
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
    max_record_bytes: int = Field(
        default=DEFAULT_MAX_RECORD_BYTES,
        ge=4096,
        description="Largest record (key and value) a store writes, in bytes, for every kind "
        "of store: a call whose result would exceed it fails with OutcomeTooLargeError.",
    )
    message_max_bytes: int = Field(
        default=1_000_000,
        ge=1000,
        le=1_000_000_000,
        description="The producer's message.max.bytes (librdkafka's default); must hold "
        "max_record_bytes and the record headers; the broker's and topic's limits too.",
    )

    def signing_secret(self, *, required: bool = True) -> bytes | None:
        """The secret records are signed and verified with (from ``secret_env``): None with
        ``signing: off``, or when none is set and not ``required``; `StoreSecretMissingError`
        when signing is required and none is set."""
        if self.signing == "off":
            return None
        secret = secret_from_env(self.secret_env)
        if secret is None and required:
            raise StoreSecretMissingError(self.topic, self.secret_env)
        return secret

    def require_secret(self) -> None:
        """Raise `StoreSecretMissingError` when records must be signed and this process has no
        secret: a job checks it where it is built, and its stores where they open."""
        self.signing_secret()

    @model_validator(mode="after")
    def _records_fit_the_producer(self) -> KafkaStoreSettings:
        if self.max_record_bytes + RECORD_HEADROOM > self.message_max_bytes:
            raise ValueError(
                f"max_record_bytes ({self.max_record_bytes:,}) plus {RECORD_HEADROOM:,} bytes "
                f"for record headers exceeds message_max_bytes ({self.message_max_bytes:,}), "
                "the largest message the producer sends: lower the first or raise the second "
                "(and the broker's message.max.bytes, the topic's max.message.bytes)"
            )
        return self


class KafkaActionStateStore(LogStore):
    """`ActionStateStore` on a compacted Kafka topic (a ``kind: kafka`` `StoreConfig`)."""

    def __init__(
        self,
        config: KafkaStoreSettings,
        *,
        create_topic: bool = True,
        placement: Placement = CRC32_PLACEMENT,
    ) -> None:
        """Open the store of ``config.topic``; ``create_topic=False``: the topic must exist (a
        `StoreError` if not), as for the tools that only read it (see :meth:`existing`), and a
        missing secret is not refused (records that do not verify are reported).
        ``placement``: where runs' records go (a Flink job's store places them by key group)."""
        if not config.bootstrap_servers:
            raise ValueError("a Kafka store needs bootstrap_servers")
        self.config = config
        super().__init__(
            topic=config.topic,
            partitions=config.partitions,
            codec=RecordCodec(config.signing_secret(required=create_topic), scope=config.topic),
            max_pending=config.max_pending,
            max_record_bytes=config.max_record_bytes,
            placement=placement,
        )
        servers = config.bootstrap_servers
        self._servers = servers if isinstance(servers, str) else ",".join(servers)
        if not self._codec.signed and create_topic:
            logger.warning(
                "store topic %r: records are not signed (signing: off); anyone who can write "
                "to the topic can forge call results.",
                config.topic,
            )
        if create_topic:
            self._ensure_topic()
        else:
            topic_partitions(self._servers, self.topic, config.request_timeout_ms / 1000)
        self._producer = Producer(
            {
                **self._client_config("producer"),
                "acks": "all",
                "enable.idempotence": True,
                "max.in.flight.requests.per.connection": 5,
                "linger.ms": config.linger_ms,
                "batch.size": config.batch_size,
                "compression.type": config.compression_type or "none",
                "request.timeout.ms": config.request_timeout_ms,
                "delivery.timeout.ms": config.delivery_timeout_ms,
                "message.max.bytes": config.message_max_bytes,
                # Delivery reports wait in the queue until a flush serves them.
                "queue.buffering.max.messages": max(100_000, 2 * config.max_pending),
            }
        )
        self._consumer = self._new_consumer("offsets")  # metadata and end offsets only
        try:
            self._wait_for_partitions()
        except StoreError:
            self._consumer.close()
            raise

    @classmethod
    def existing(
        cls,
        bootstrap_servers: str,
        topic: str,
        *,
        secret_env: str = DEFAULT_SECRET_ENV,
        partitions: int | None = None,
        client_id: str = "flink-agents-reader",
    ) -> KafkaActionStateStore:
        """The store of the existing ``topic``, for the tools that read one (``store inspect``,
        ``store export``, ``replay``): a missing topic is a `StoreError`, never created (a
        mistyped name would otherwise read as an empty topic). ``partitions``: the count the
        caller expects (checked); None: the topic's own. It reads records of any placement
        (`ANY_PLACEMENT`) and writes none."""
        settings = KafkaStoreSettings(bootstrap_servers=bootstrap_servers, topic=topic)
        if partitions is None:
            timeout_s = settings.request_timeout_ms / 1000
            partitions = topic_partitions(bootstrap_servers, topic, timeout_s)
        settings = settings.model_copy(
            update={"partitions": partitions, "secret_env": secret_env, "client_id": client_id}
        )
        return cls(settings, create_topic=False, placement=ANY_PLACEMENT)

    def _ensure_topic(self) -> None:
        topic_configs = {"cleanup.policy": "compact"}
        if self.config.retention_ms is not None:
            topic_configs["cleanup.policy"] = "compact,delete"
            topic_configs["retention.ms"] = str(self.config.retention_ms)
        if self.config.min_insync_replicas is not None:
            topic_configs["min.insync.replicas"] = str(self.config.min_insync_replicas)
        admin = AdminClient(self._client_config("admin"))
        new = NewTopic(
            self.topic,
            num_partitions=self.config.partitions,
            replication_factor=self.config.replication_factor,
            config=topic_configs,
        )
        timeout_s = self.config.request_timeout_ms / 1000
        future = admin.create_topics([new], request_timeout=timeout_s)[self.topic]
        try:
            future.result(timeout=timeout_s)
            logger.info("created store topic %r with %s", self.topic, topic_configs)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise StoreError(f"cannot create store topic {self.topic!r}: {exc}") from exc
        except concurrent.futures.TimeoutError:  # the builtin TimeoutError from 3.11
            raise StoreError(
                f"no answer from Kafka at {self._servers} within {timeout_s:g} s while creating "
                f"store topic {self.topic!r}; is the broker running and reachable?"
            ) from None

    def _wait_for_partitions(self) -> None:
        deadline = time.monotonic() + self.config.restore_timeout_s
        while True:
            try:
                found = self._consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
            except KafkaException as exc:
                found, problem = None, str(exc)
            else:
                problem = str(found.error) if found and found.error else "no metadata yet"
            if found is not None and found.error is None and found.partitions:
                break
            if time.monotonic() > deadline:
                raise StoreError(f"store topic {self.topic!r} at {self._servers}: {problem}")
            time.sleep(0.2)  # metadata of a just-created topic propagates asynchronously
        topic = found
        if len(topic.partitions) != self.partitions:
            raise StoreError(
                f"topic {self.topic!r} has {len(topic.partitions)} partitions, configured "
                f"{self.partitions}; the partitioning of states depends on the count, so it "
                "must match"
            )

    def _send(self, records: list[tuple[int, bytes, bytes | None]]) -> list[_Delivery]:
        """One `produce_batch` per partition for a flush's records: `produce` holds the GIL
        while it waits for librdkafka's queue lock, once per record (bench/results/analysis.md).
        Per partition, since this client ignores a message's own ``partition`` in a batch."""
        deliveries = [_Delivery() for _ in records]
        by_partition: dict[int, list[dict[str, Any]]] = {}
        for (partition, key, value), delivery in zip(records, deliveries, strict=True):
            message = {"key": key, "value": value, "callback": delivery}
            by_partition.setdefault(partition, []).append(message)
        for partition, messages in by_partition.items():
            self._produce_batch(partition, messages)
        return deliveries

    def _produce_batch(self, partition: int, messages: list[dict[str, Any]]) -> None:
        while messages:
            queued = self._producer.produce_batch(self.topic, messages, partition=partition)
            if queued == len(messages):
                return
            refused = [message for message in messages if "_error" in message]
            for message in refused:
                error = message.pop("_error")
                if error.code() != KafkaError._QUEUE_FULL:
                    raise StoreWriteError(f"cannot write to {self.topic!r}: {error}")
            messages = refused  # the queue is full: serve reports until there is room
            self._producer.poll(_QUEUE_FULL_WAIT_S)

    def _await(self, handles: list[_Delivery], timeout: float | None) -> list[int]:
        left = self._producer.flush() if timeout is None else self._producer.flush(timeout)
        offsets: list[int] = []
        failures: list[KafkaError | None] = []
        for delivery in handles:
            if delivery.offset is None:
                failures.append(delivery.error)
            else:
                offsets.append(delivery.offset)
        if failures:
            first = failures[0] or f"not acknowledged in {timeout} s ({left} writes queued)"
            raise StoreWriteError(
                f"{len(failures)} of {len(handles)} writes to {self.topic!r} were not "
                f"acknowledged; first error: {first}"
            )
        return offsets

    def _end_offsets(self, partitions: list[int] | None = None) -> dict[int, int]:
        wanted = range(self.partitions) if partitions is None else partitions
        return {p: self._end_offset(p) for p in wanted}

    def _end_offset(self, partition: int) -> int:
        """The partition's high watermark, asked again on errors until the request timeout.

        A query has no side effect, and the errors seen are transient: "not leader for
        partition" right after the topic was created or while a broker restarts.
        """
        timeout_s = self.config.request_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                tp = TopicPartition(self.topic, partition)
                return self._consumer.get_watermark_offsets(tp, timeout=timeout_s)[1]
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"no end offset for {self.topic!r} partition {partition}: {exc}"
                    ) from exc
                time.sleep(0.1)

    def _read(self, starts: dict[int, int]) -> Iterator[LogRecord]:
        ends = self._end_offsets(list(starts))
        todo = {p for p, start in starts.items() if start < ends[p]}
        if not todo:
            return
        reader = self._new_consumer("restore")
        try:
            reader.assign([TopicPartition(self.topic, p, starts[p]) for p in sorted(todo)])
            deadline = time.monotonic() + self.config.restore_timeout_s
            while todo:
                if time.monotonic() > deadline:
                    raise StoreError(f"restore of {self.topic!r} did not finish in time")
                # consume() returns at num_messages or at the timeout: a short timeout keeps
                # the last, smaller batch from costing a fixed wait (0.5 s took 550 ms a restore).
                for message in reader.consume(num_messages=1000, timeout=0.05):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            todo.discard(message.partition())  # its end now, at or past `ends`
                        elif error.fatal():
                            raise StoreError(f"restore of {self.topic!r} failed: {error}")
                        else:
                            logger.warning("restore of %r: %s (retrying)", self.topic, error)
                        continue
                    partition, offset = message.partition(), message.offset()
                    # A data message always has both; the client's types allow None.
                    if partition is None or offset is None or partition not in todo:
                        continue
                    if offset < ends[partition]:
                        yield partition, offset, message.key(), message.value()
                    # Compacted-away offsets are never seen: stop at the first one at or past
                    # the end (the last offset itself may be gone).
                    if offset >= ends[partition] - 1:
                        todo.discard(partition)
        finally:
            reader.close()

    def _client_config(self, role: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": self._servers,
            "client.id": f"{self.config.client_id}-{role}",
            "logger": client_logger,
        }

    def _new_consumer(self, role: str) -> Consumer:
        return Consumer(
            {
                **self._client_config(role),
                # Partitions are assigned by hand and no offset is committed; librdkafka still
                # wants a group id, so it is unique and never joined.
                "group.id": f"{self.config.client_id}-{role}-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                # Its metadata requests name the topic: a broker that auto-creates topics would
                # create a missing one (the store creates its topic itself, configured).
                "allow.auto.create.topics": False,
            }
        )

    def close(self) -> None:
        """Flush, then close the reader (the producer is freed with the store)."""
        try:
            self.flush(timeout=self.config.delivery_timeout_ms / 1000)
        finally:
            self._consumer.close()


def topic_partitions(bootstrap_servers: str, topic: str, timeout_s: float) -> int:
    """The partition count of the existing ``topic``; a `StoreError` if the brokers have none.

    Asks for every topic's metadata: asking for one by name lets a broker auto-create it.
    """
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "logger": client_logger}
    admin = AdminClient(config)
    try:
        metadata = admin.list_topics(timeout=timeout_s).topics.get(topic)
    except KafkaException as exc:
        raise StoreError(
            f"no answer from Kafka at {bootstrap_servers} within {timeout_s:g} s while looking "
            f"for store topic {topic!r}: {exc}"
        ) from exc
    if metadata is not None and metadata.error is None and metadata.partitions:
        return len(metadata.partitions)
    error = None if metadata is None else metadata.error
    if error is None or error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
        raise StoreError(f"store topic {topic!r} at {bootstrap_servers}: no such topic")
    raise StoreError(f"store topic {topic!r} at {bootstrap_servers}: {error}")


class _Delivery:
    """A write's delivery report: its offset once acknowledged, or the error."""

    __slots__ = ("error", "offset")

    def __init__(self) -> None:
        self.offset: int | None = None
        self.error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.offset = message.offset()
        else:
            self.error = error
