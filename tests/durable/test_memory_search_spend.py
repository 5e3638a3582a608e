"""A long-term memory search embeds its query inside its durable call: the usage the embeddings
server reports for it is metered as the search's (reserved before it, refused over a budget,
recorded with its call), so a replay hands the hits back and counts the spend once -- over the
in-memory store and over Kafka (runtime/budget_meter.py, docs/budgets.md)."""

from __future__ import annotations

import asyncio

from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.budgets import Budget, Budgets
from flink_agents.api.long_term_memory import LongTermMemorySetup
from flink_agents.api.resources import ResourceType
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store.inspect import key_states, recorded_spend
from flink_agents.plan.compile import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.assembly import Runtime
from flink_agents.testing import Stores
from tests.runtime.test_embedding_spend import BATCH_TOKENS, EmbeddingServer, add_embedder


@action(InputEvent)
async def search(event: InputEvent, ctx: RunnerContext) -> None:
    """Search the ``facts`` set for the input's ``query``; outputs how many hits."""
    hits = await ctx.long_term_memory["facts"].search(event.input["query"])
    ctx.send_event(OutputEvent(output=len(hits)))


def search_plan(base_url: str, *limits: Budget) -> AgentPlan:
    agent = Agent(name="searching", error_policy="emit")
    agent.add_action(search)
    add_embedder(agent, base_url)
    agent.add_resource(
        "facts", ResourceType.LONG_TERM_MEMORY, LongTermMemorySetup, embedding_model="embedder"
    )
    agent.budgets = Budgets(limits=list(limits))
    return compile_agent(agent)


def test_a_searchs_query_embedding_is_metered_and_replayed_once(stores: Stores) -> None:
    """Under a cap of two queries' tokens, two of three searches reach the server and the third
    is refused before it is sent; restored from a checkpoint taken before any run finished,
    every search replays from its record (no request) and the key counts the recorded spend."""

    async def scenario(server: EmbeddingServer) -> tuple[list[str | None], list[str | None], int]:
        plan = search_plan(server.base_url, Budget(name="cap", tokens=2 * BATCH_TOKENS))
        engine = Runtime.build(plan, store=stores.first).engine
        for i in range(3):
            engine.submit("k0", {"key": "k0", "query": f"k0/{i}"})
        checkpoint = engine.snapshot_key("k0")
        await engine.drain()
        live = [r.error.error_type if r.error else None for r in engine.take_results()]
        await engine.close()

        engine = Runtime.build(plan, store=stores.restored()).engine
        engine.restore_key("k0", checkpoint)
        await engine.drain()
        replayed = [r.error.error_type if r.error else None for r in engine.take_results()]
        spend = engine.snapshot_key("k0").spend
        await engine.close()
        assert spend is not None
        return live, replayed, spend.total.tokens

    with EmbeddingServer() as server:
        live, replayed, counted = asyncio.run(scenario(server))
    assert live == replayed == [None, None, "BudgetExceeded"]
    assert server.by_key == {"k0": 2}  # the replay asked nothing
    recorded = recorded_spend(key_states(stores.latest, canonical_json("k0")))
    assert (recorded.calls, recorded.input_tokens) == (2, 2 * BATCH_TOKENS)
    assert counted == recorded.tokens == 2 * BATCH_TOKENS
