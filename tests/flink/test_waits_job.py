"""Waits on the mini-cluster: decisions on the operator's second input resume paused runs
(docs/waits.md)."""

from __future__ import annotations

import json
import uuid

import pytest

from flink_agents.durable.store import StoreConfig
from flink_agents.durable.store.inspect import open_store
from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.runtime import RuntimeSettings
from tests.runtime.test_waits import PLAN, wait_id_of
from tests.runtime.test_waits_alongside import ALONGSIDE, QUOTES
from tests.runtime.test_waits_alongside import wait_id_of as alongside_wait_id

pytestmark = pytest.mark.flink


def test_decisions_on_the_second_input_resume_their_runs(fresh_flink_env) -> None:
    agents = AgentsExecutionEnvironment(
        fresh_flink_env, settings=RuntimeSettings(store=StoreConfig(kind="memory"))
    )
    inputs = [{"id": key, "amount": n} for n, key in enumerate("abc", start=10)]
    decisions = [
        # Paced, so the runs have paused before the decisions come; the first is for no wait.
        {"id": "z", "wait": "no-such-wait", "verdict": "approve"},
        {"id": "a", "wait": wait_id_of("a"), "verdict": "approve", "by": "ann"},
        {"id": "b", "wait": wait_id_of("b"), "verdict": "edit", "arguments": {"amount": 1}},
        {"id": "c", "wait": wait_id_of("c"), "verdict": "reject", "message": "no"},
        {"id": "a", "wait": wait_id_of("a"), "verdict": "approve", "by": "ann"},  # a duplicate
    ]
    agent_input = agents.from_list(inputs, key="id").with_decisions(
        agents.from_list(decisions, key="id", records_per_second=2)
    )
    lines = [
        json.loads(line) for line in agent_input.apply(PLAN).to_datastream().execute_and_collect()
    ]

    waiting = sorted(line["key"] for line in lines if "waiting" in line)
    answers = {line["key"]: line["output"] for line in lines if "output" in line}
    refused = [(line["key"], line["refused"]["reason"]) for line in lines if "refused" in line]
    assert waiting == ["a", "b", "c"]
    assert answers == {
        "a": {"refund": "refunded 10", "by": "ann"},
        "b": {"refund": "refunded 1", "by": None},
        "c": {"verdict": "rejected", "why": "no"},
    }
    assert refused == [("z", "no wait of this key is open or to come")]


@pytest.mark.kafka
def test_later_inputs_run_alongside_paused_runs_with_the_kafka_store(
    fresh_flink_env, kafka_bootstrap: str
) -> None:
    """``while_paused: alongside`` on the mini-cluster, calls recorded in a Kafka store topic:
    the key's inputs that do not wait answer while the two that do are paused, each paused run
    resumes with its own decision, and every run has its own records, its quote made once."""
    QUOTES.clear()
    topic = f"test-alongside-{uuid.uuid4().hex[:12]}"
    store = StoreConfig(kind="kafka", bootstrap_servers=kafka_bootstrap, topic=topic)
    agents = AgentsExecutionEnvironment(fresh_flink_env, settings=RuntimeSettings(store=store))
    inputs = [
        {"order_key": "k", "order": "o1", "ask": True},
        {"order_key": "k", "order": "o2"},
        {"order_key": "k", "order": "o3", "ask": True},
        {"order_key": "k", "order": "o4"},
    ]
    decisions = [  # the later run's first
        {"order_key": "k", "wait": alongside_wait_id("k", 2), "verdict": "approve", "by": "bo"},
        {"order_key": "k", "wait": alongside_wait_id("k", 0), "verdict": "reject", "by": "ann"},
    ]
    agent_input = agents.from_list(inputs, key="order_key").with_decisions(
        agents.from_list(decisions, key="order_key", records_per_second=2)
    )
    lines = [
        json.loads(line)
        for line in agent_input.apply(ALONGSIDE).to_datastream().execute_and_collect()
    ]

    assert sorted(line["seq"] for line in lines if "waiting" in line) == [0, 2]
    answers = {line["seq"]: line["output"] for line in lines if "output" in line}
    assert {seq: a["order"] for seq, a in answers.items()} == {0: "o1", 1: "o2", 2: "o3", 3: "o4"}
    assert {seq: a["verdict"] for seq, a in answers.items()} == {
        0: "rejected",
        1: "none",
        2: "approved",
        3: "none",
    }
    assert answers[1]["seen"] == []  # o1 was paused: its run had committed nothing
    assert "o1" not in answers[3]["seen"]
    assert not [line for line in lines if "refused" in line or "error" in line], lines

    store_read, corrupt = open_store(kafka_bootstrap, topic)
    try:
        states = {key.seq: store_read.get(key) for key in store_read.state_keys()}
    finally:
        store_read.close()
    assert corrupt == 0
    assert sorted(states) == [0, 1, 2, 3]  # one action state per run: no record shared
    for state in states.values():
        assert state is not None
        [quoted] = [call for call in state.calls if call.call_id == "#0"]
        assert quoted.status.value == "succeeded"
    # Made once each (the Python functions run in this process): the resumed runs got theirs
    # back from the store.
    assert QUOTES == {"o1": 1, "o2": 1, "o3": 1, "o4": 1}
