"""The ``stores`` fixture: the durable tests' store pairs, in memory and on the real Kafka."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.testing import Stores
from tests.durable.helpers import PROBE
from tests.sample_agents import RecordingChatConnection


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.kafka)])
def stores(request: pytest.FixtureRequest) -> Iterator[Stores]:
    """A live store and restorable successors over one log: in memory, then over Kafka."""
    if request.param == "memory":
        built = Stores.in_memory()
    else:
        config = StoreConfig(
            kind="kafka",
            bootstrap_servers=request.getfixturevalue("kafka_bootstrap"),
            topic=f"test-fidelity-{uuid.uuid4().hex[:12]}",
            partitions=2,
        )
        built = Stores(config.build)
    try:
        yield built
    finally:
        built.close()


@pytest.fixture
def fresh_probe_and_requests() -> Iterator[None]:
    """The probe's counts and the recording model's requests empty before and after a test."""
    PROBE.reset()
    RecordingChatConnection.requests.clear()
    yield
    PROBE.reset()
    RecordingChatConnection.requests.clear()
