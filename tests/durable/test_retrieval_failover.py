"""Failover of retrieval and ingestion through the real store path (``DurableCalls`` over the
in-memory store and over Kafka, the ``stores`` fixture): an embedding or search call whose
outcome was recorded is handed back on replay, never made again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from flink_agents.api.prompts import Prompt
from flink_agents.plan import compile_agent
from flink_agents.providers.memory_vector_store import InMemoryVectorStore
from flink_agents.runtime import run_local
from tests.agents.retrieval_samples import DOCS, ProbedChatConnection, ingestion_agent, qa_agent
from tests.durable.helpers import PROBE, Stores, crash_then_replay

COLLECTION = "failover-test"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    PROBE.reset()
    InMemoryVectorStore.reset(COLLECTION)
    ProbedChatConnection.requests.clear()
    yield
    PROBE.reset()
    InMemoryVectorStore.reset(COLLECTION)


def test_a_replayed_question_makes_no_embedding_or_search_call_again(stores: Stores) -> None:
    run_local(ingestion_agent(COLLECTION), DOCS, key="id")
    turns = [{"match": r"source: guide/flink\.md", "content": "From the checkpoint."}]
    prompt = Prompt(text="{context}\n\nQuestion: {input}")
    plan = compile_agent(qa_agent(COLLECTION, [*turns, {"content": "unknown"}], prompt=prompt))
    PROBE.counts.clear()

    result, _ = crash_then_replay(plan, stores, "Where does the job restart from?", hold="chat")

    assert result.output_values == ["From the checkpoint."]
    assert (PROBE.counts["embed"], PROBE.counts["search"], PROBE.counts["chat"]) == (0, 0, 1)
    # The model was asked with the same passages live and on replay.
    live, replayed = (
        ProbedChatConnection.requests[-2:]
        if len(ProbedChatConnection.requests) > 1
        else (None, ProbedChatConnection.requests[-1])
    )
    if live is not None:
        assert live.messages == replayed.messages


def test_a_replayed_ingestion_makes_no_embedding_call_again(stores: Stores) -> None:
    plan = compile_agent(ingestion_agent(COLLECTION, batch_size=1))

    result, _ = crash_then_replay(plan, stores, DOCS[1], hold="upsert")

    assert result.output_values == [{"source": "guide/flink.md", "chunks": 2, "deleted": 0}]
    # Two embedding batches completed before the crash: handed back. The upsert had only
    # started (no recorded outcome): sent again, harmless since chunk ids are stable.
    assert (PROBE.counts["embed"], PROBE.counts["upsert"]) == (0, 1)
    assert asyncio.run(InMemoryVectorStore(collection=COLLECTION).count()) == 2
