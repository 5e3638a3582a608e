"""StoreConfig: the store a host builds from configuration."""

import pytest

from flink_agents.durable.store import InMemoryActionStateStore
from flink_agents.durable.store.kafka import KafkaActionStateStore
from flink_agents.durable.store.store_config import StoreConfig


def test_store_config_builds_the_in_memory_store_and_checks_kafka_settings():
    assert isinstance(StoreConfig().build(), InMemoryActionStateStore)
    with pytest.raises(ValueError, match="bootstrap_servers"):
        StoreConfig(kind="kafka")
    with pytest.raises(ValueError, match="mismatch_policy"):
        StoreConfig(mismatch_policy="ignore")


def test_call_arguments_are_recorded_by_default():
    assert StoreConfig().record_arguments
    assert not StoreConfig(record_arguments=False).record_arguments


def test_the_kafka_store_refuses_a_config_without_servers():
    with pytest.raises(ValueError, match="bootstrap_servers"):
        KafkaActionStateStore(StoreConfig(kind="memory"))
