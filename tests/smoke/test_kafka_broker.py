"""The broker started by scripts/kafka.sh is a real Kafka: a record goes through it."""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.kafka


def test_produce_and_consume_one_record(kafka_bootstrap: str) -> None:
    topic = f"smoke-{uuid.uuid4().hex[:12]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    admin.close()

    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    metadata = producer.send(topic, key=b"k", value=b"hello broker").get(timeout=30)
    producer.close()
    assert metadata.offset == 0

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=15_000,
    )
    received = [(m.key, m.value) for m in consumer]
    consumer.close()
    assert received == [(b"k", b"hello broker")]
