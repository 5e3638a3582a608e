"""The built-in retrieval step: embed the question, search a vector store, hand the passages on.

* :func:`embed_texts` and :func:`retrieve` are for actions of your own (a workflow agent): each
  embedding batch and each search is one durable call, so a replay after a failover hands the
  recorded vectors and passages back instead of calling the model or the store again.
* :func:`retrieve_input` is an action: on the run's input it retrieves passages and sends a
  :class:`RetrievedInputEvent` (the input, the passages, and them formatted as ``context``).
  ``ReActAgent(retrieval=...)`` puts it in front of the model, whose prompt then gets the
  passages; a workflow agent (Python or YAML) adds it and listens to the event.
* :func:`retrieval_action` answers a :class:`RetrievalRequestEvent` (a query, sent by any action,
  as many as it likes) with a :class:`RetrievalResponseEvent`: the passages and them formatted
  as ``context``. An agent that listens to ``RetrievalResponseEvent`` gets it added by the
  compiler, as the chat actions are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.agent import action
from flink_agents.api.chat import ChatMessage
from flink_agents.api.context import RunnerContext
from flink_agents.api.embeddings import EmbeddingModelSetup, Vector
from flink_agents.api.events import Event, InputEvent
from flink_agents.api.resources import ResourceType
from flink_agents.api.vector_stores import VectorMatch, VectorStore

VECTOR_RESOURCE_KEYS: Mapping[str, ResourceType] = {
    "embedding_model": ResourceType.EMBEDDING_MODEL,
    "vector_store": ResourceType.VECTOR_STORE,
}
"""The ``resource_keys`` of an action whose config names an embedding model and a vector store
(retrieval and ingestion): the plan checks that they name resources of these types."""

NO_PASSAGES = "(no passages found)"
CONTEXT_INSTRUCTION = (
    "Answer from the passages below; say so when they do not hold the answer. "
    "Cite passages by their [number].\n\n"
)


class RetrievalSettings(BaseModel):
    """What to search and how much to bring back (an action's config, or YAML ``retrieval:``)."""

    model_config = ConfigDict(extra="forbid")

    embedding_model: str = Field(description="Name of an embedding_model resource.")
    vector_store: str = Field(description="Name of a vector_store resource.")
    top_k: int = Field(default=4, ge=1, description="Passages to retrieve.")
    where: dict[str, Any] | None = Field(
        default=None, description="Metadata filter, e.g. {source: docs/api.md}."
    )
    min_score: float | None = Field(
        default=None, description="Drop passages whose cosine similarity is below this."
    )
    query_field: str | None = Field(
        default=None,
        description="Field of a map input holding the question (default: a string input, or "
        "the map as JSON).",
    )


class RetrievedInputEvent(Event):
    """The run's input with the passages retrieved for it; ``context`` is them as prompt text."""

    input: Any = None
    query: str
    passages: list[VectorMatch] = Field(default_factory=list)
    context: str


class RetrievalRequestEvent(Event):
    """Ask for the passages nearest to ``query`` in ``vector_store`` (embedded with
    ``embedding_model``; both resource names); :func:`retrieval_action` answers."""

    query: str
    embedding_model: str = Field(description="Name of an embedding_model resource.")
    vector_store: str = Field(description="Name of a vector_store resource.")
    top_k: int = Field(default=4, ge=1, description="Passages to retrieve.")
    where: dict[str, Any] | None = Field(default=None, description="Metadata filter.")
    min_score: float | None = Field(
        default=None, description="Drop passages whose cosine similarity is below this."
    )


class RetrievalResponseEvent(Event):
    """The passages retrieved for the request ``request_id``; ``context`` is them as prompt
    text."""

    request_id: str
    query: str
    passages: list[VectorMatch] = Field(default_factory=list)
    context: str


async def embed_texts(
    ctx: RunnerContext, embedding_model: str, texts: Sequence[str], call_prefix: str = "embed"
) -> list[Vector]:
    """Vectors of ``texts``: one durable call per batch, ids ``<call_prefix>:<batch>``.

    The setup is an argument of each call (its fields: the model, the connection's name, the
    dimensions...), so a replay with another embedding model is a mismatch, not old vectors.
    """
    setup = cast(
        EmbeddingModelSetup, ctx.get_resource(embedding_model, ResourceType.EMBEDDING_MODEL)
    )
    vectors: list[Vector] = []
    for index, batch in enumerate(setup.batches(texts)):
        vectors += await ctx.durable_execute_async(
            type(setup).embed_batch, setup, batch, call_id=f"{call_prefix}:{index}"
        )
    return vectors


async def retrieve(
    ctx: RunnerContext, query: str, settings: RetrievalSettings
) -> list[VectorMatch]:
    """The passages nearest to ``query``: an embedding call and a search, each durable, each
    with the resource it asks as an argument (the search: the vector store's fields, its
    collection among them), so a replay against another one is a mismatch."""
    (vector,) = await embed_texts(ctx, settings.embedding_model, [query], "retrieval:embed")
    store = cast(VectorStore, ctx.get_resource(settings.vector_store, ResourceType.VECTOR_STORE))
    matches = await ctx.durable_execute_async(
        type(store).query,
        store,
        vector,
        settings.top_k,
        settings.where,
        call_id="retrieval:search",
        result_type=list[VectorMatch],
    )
    if settings.min_score is None:
        return matches
    return [match for match in matches if match.score >= settings.min_score]


def format_passages(passages: Sequence[VectorMatch]) -> str:
    """Passages as numbered prompt text, each with its ``source`` when its metadata has one."""
    if not passages:
        return NO_PASSAGES
    blocks = []
    for number, passage in enumerate(passages, start=1):
        source = passage.metadata.get("source")
        heading = f"[{number}]" + (f" (source: {source})" if source is not None else "")
        blocks.append(f"{heading}\n{passage.document.strip()}")
    return "\n\n".join(blocks)


def context_message(context: str) -> ChatMessage:
    """The system message that hands the passages to a model whose prompt does not place them."""
    return ChatMessage(role="system", content=CONTEXT_INSTRUCTION + context)


def query_text(value: Any, query_field: str | None) -> str:
    """The question in an input: ``value[query_field]``, a string input, or the input as JSON."""
    if query_field is not None:
        if not isinstance(value, Mapping) or query_field not in value:
            raise ValueError(f"retrieval expects the input to be a map with {query_field!r}")
        value = value[query_field]
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@action(
    InputEvent,
    sends=[RetrievedInputEvent],
    resource_keys=VECTOR_RESOURCE_KEYS,
)
async def retrieve_input(event: InputEvent, ctx: RunnerContext) -> None:
    """Retrieve passages for the run's input (settings: the action config)."""
    settings = RetrievalSettings.model_validate(dict(ctx.action_config))
    query = query_text(event.input, settings.query_field)
    passages = await retrieve(ctx, query, settings)
    ctx.send_event(
        RetrievedInputEvent(
            input=event.input, query=query, passages=passages, context=format_passages(passages)
        )
    )


@action(RetrievalRequestEvent, sends=[RetrievalResponseEvent])
async def retrieval_action(event: RetrievalRequestEvent, ctx: RunnerContext) -> None:
    """Retrieve the passages a :class:`RetrievalRequestEvent` asks for."""
    settings = RetrievalSettings(
        embedding_model=event.embedding_model,
        vector_store=event.vector_store,
        top_k=event.top_k,
        where=event.where,
        min_score=event.min_score,
    )
    passages = await retrieve(ctx, event.query, settings)
    ctx.send_event(
        RetrievalResponseEvent(
            request_id=event.id,
            query=event.query,
            passages=passages,
            context=format_passages(passages),
        )
    )
