"""FallbackChatModelConnection: the next connection answers when one fails for good; the reply
names the model that answered, and a replay hands it back without asking any connection."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flink_agents.api import Agent, ChatMessage, ResourceType
from flink_agents.api.budgets import Budget, Budgets, ModelPrice, PriceTable
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.providers.fallback import FallbackChatModelConnection
from flink_agents.providers.openai_compatible import OpenAICompatibleChatModelConnection
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.local import run_local
from flink_agents.testing import Stores, run_live
from tests.budget_samples import UsageServer, ask, questions

ONE_ATTEMPT = {"max_attempts": 1}


def _plan(primary: UsageServer, fallback: UsageServer) -> AgentPlan:
    agent = Agent(name="routed", error_policy="emit")
    agent.add_action(ask)
    connection = OpenAICompatibleChatModelConnection
    for name, server, model in (("primary", primary, "big"), ("spare", fallback, "small")):
        agent.add_resource(
            name,
            ResourceType.CHAT_MODEL_CONNECTION,
            connection,
            base_url=server.base_url,
            model=model,
            retry=ONE_ATTEMPT,
        )
    agent.add_resource(
        "routed",
        ResourceType.CHAT_MODEL_CONNECTION,
        FallbackChatModelConnection,
        connections=["primary", "spare"],
    )
    agent.add_resource("model", ResourceType.CHAT_MODEL, ChatModelSetup, connection="routed")
    return compile_agent(agent)


def test_a_primary_rate_limited_mid_stream_moves_calls_to_the_fallback() -> None:
    with UsageServer(answers=3) as primary, UsageServer() as spare:
        results = run_local(_plan(primary, spare), questions(keys=1, per_key=6), key="key")
    outputs = [value for r in results for value in r.output_values]
    assert outputs == [f"big: k0/{i}" for i in range(3)] + [f"small: k0/{i}" for i in (3, 4, 5)]
    assert (primary.refused, sum(spare.by_key.values())) == (3, 3)


def test_the_last_connections_failure_is_the_calls() -> None:
    with UsageServer(answers=0, refusal=500) as primary, UsageServer(answers=0) as spare:
        [result] = run_local(_plan(primary, spare), questions(keys=1, per_key=1), key="key")
    assert result.error is not None and result.error.error_type == "ModelCallError"
    assert (primary.refused, spare.refused) == (1, 1)


def test_a_replay_hands_back_the_recorded_answer_and_model_without_asking_either() -> None:
    stores = Stores.in_memory()

    async def scenario(plan: AgentPlan) -> tuple[list[Any], list[Any], list[Any]]:
        engine = Runtime.build(plan, store=stores.first).engine
        for record in questions(keys=2, per_key=3):
            engine.submit(record["key"], record)
        checkpoint = {key: engine.snapshot_key(key) for key in ("k0", "k1")}
        await engine.drain()
        live = sorted((r.run_id.key, r.run_id.seq, r.output_values) for r in engine.take_results())
        await engine.close()
        engine = Runtime.build(plan, store=stores.restored()).engine
        for key, state in checkpoint.items():
            engine.restore_key(key, state)
        await engine.drain()
        replayed = sorted(
            (r.run_id.key, r.run_id.seq, r.output_values) for r in engine.take_results()
        )
        await engine.close()
        return live, replayed, [s.calls[0].value(ChatMessage) for s in _states(stores)]

    with UsageServer(answers=2) as primary, UsageServer() as spare:
        live, replayed, recorded = asyncio.run(scenario(_plan(primary, spare)))
        asked = (sum(primary.by_key.values()) + primary.refused, sum(spare.by_key.values()))
        assert replayed == live
        # Every call of the replay was handed back: no request after the first run's.
        assert asked == (2 + 4, 4)
    assert sorted(reply.model for reply in recorded) == ["big"] * 2 + ["small"] * 4
    stores.close()


def _states(stores: Stores) -> list[Any]:
    store = stores.latest
    return [state for key in store.state_keys() if (state := store.get(key)) is not None]


def test_a_budgeted_call_is_priced_for_the_model_that_answered() -> None:
    prices = PriceTable(
        version="v1",
        models={"big": ModelPrice(input=10, output=20), "small": ModelPrice(input=1, output=2)},
    )
    budgets = Budgets(prices=prices, limits=[Budget(name="money", cost=1.0)])
    stores = Stores.in_memory()
    with UsageServer(answers=1) as primary, UsageServer() as spare:
        plan = _plan(primary, spare).model_copy(update={"budgets": budgets})
        run_live(plan, stores.first, {"key": "k0", "q": "k0/0"}, key="k0")
        run_live(plan, stores.first, {"key": "k1", "q": "k1/0"}, key="k1")
    spent = sorted(
        (s.key.key, call.spend.model, call.spend.cost)
        for s in _states(stores)
        for call in s.calls
        if call.spend is not None
    )
    assert spent == [
        ('"k0"', "big", pytest.approx((60 * 10 + 40 * 20) / 1e6)),
        ('"k1"', "small", pytest.approx((60 * 1 + 40 * 2) / 1e6)),
    ]
    stores.close()


def test_a_name_that_is_no_connection_fails_the_start() -> None:
    with UsageServer() as primary, UsageServer() as spare:
        plan = _plan(primary, spare)
    routed = plan.resources["routed"]
    arguments = {**routed.arguments, "connections": ["primary", "model"]}
    broken = plan.model_copy(
        update={
            "resources": {
                **plan.resources,
                "routed": routed.model_copy(update={"arguments": arguments}),
            }
        }
    )
    with pytest.raises(LookupError, match="'model' is a chat_model, not a chat_model_connection"):
        Runtime.build(broken).engine.open_resources()
