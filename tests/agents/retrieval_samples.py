"""Resources and agents of the retrieval tests, referenced by ``module:qualname``.

The probed resources count every call through the durable tests' probe (and can be held open
there), so a test sees exactly which embedding, search, upsert and chat calls were made.
"""

from __future__ import annotations

from flink_agents.agents import ReActAgent
from flink_agents.agents.ingestion import IngestionAgent
from flink_agents.agents.retrieval import (
    RetrievalRequestEvent,
    RetrievalResponseEvent,
    RetrievalSettings,
    RetrievedInputEvent,
    retrieve_input,
)
from flink_agents.api import Agent, ChatModelSetup, InputEvent, OutputEvent, RunnerContext, action
from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.api.embeddings import EmbeddingModelSetup, Vector
from flink_agents.api.prompts import Prompt
from flink_agents.api.resources import ResourceDescriptor, ResourceType
from flink_agents.api.vector_stores import MetadataFilter, VectorMatch, VectorRecord
from flink_agents.providers.hashing_embeddings import HashingEmbeddingModelConnection
from flink_agents.providers.memory_vector_store import InMemoryVectorStore
from tests.durable.helpers import PROBE
from tests.sample_agents import RecordingChatConnection

DIMENSIONS = 128

DOCS = [
    {
        "id": "guide/kafka.md",
        "text": "Kafka topics hold records in partitions.\n\n"
        "A consumer group shares the partitions of a topic between its members.",
    },
    {
        "id": "guide/flink.md",
        "text": "Flink checkpoints keyed state to a durable folder.\n\n"
        "After a failure the job restarts from the latest checkpoint.",
        "metadata": {"lang": "en"},
    },
    {"id": "guide/cooking.md", "text": "Boil the pasta in salted water for nine minutes."},
]


class ProbedEmbeddingConnection(HashingEmbeddingModelConnection):
    async def embed(
        self, texts: list[str], model: str | None, dimensions: int | None
    ) -> list[Vector]:
        await PROBE.call("embed", 0)
        return await super().embed(texts, model, dimensions)


class ProbedVectorStore(InMemoryVectorStore):
    async def upsert(self, records: list[VectorRecord]) -> int:
        await PROBE.call("upsert", 0)
        return await super().upsert(records)

    async def delete(self, ids: list[str]) -> int:
        await PROBE.call("delete", 0)
        return await super().delete(ids)

    async def query(
        self, embedding: Vector, top_k: int = 4, where: MetadataFilter | None = None
    ) -> list[VectorMatch]:
        await PROBE.call("search", 0)
        return await super().query(embedding, top_k, where)


class ProbedChatConnection(RecordingChatConnection):
    """A scripted model keeping its requests, each call a probe call ``chat``."""

    async def chat(self, request: ChatRequest) -> ChatMessage:
        await PROBE.call("chat", 0)
        return await super().chat(request)


def store(collection: str) -> ResourceDescriptor:
    return ResourceDescriptor.of(ProbedVectorStore, collection=collection, dimensions=DIMENSIONS)


def add_embedding(agent: Agent, batch_size: int = 8) -> None:
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
        batch_size=batch_size,
    )


def ingestion_agent(collection: str, batch_size: int = 8, max_chars: int = 80) -> IngestionAgent:
    return IngestionAgent(
        name="ingest",
        embedding_connection=ResourceDescriptor.of(
            ProbedEmbeddingConnection, dimensions=DIMENSIONS
        ),
        embedding_model=ResourceDescriptor.of(
            EmbeddingModelSetup, dimensions=DIMENSIONS, batch_size=batch_size
        ),
        vector_store=store(collection),
        max_chars=max_chars,
    )


def settings(**changes: object) -> RetrievalSettings:
    return RetrievalSettings(embedding_model="embedder", vector_store="docs", top_k=2).model_copy(
        update=changes
    )


def qa_agent(
    collection: str,
    turns: list[dict[str, object]],
    prompt: Prompt | None = None,
    **retrieval: object,
) -> ReActAgent:
    """A ReAct agent answering from ``collection`` with a scripted model."""
    agent = ReActAgent(
        name="qa",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="scripted"),
        prompt=prompt,
        retrieval=settings(**retrieval),
    )
    agent.add_resource(
        "scripted", ResourceType.CHAT_MODEL_CONNECTION, ProbedChatConnection, name="qa", turns=turns
    )
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store(collection))
    add_embedding(agent)
    return agent


@action(RetrievedInputEvent, sends=[OutputEvent])
def cite_sources(event: RetrievedInputEvent, ctx: RunnerContext) -> None:
    """A workflow step after retrieval: answer with the passages' sources."""
    sources = [passage.metadata["source"] for passage in event.passages]
    ctx.send_event(OutputEvent(output={"query": event.query, "sources": sources}))


def workflow_agent(collection: str, **retrieval: object) -> Agent:
    agent = Agent(name="cite")
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store(collection))
    add_embedding(agent)
    agent.add_action(retrieve_input, config=settings(**retrieval).model_dump(exclude_none=True))
    agent.add_action(cite_sources)
    return agent


@action(InputEvent)
def ask_twice(event: InputEvent, ctx: RunnerContext) -> None:
    """Two retrieval requests from one action: one per question of the input."""
    for question in event.input["questions"]:
        ctx.send_event(
            RetrievalRequestEvent(query=question, embedding_model="embedder", vector_store="docs")
        )


@action(RetrievalResponseEvent)
def first_source(event: RetrievalResponseEvent, ctx: RunnerContext) -> None:
    source = event.passages[0].metadata["source"] if event.passages else None
    ctx.send_event(OutputEvent(output={"query": event.query, "source": source}))


def requesting_agent(collection: str) -> Agent:
    """A workflow agent sending retrieval requests of its own (the compiler adds the action
    answering them)."""
    agent = Agent(name="requests").add_action(ask_twice).add_action(first_source)
    agent.add_resource("docs", ResourceType.VECTOR_STORE, store(collection))
    add_embedding(agent)
    return agent
