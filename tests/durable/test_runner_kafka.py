"""Durable replay with the real Kafka store: the second engine gets a fresh store object
restored from the recovery marker of the last checkpoint."""

import asyncio
import uuid
from collections import Counter

import pytest

from flink_agents.durable.store import RestoreReport
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.engine import RunResult
from flink_agents.runtime.state import KeyState
from flink_agents.testing import agent_plan, resume
from tests.durable import helpers as h
from tests.durable.helpers import PROBE

pytestmark = [pytest.mark.kafka, pytest.mark.usefixtures("fresh_probe")]


def _config(bootstrap: str) -> StoreConfig:
    topic = f"test-durable-{uuid.uuid4().hex[:12]}"
    return StoreConfig(kind="kafka", bootstrap_servers=bootstrap, topic=topic, partitions=2)


def _crash_then_replay_on_a_new_store(
    plan: AgentPlan, bootstrap: str, hold: str
) -> tuple[RunResult, KeyState, RestoreReport, Counter[str]]:
    """Run ``{"n": 1}`` until the ``hold`` call and crash; replay on a new store restored from
    the checkpoint taken before the input arrived. Returns the replay's result and memory, the
    restore's report and the calls counted up to the crash."""
    config = _config(bootstrap)
    first = config.build()
    marker = first.recovery_marker()  # the checkpoint taken before the inputs arrived

    async def scenario() -> tuple[RunResult, KeyState, RestoreReport, Counter[str]]:
        PROBE.hold = hold
        state = await h.crash_mid_run(plan, first, "k", {"n": 1})
        at_crash = Counter(PROBE.counts)
        PROBE.counts.clear()
        second = config.build()  # a new process: nothing in memory
        try:
            report = second.restore(marker)
            result, memory = await resume(plan, second, "k", state)
            return result, memory, report, at_crash
        finally:
            second.close()

    try:
        return asyncio.run(scenario())
    finally:
        first.close()


def test_replay_from_a_restored_kafka_store_calls_nothing_twice(kafka_bootstrap):
    result, memory, report, at_crash = _crash_then_replay_on_a_new_store(
        agent_plan(h.three_calls, h.prepare, h.finish), kafka_bootstrap, hold="final"
    )
    assert at_crash["third"] == 1 and at_crash["final"] == 1
    assert report.loaded > 0 and not report.corrupt
    # three_calls and prepare had completed; only finish's call runs, once
    assert PROBE.counts == {"action:finish": 1, "final": 1}
    assert result.output_values == [[2, 3, 4], {"out": 1 + 1 + 2 + 1, "seen": 1}]
    assert memory.short_term_memory == {"seen": 1, "last": 5}


def test_a_call_interrupted_mid_action_is_replayed_from_kafka(kafka_bootstrap):
    result, _, _, _ = _crash_then_replay_on_a_new_store(
        agent_plan(h.three_calls), kafka_bootstrap, hold="third"
    )
    assert PROBE.counts == {"third": 1}
    assert result.output_values == [[2, 3, 4]]
