"""Embedding calls count in a key's budgets like model calls: the usage the embeddings server
reports is recorded with each durable ``embed_batch`` call, priced by the table's
``embedding`` price, reserved before the call and replayed from its record
(runtime/budget_meter.py, docs/budgets.md)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from flink_agents.agents.retrieval import embed_texts
from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.budgets import Budget, Budgets, ModelPrice, PriceTable
from flink_agents.api.embeddings import EmbeddingModelSetup
from flink_agents.api.resources import ResourceType
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store.inspect import key_states, recorded_spend
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.providers.openai_embeddings import OpenAICompatibleEmbeddingModelConnection
from flink_agents.runtime.assembly import Runtime
from flink_agents.runtime.engine import RunResult
from flink_agents.runtime.local import run_local
from flink_agents.testing import Stores
from tests.providers.fake_servers import FakeModelServer, RecordedRequest, ScriptedResponse

BATCH_TOKENS = 50
"""What the fake server reports for every batch it embeds."""


class EmbeddingServer(FakeModelServer):
    """A fake OpenAI-compatible embeddings server reporting :data:`BATCH_TOKENS` of usage per
    request, counting requests by the key their first text names (``key/i``)."""

    def __init__(self) -> None:
        super().__init__(self._answer)
        self.by_key: Counter[str] = Counter()

    def _answer(self, request: RecordedRequest) -> ScriptedResponse:
        texts = request.json()["input"]
        self.by_key[texts[0].split("/")[0]] += 1
        data = [
            {"object": "embedding", "index": i, "embedding": [1.0, 0.0]} for i in range(len(texts))
        ]
        usage = {"prompt_tokens": BATCH_TOKENS, "total_tokens": BATCH_TOKENS}
        return ScriptedResponse(body={"object": "list", "data": data, "model": "e", "usage": usage})


@action(InputEvent)
async def embed(event: InputEvent, ctx: RunnerContext) -> None:
    """Embed the input's texts (one durable call per batch of two); output how many vectors."""
    vectors = await embed_texts(ctx, "embedder", event.input["texts"])
    ctx.send_event(OutputEvent(output=len(vectors)))


def embedding_plan(base_url: str, *limits: Budget, **budgets: Any) -> AgentPlan:
    agent = Agent(name="embedding", error_policy="emit")
    agent.add_action(embed)
    add_embedder(agent, base_url)
    agent.budgets = Budgets(limits=list(limits), **budgets)
    return compile_agent(agent)


def add_embedder(agent: Agent, base_url: str) -> None:
    """The embedding model ``embedder`` (model ``embed-small``, batches of two) on the server
    at ``base_url``."""
    agent.add_resource(
        "conn",
        ResourceType.EMBEDDING_MODEL_CONNECTION,
        OpenAICompatibleEmbeddingModelConnection,
        base_url=base_url,
    )
    agent.add_resource(
        "embedder",
        ResourceType.EMBEDDING_MODEL,
        EmbeddingModelSetup,
        connection="conn",
        model="embed-small",
        batch_size=2,
    )


def inputs(keys: int, per_key: int) -> list[dict[str, Any]]:
    """``per_key`` inputs of each key, each two texts (one batch)."""
    return [
        {"key": f"k{k}", "texts": [f"k{k}/{i}a", f"k{k}/{i}b"]}
        for i in range(per_key)
        for k in range(keys)
    ]


def test_a_per_key_cap_lets_exactly_its_embedding_calls_reach_the_server() -> None:
    """Under a cap of 3 batches' tokens per key, each of 4 keys gets 3 of its 6 batches
    embedded; its other runs end with BudgetExceeded before their call is sent."""
    with EmbeddingServer() as server:
        plan = embedding_plan(server.base_url, Budget(name="cap", tokens=3 * BATCH_TOKENS))
        results = run_local(plan, inputs(keys=4, per_key=6), key="key")
    assert server.by_key == {f"k{k}": 3 for k in range(4)}
    refused = [r for r in results if r.error is not None]
    assert {r.error.error_type for r in refused if r.error} == {"BudgetExceeded"}
    assert len(refused) == 4 * 3


def test_an_exhausted_fallback_budget_refuses_an_embedding_call() -> None:
    """A fallback is a chat connection: an embedding call over such a budget is refused."""
    budget = Budget(name="cap", tokens=BATCH_TOKENS, on_exhausted="fallback", fallback="cheap")
    with EmbeddingServer() as server:
        agent_plan = embedding_plan(server.base_url)
        plan = agent_plan.model_copy(update={"budgets": Budgets(limits=[budget])})
        results = run_local(plan, inputs(keys=1, per_key=2), key="key")
    assert server.by_key == {"k0": 1}
    assert [r.error.error_type if r.error else None for r in results] == [None, "BudgetExceeded"]


def test_an_embedding_call_without_an_embedding_price_under_a_cost_budget_is_refused() -> None:
    prices = PriceTable(version="v1", models={"embed-small": ModelPrice(input=1, output=1)})
    with EmbeddingServer() as server:
        plan = embedding_plan(server.base_url, Budget(name="money", cost=1.0), prices=prices)
        [result] = run_local(plan, inputs(keys=1, per_key=1), key="key")
    assert result.error is not None and "no embedding price" in result.error.message
    assert server.by_key == {}


def test_embedding_spend_is_recorded_priced_and_replayed_not_counted_twice() -> None:
    """Each batch records its reported tokens and its cost at 20 per million; a restore from a
    checkpoint taken before any run finished replays every batch from its record (no request)
    and the key's counter is the recorded spend."""
    prices = PriceTable(version="v7", models={"embed-small": ModelPrice(embedding=20.0)})
    stores = Stores.in_memory()

    async def scenario(server: EmbeddingServer) -> tuple[int, int, list[RunResult]]:
        plan = embedding_plan(server.base_url, Budget(name="money", cost=1.0), prices=prices)
        engine = Runtime.build(plan, store=stores.first).engine
        for record in inputs(keys=1, per_key=3):
            engine.submit("k0", record)
        checkpoint = engine.snapshot_key("k0")
        await engine.drain()
        engine.take_results()
        await engine.close()
        sent = sum(server.by_key.values())

        engine = Runtime.build(plan, store=stores.restored()).engine
        engine.restore_key("k0", checkpoint)
        await engine.drain()
        replayed = engine.take_results()
        spend = engine.snapshot_key("k0").spend
        await engine.close()
        assert spend is not None
        return sent, spend.total.tokens, replayed

    with EmbeddingServer() as server:
        sent, counted, replayed = asyncio.run(scenario(server))
        made_after = sum(server.by_key.values()) - sent
    assert (sent, made_after) == (3, 0)
    assert [r.output_values for r in replayed] == [[2]] * 3
    recorded = recorded_spend(key_states(stores.latest, canonical_json("k0")))
    assert (recorded.calls, recorded.input_tokens, recorded.output_tokens) == (3, 150, 0)
    assert recorded.cost == pytest.approx(3 * BATCH_TOKENS * 20.0 / 1e6)
    assert recorded.price_versions == {"v7"}
    assert counted == recorded.tokens
