"""Python records on the DataStream API: pydantic models and dicts keyed by a function."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.flink import AgentsExecutionEnvironment

pytestmark = pytest.mark.flink


class Order(BaseModel):
    customer: str
    item: str


@action(InputEvent, sends=[OutputEvent])
def tally(event: InputEvent, ctx: RunnerContext) -> None:
    orders = ctx.short_term_memory.get("orders", 0) + 1
    ctx.short_term_memory.set("orders", orders)
    ctx.send_event(OutputEvent(output={"item": event.input["item"], "orders": orders}))


def _agent() -> Agent:
    agent = Agent(name="orders")
    agent.add_action(tally)
    return agent


ORDERS = [Order(customer=c, item=f"{c}-{n}") for n in range(3) for c in ("ann", "bob")]


def _by_key(lines: list[dict[str, Any]]) -> dict[str, list[tuple[int, str, int]]]:
    by_key: dict[str, list[tuple[int, str, int]]] = {}
    for line in sorted(lines, key=lambda line: line["seq"]):
        by_key.setdefault(line["key"], []).append(
            (line["seq"], line["output"]["item"], line["output"]["orders"])
        )
    return by_key


EXPECTED = {c: [(n, f"{c}-{n}", n + 1) for n in range(3)] for c in ("ann", "bob")}


def test_a_stream_of_models_keyed_by_a_function_of_the_model(fresh_flink_env) -> None:
    agents = AgentsExecutionEnvironment(fresh_flink_env)
    records: list[Any] = [*ORDERS, {"customer": "cy", "item": {1, 2}}]
    stream = fresh_flink_env.from_collection(records)

    outputs = agents.from_datastream(
        stream, key=lambda r: r.customer if isinstance(r, Order) else r["customer"]
    )
    lines = [
        json.loads(line) for line in outputs.apply(_agent()).to_datastream().execute_and_collect()
    ]

    errors = [line for line in lines if "error" in line]
    assert _by_key([line for line in lines if "error" not in line]) == EXPECTED
    [bad] = errors
    assert bad["error"]["error_type"] == "BadRecord"
    assert "not a JSON value at $.item: a set" in bad["error"]["message"]


def test_a_list_of_models_keyed_by_a_function_of_the_model(fresh_flink_env) -> None:
    agents = AgentsExecutionEnvironment(fresh_flink_env)

    outputs = agents.from_list(ORDERS, key=lambda order: order.customer).apply(_agent())
    lines = [json.loads(line) for line in outputs.to_datastream().execute_and_collect()]

    assert all("error" not in line for line in lines), lines
    assert _by_key(lines) == EXPECTED
