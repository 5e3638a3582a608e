"""A Kafka topic of JSON text records, as ``flink-agents waits`` uses one: append a record to
an existing topic, or read every record of one from its start to its end when called.

Neither creates the topic (a broker may auto-create one asked for by name): a mistyped name
fails as :class:`TopicError` instead of writing where no job reads, or reading as empty.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

TIMEOUT_S = 10.0
"""How long a broker may take to answer before the command gives up."""


class TopicError(Exception):
    """The topic cannot be used: no broker answered, it does not exist, or a write failed."""


def append(servers: str, topic: str, key: str, value: str) -> None:
    """Write one record (Kafka key ``key``: a key's records stay in one partition, in order)
    and wait until the broker has it."""
    producer = Producer({"bootstrap.servers": servers, "client.id": "flink-agents-waits"})
    _require_topic(producer, servers, topic)
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            failures.append(str(error.str()))

    producer.produce(topic, key=key.encode(), value=value.encode(), on_delivery=delivered)
    if producer.flush(TIMEOUT_S) > 0:
        failures.append(f"not acknowledged within {TIMEOUT_S:g} s")
    if failures:
        raise TopicError(f"writing to topic {topic!r} at {servers}: {failures[0]}")


def read(servers: str, topic: str) -> Iterator[str]:
    """Every record of ``topic`` as text, partition after partition, each in order."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "client.id": "flink-agents-waits",
            "group.id": f"flink-agents-waits-{uuid.uuid4().hex}",  # never joined or committed
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = _require_topic(consumer, servers, topic)
        for partition in partitions:
            yield from _read_partition(consumer, topic, partition)
    except KafkaException as exc:
        raise TopicError(f"reading topic {topic!r} at {servers}: {exc}") from exc
    finally:
        consumer.close()


def _require_topic(client: Producer | Consumer, servers: str, topic: str) -> list[int]:
    # Every topic's metadata: asking for one by name lets a broker auto-create it.
    try:
        metadata = client.list_topics(timeout=TIMEOUT_S).topics.get(topic)
    except KafkaException as exc:
        raise TopicError(f"no Kafka broker answered at {servers} ({exc.args[0].str()})") from exc
    if metadata is None:
        raise TopicError(f"no topic {topic!r} at {servers}")
    if metadata.error is not None:
        raise TopicError(f"topic {topic!r} at {servers}: {metadata.error.str()}")
    return sorted(metadata.partitions)


def _read_partition(consumer: Consumer, topic: str, partition: int) -> Iterator[str]:
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S)
    consumer.assign([TopicPartition(topic, partition, low)])
    offset, deadline = low, time.monotonic() + TIMEOUT_S
    while offset < high:
        if time.monotonic() > deadline:
            raise TopicError(f"reading topic {topic!r} took over {TIMEOUT_S:g} s")
        message = consumer.poll(0.1)
        if message is None:
            continue
        error = message.error()
        if error is not None:
            raise KafkaException(error)
        offset = (message.offset() or 0) + 1
        value = message.value()
        if value is not None:
            yield value.decode(errors="replace")
