"""Flink hands each key to the subtask whose key groups hold it by the store's computation
(`flink_agents.durable.store.key_group`): the key-group placement's restores rely on it.

A job at parallelism 4 with a store placing by key group: the operator checks every key Flink
gives a subtask against that subtask's key groups and fails the job with a `StoreError` on the
first that does not fall in them (`Placement.check_owner`). 120 keys: a computation that
disagreed with Flink's routing would put about three in four of them on another subtask.
"""

from __future__ import annotations

import json

import pytest

from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment
from tests.sample_agents import EchoAgent

pytestmark = pytest.mark.flink

KEYS = [f"customer-{n}" for n in range(100)] + [f"клиент-{n} 😀" for n in range(20)]


def test_flink_gives_each_key_to_the_subtask_its_key_group_names(make_flink_env) -> None:
    env = make_flink_env()
    env.set_parallelism(4)
    env.set_max_parallelism(128)
    agents = AgentsExecutionEnvironment(env, store=StoreConfig(kind="memory"))
    assert agents.settings.store is not None
    assert agents.settings.store.placement == "key-groups"
    records = [{"k": key, "n": n} for n, key in enumerate(KEYS)]
    outputs = agents.from_list(records, key="k").apply(EchoAgent(name="echo"))
    with outputs.to_datastream().execute_and_collect() as results:
        answers = [json.loads(line) for line in results]
    assert [a for a in answers if a.get("error")] == []
    assert sorted(a["key"] for a in answers) == sorted(KEYS)
