"""A retrieval call's recorded signature covers what determines its result -- the embedding
model's setup, the vector store and its collection -- so a replay with another embedding model
or collection is a mismatch naming the call, never the old vectors or passages handed back
silently. Through the real store path (``StoreCallRunner`` over the in-memory store and over
Kafka, the ``stores`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from flink_agents.agents.retrieval import retrieve
from flink_agents.api import Agent, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.embeddings import EmbeddingModelSetup
from flink_agents.api.resources import ResourceType
from flink_agents.durable.mismatch import CallMismatchError
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.providers.memory_vector_store import InMemoryVectorStore
from flink_agents.runtime import ActionError, run_local
from flink_agents.testing import Stores
from tests.agents.retrieval_samples import (
    DIMENSIONS,
    DOCS,
    ProbedEmbeddingConnection,
    ingestion_agent,
    settings,
    store,
)
from tests.durable.helpers import PROBE, crash_then_replay

COLLECTIONS = ("signature-a", "signature-b")


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    PROBE.reset()
    for collection in COLLECTIONS:
        InMemoryVectorStore.reset(collection)
    yield
    PROBE.reset()
    for collection in COLLECTIONS:
        InMemoryVectorStore.reset(collection)


@action(InputEvent)
async def retrieve_then_hold(event: InputEvent, ctx: RunnerContext) -> None:
    """Retrieve, then a held call: a crash there leaves both retrieval calls recorded."""
    passages = await retrieve(ctx, event.input, settings())
    await ctx.durable_execute_async(PROBE.call, "after", 0)
    ctx.send_event(OutputEvent(output=[p.metadata["source"] for p in passages]))


def _plan(collection: str, model: str | None = None) -> AgentPlan:
    agent = Agent(name="retrieval_signature")
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store(collection))
    agent.add_resource(
        "embedding_connection",
        ResourceType.EMBEDDING_MODEL_CONNECTION,
        ProbedEmbeddingConnection,
        dimensions=DIMENSIONS,
    )
    agent.add_resource(
        "embedder",
        ResourceType.EMBEDDING_MODEL,
        EmbeddingModelSetup,
        connection="embedding_connection",
        dimensions=DIMENSIONS,
        model=model,
    )
    return compile_agent(agent.add_action(retrieve_then_hold))


@pytest.fixture
def ingested() -> None:
    """The documents in collection a; collection b holds the Kafka guide only."""
    run_local(ingestion_agent(COLLECTIONS[0]), DOCS, key="id")
    run_local(ingestion_agent(COLLECTIONS[1]), DOCS[:1], key="id")


QUESTION = "Where does the job restart from?"


@pytest.mark.usefixtures("ingested")
def test_the_same_retrieval_is_handed_back(stores: Stores) -> None:
    plan = _plan(COLLECTIONS[0])
    PROBE.counts.clear()
    result, _ = crash_then_replay(plan, stores, QUESTION, hold="after")
    [sources] = result.output_values
    assert sources[0] == "guide/flink.md"
    assert (PROBE.counts["embed"], PROBE.counts["search"]) == (0, 0)


@pytest.mark.usefixtures("ingested")
@pytest.mark.parametrize(
    ("changed", "call_id"),
    [
        (_plan(COLLECTIONS[1]), "retrieval:search"),  # another collection
        (_plan(COLLECTIONS[0], model="hashing-v2"), "retrieval:embed:0"),  # another model
    ],
    ids=["collection", "embedding-model"],
)
def test_a_changed_retrieval_config_is_a_mismatch_naming_the_call(
    stores: Stores, changed: AgentPlan, call_id: str
) -> None:
    recorded = _plan(COLLECTIONS[0])
    with pytest.raises(ActionError) as caught:
        crash_then_replay(recorded, stores, QUESTION, hold="after", replay_plan=changed)
    mismatch = caught.value.__cause__
    assert isinstance(mismatch, CallMismatchError), caught.value
    assert mismatch.recorded.call_id == call_id
    assert mismatch.requested is not None
    assert mismatch.recorded.args_digest != mismatch.requested.args_digest
    assert "signature-b" in str(mismatch) or "hashing-v2" in str(mismatch)  # the diff shows it
