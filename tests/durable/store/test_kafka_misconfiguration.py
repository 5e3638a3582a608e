"""A misconfigured Kafka store fails with an error naming the problem, never by losing records
silently: a partition count that changed, a topic deleted while the job ran, pickled payloads
without the HMAC secret, a store that must sign without its secret, a recovery marker of
another topic."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from kafka.admin import KafkaAdminClient, NewPartitions

from flink_agents.durable.store import (
    ActionState,
    CallResult,
    PickleNotAllowedError,
    RunKey,
    StoreError,
    StoreSecretMissingError,
)
from flink_agents.durable.store.kafka import KafkaActionStateStore
from flink_agents.durable.store.store_config import StoreConfig
from tests.durable.store.payload_types import Opaque

pytestmark = pytest.mark.kafka


@pytest.fixture
def admin(kafka_bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    yield client
    client.close()


@pytest.fixture
def topic() -> str:
    return f"test-misconfig-{uuid.uuid4().hex[:12]}"


def _store(bootstrap: str, topic: str, partitions: int = 2, **fields) -> KafkaActionStateStore:
    config = StoreConfig(
        kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=partitions, **fields
    )
    return KafkaActionStateStore(config)


def _recorded(key: str, value: object = 1) -> ActionState:
    state = ActionState(key=RunKey(agent="a", key=key, seq=0).action("act"))
    state.record_call(CallResult.pending("c-0").succeed(value))
    return state


def test_a_changed_partition_count_is_refused_at_start(kafka_bootstrap, topic, admin) -> None:
    _store(kafka_bootstrap, topic, partitions=2).close()
    admin.create_partitions({topic: NewPartitions(total_count=3)})
    # States are placed by hash modulo the count: with another count, a key's states move.
    with pytest.raises(StoreError, match="has 3 partitions, configured 2"):
        _store(kafka_bootstrap, topic, partitions=2)


def test_a_topic_deleted_while_running_fails_the_restore(kafka_bootstrap, topic, admin) -> None:
    store = _store(kafka_bootstrap, topic)
    for n in range(6):
        store.put(_recorded(f"k{n}"))
    marker = store.recovery_marker()  # taken with the checkpoint; then the topic goes
    store.close()
    admin.delete_topics([topic])
    deadline = time.monotonic() + 30
    while topic in admin.list_topics() and time.monotonic() < deadline:
        time.sleep(0.2)

    recreated = _store(kafka_bootstrap, topic)  # creates the topic anew, empty
    try:
        with pytest.raises(StoreError, match="shorter than the recovery marker"):
            recreated.restore(marker)
    finally:
        recreated.close()


def test_a_store_without_its_secret_refuses_to_start(kafka_bootstrap, topic, admin) -> None:
    with pytest.raises(StoreSecretMissingError, match="FA_TEST_NO_SUCH_SECRET is not set"):
        _store(kafka_bootstrap, topic, secret_env="FA_TEST_NO_SUCH_SECRET")
    assert topic not in admin.list_topics()  # refused before anything was created


def test_pickled_payloads_need_the_hmac_secret(kafka_bootstrap, topic, monkeypatch) -> None:
    unsigned = _store(kafka_bootstrap, topic, secret_env="FA_TEST_NO_SUCH_SECRET", signing="off")
    try:
        with pytest.raises(PickleNotAllowedError, match="secret"):
            unsigned.put(_recorded("k", Opaque(1)))  # refused before anything is written
        marker = unsigned.recovery_marker()
    finally:
        unsigned.close()

    monkeypatch.setenv("FA_TEST_SECRET_M", "s3cret")
    signed = _store(kafka_bootstrap, topic, secret_env="FA_TEST_SECRET_M")
    signed.put(_recorded("k", Opaque(2)))
    signed.flush()
    signed.close()
    # A job that lost its secret reads the signed record as corrupt: reported, never loaded.
    reader = _store(kafka_bootstrap, topic, secret_env="FA_TEST_NO_SUCH_SECRET", signing="off")
    try:
        report = reader.restore(marker)
        assert report.loaded == 0 and len(report.corrupt) == 1
        assert "no store secret" in report.corrupt[0].reason
    finally:
        reader.close()


def test_a_marker_of_another_topic_is_refused(kafka_bootstrap, topic) -> None:
    other = _store(kafka_bootstrap, f"{topic}-other")
    marker = other.recovery_marker()
    other.close()
    store = _store(kafka_bootstrap, topic)
    try:
        with pytest.raises(StoreError, match="marker is for topic"):
            store.restore(marker)
    finally:
        store.close()
