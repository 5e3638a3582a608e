"""Waits on the mini-cluster: decisions on the operator's second input resume paused runs
(docs/waits.md)."""

from __future__ import annotations

import json

import pytest

from flink_agents.durable.store import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment
from flink_agents.runtime import RuntimeSettings
from tests.runtime.test_waits import PLAN, wait_id_of

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
