"""Durable replay with the real Kafka store: the second engine gets a fresh store object
restored from the recovery marker of the last checkpoint."""

import asyncio
import uuid

import pytest

from flink_agents.durable.store.config import StoreConfig
from flink_agents.testing import agent_plan, replay
from tests.durable import helpers as h
from tests.durable.helpers import PROBE

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("fresh_probe")]


def _config(bootstrap: str) -> StoreConfig:
    topic = f"test-durable-{uuid.uuid4().hex[:12]}"
    return StoreConfig(kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=2)


def test_replay_from_a_restored_kafka_store_calls_nothing_twice(kafka_bootstrap):
    plan = agent_plan(h.three_calls, h.prepare, h.finish)
    config = _config(kafka_bootstrap)
    first = config.build()
    marker = first.recovery_marker()  # the checkpoint taken before the inputs arrived

    async def scenario():
        PROBE.hold = "final"
        state = await h.crash_mid_run(plan, first, "k", {"n": 1})
        assert PROBE.counts["third"] == 1 and PROBE.counts["final"] == 1
        PROBE.counts.clear()
        second = config.build()  # a new process: nothing in memory
        try:
            report = second.restore(marker)
            assert report.loaded > 0 and not report.corrupt
            return await replay(plan, second, "k", state)
        finally:
            second.close()

    try:
        result, memory = asyncio.run(scenario())
    finally:
        first.close()
    # three_calls and prepare had completed; only finish's call runs, once
    assert PROBE.counts == {"action:finish": 1, "final": 1}
    assert result.output_values == [[2, 3, 4], {"out": 1 + 1 + 2 + 1, "seen": 1}]
    assert memory.short_term_memory == {"seen": 1, "last": 5}


def test_a_call_interrupted_mid_action_is_replayed_from_kafka(kafka_bootstrap):
    plan = agent_plan(h.three_calls)
    config = _config(kafka_bootstrap)
    first = config.build()
    marker = first.recovery_marker()

    async def scenario():
        PROBE.hold = "third"
        state = await h.crash_mid_run(plan, first, "k", {"n": 1})
        PROBE.counts.clear()
        second = config.build()
        try:
            second.restore(marker)
            return await replay(plan, second, "k", state)
        finally:
            second.close()

    try:
        result, _ = asyncio.run(scenario())
    finally:
        first.close()
    assert PROBE.counts == {"third": 1}
    assert result.output_values == [[2, 3, 4]]
