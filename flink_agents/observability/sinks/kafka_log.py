"""The event log on a Kafka topic (confluent-kafka): a sink that produces from its own thread,
and a reader that reads a topic back (for ``flink-agents trace --topic``)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from flink_agents.observability.log_records import LogRecord, parse_record, record_json
from flink_agents.observability.sinks.queued import QueuedSink
from flink_agents.observability.sinks.sink_config import KafkaEventLogConfig

logger = logging.getLogger(__name__)
#: librdkafka's own log lines (connection failures, retries) go here instead of stderr.
client_logger = logging.getLogger(f"{__name__}.librdkafka")

_QUEUE_FULL_WAIT_S = 0.05
_CLOSE_TIMEOUT_S = 30.0
_READ_TIMEOUT_S = 60.0


class KafkaEventLogSink(QueuedSink[LogRecord]):
    """Produces one record per event-log record to ``config.topic``.

    Serializing and producing run on the sink's thread; librdkafka sends from its own. Delivery
    is at least once (idempotent producer, ``acks=all``); a record Kafka refuses is counted in
    :attr:`failed` and logged, never raised into a run. :meth:`close` waits (up to 30 s) for
    what is queued to be acknowledged.
    """

    def __init__(self, config: KafkaEventLogConfig) -> None:
        self.config = config
        self.failed = 0
        ensure_topic(config)
        self._producer = Producer(
            {
                **_client_config(config, "producer"),
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": config.linger_ms,
                "compression.type": config.compression_type or "none",
            }
        )
        super().__init__(f"event-log:{config.topic}")

    def _queued(self, record: LogRecord) -> LogRecord:
        return record

    def _write_batch(self, items: list[LogRecord]) -> None:
        for record in items:
            self._produce(record)
        self._producer.poll(0)  # delivery reports

    def _produce(self, record: LogRecord) -> None:
        key = json.dumps([record.agent, record.key, record.seq], sort_keys=True).encode()
        value = record_json(record).encode()
        while True:
            try:
                self._producer.produce(
                    self.config.topic, value=value, key=key, on_delivery=self._delivered
                )
                return
            except BufferError:  # the producer's queue is full: serve reports until there is room
                self._producer.poll(_QUEUE_FULL_WAIT_S)

    def _finish(self) -> None:
        left = self._producer.flush(_CLOSE_TIMEOUT_S)
        if left:
            self.failed += left
            logger.warning("event log %r: %d records not acknowledged", self.config.topic, left)

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failed += 1
            logger.warning("event log %r: a record was not written: %s", self.config.topic, error)


def ensure_topic(config: KafkaEventLogConfig) -> None:
    """Create the event log's topic unless it exists."""
    topic_config = {"cleanup.policy": "delete"}
    if config.retention_ms is not None:
        topic_config["retention.ms"] = str(config.retention_ms)
    new = NewTopic(
        config.topic,
        num_partitions=config.partitions,
        replication_factor=config.replication_factor,
        config=topic_config,
    )
    admin = AdminClient(_client_config(config, "admin"))
    try:
        admin.create_topics([new])[config.topic].result(timeout=_READ_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def read_topic(
    config: KafkaEventLogConfig, timeout_s: float = _READ_TIMEOUT_S
) -> Iterator[LogRecord]:
    """The records of an event-log topic, from its start to its end when called: each run's
    records in order (a run is in one partition), partitions one after the other. A Kafka
    error is raised as a ``ConnectionError``."""
    consumer = Consumer(
        {
            **_client_config(config, "reader"),
            "group.id": f"{config.client_id}-reader-{uuid.uuid4().hex}",  # never joined
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        # Every topic's metadata: asking for one by name lets a broker auto-create it.
        metadata = consumer.list_topics(timeout=timeout_s).topics.get(config.topic)
        if metadata is None:
            raise ConnectionError(f"no event log topic {config.topic!r} at {config.servers}")
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        for partition in sorted(metadata.partitions):
            yield from _read_partition(consumer, config.topic, partition, timeout_s)
    except KafkaException as exc:
        raise ConnectionError(
            f"event log topic {config.topic!r} at {config.servers}: {exc}"
        ) from exc
    finally:
        consumer.close()


def _read_partition(
    consumer: Consumer, topic: str, partition: int, timeout_s: float
) -> Iterator[LogRecord]:
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
    if low >= high:
        return
    consumer.assign([TopicPartition(topic, partition, low)])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for message in consumer.consume(num_messages=1000, timeout=0.1):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return
                raise KafkaException(error)
            value, offset = message.value(), message.offset()
            if value is not None and offset is not None and offset < high:
                yield parse_record(value, f"topic {topic!r} partition {partition} offset {offset}")
            if offset is not None and offset >= high - 1:
                return
    raise TimeoutError(f"reading {topic!r} partition {partition} took over {timeout_s:g} s")


def _client_config(config: KafkaEventLogConfig, role: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": config.servers,
        "client.id": f"{config.client_id}-{role}",
        "logger": client_logger,
    }
