"""The built-in ingestion step: a document -> chunks -> vectors -> upserted into a vector store.

:func:`ingest_document` is an action over the run's input, a :class:`SourceDocument` (``id``,
``text``, optional ``metadata``). Runs are keyed by the document id. It is idempotent on replay
and on re-ingestion:

* a chunk's id is a digest of the document id, the chunk's index and its content
  (:func:`chunk_id`), so the same document always upserts the same records;
* embedding (one durable call per batch) and the upsert are durable calls, so a replay after a
  failover hands their recorded outcomes back;
* the chunk ids of the document's last ingestion are kept in the key's short-term memory, and
  the ones a new version no longer has are deleted (a durable call too).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from flink_agents.agents.retrieval import VECTOR_RESOURCE_KEYS, embed_texts
from flink_agents.api.agent import Agent, ErrorPolicy, action
from flink_agents.api.context import RunnerContext
from flink_agents.api.events import InputEvent, OutputEvent
from flink_agents.api.resources import ResourceDescriptor, ResourceType
from flink_agents.api.vector_stores import MetadataValue, VectorRecord, VectorStore

CHUNK_IDS_KEY = "ingestion/chunk_ids"
"""Short-term memory key (per document) of the chunk ids last upserted."""

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class SourceDocument(BaseModel):
    """One input record of an ingestion run."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, description="Stable id of the document, e.g. its path.")
    text: str
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)


class IngestionSettings(BaseModel):
    """Where chunks go and how big they are (the action's config)."""

    model_config = ConfigDict(extra="forbid")

    embedding_model: str = Field(description="Name of an embedding_model resource.")
    vector_store: str = Field(description="Name of a vector_store resource.")
    max_chars: int = Field(default=1000, ge=50, description="Longest chunk, in characters.")


def _pieces(paragraph: str, max_chars: int) -> list[str]:
    """A paragraph longer than ``max_chars`` cut at sentence ends, then at spaces, then hard."""
    if len(paragraph) <= max_chars:
        return [paragraph]
    pieces: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        while len(sentence) > max_chars:
            cut = sentence.rfind(" ", 0, max_chars + 1)
            cut = cut if cut > 0 else max_chars
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if sentence:
            pieces.append(sentence)
    return pieces


def chunk_text(text: str, max_chars: int) -> list[str]:
    """``text`` cut into chunks of at most ``max_chars``: whole paragraphs packed together
    where they fit, a long paragraph cut at sentence ends (then spaces)."""
    chunks: list[str] = []
    current = ""
    for paragraph in _PARAGRAPH_BREAK.split(text):
        for piece in _pieces(paragraph.strip(), max_chars):
            if not piece:
                continue
            joined = f"{current}\n\n{piece}" if current else piece
            if len(joined) <= max_chars:
                current = joined
            else:
                chunks.append(current)
                current = piece
    if current:
        chunks.append(current)
    return chunks


def chunk_id(source_id: str, index: int, content: str) -> str:
    """The stable id of chunk ``index`` of document ``source_id`` holding ``content``."""
    canonical = json.dumps([source_id, index, content], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def chunk_records(
    document: SourceDocument, chunks: list[str], vectors: list[list[float]]
) -> list[VectorRecord]:
    """The records of a document's chunks: metadata says where each came from (the document's
    own ``source``, else its id) and which chunk of it each is."""
    return [
        VectorRecord(
            id=chunk_id(document.id, index, content),
            document=content,
            embedding=vector,
            metadata={"source": document.id, **document.metadata, "chunk": index},
        )
        for index, (content, vector) in enumerate(zip(chunks, vectors, strict=True))
    ]


@action(
    InputEvent,
    sends=[OutputEvent],
    resource_keys=VECTOR_RESOURCE_KEYS,
)
async def ingest_document(event: InputEvent, ctx: RunnerContext) -> None:
    """Chunk, embed and upsert the input document; delete its chunks that no longer exist.

    Outputs ``{"source", "chunks", "deleted"}``.
    """
    settings = IngestionSettings.model_validate(dict(ctx.action_config))
    document = SourceDocument.model_validate(event.input)
    chunks = chunk_text(document.text, settings.max_chars)
    vectors = await embed_texts(ctx, settings.embedding_model, chunks, "ingest:embed")
    records = chunk_records(document, chunks, vectors)
    store = cast(VectorStore, ctx.get_resource(settings.vector_store, ResourceType.VECTOR_STORE))
    # The store is an argument (its collection...): a replay writing elsewhere is a mismatch.
    await ctx.durable_execute_async(type(store).upsert, store, records, call_id="ingest:upsert")
    kept = [record.id for record in records]
    previous: list[str] = ctx.short_term_memory.get(CHUNK_IDS_KEY) or []
    stale = sorted(set(previous) - set(kept))
    if stale:
        await ctx.durable_execute_async(type(store).delete, store, stale, call_id="ingest:delete")
    ctx.short_term_memory.set(CHUNK_IDS_KEY, kept)
    ctx.send_event(
        OutputEvent(output={"source": document.id, "chunks": len(records), "deleted": len(stale)})
    )


class IngestionAgent(Agent):
    """An agent that ingests documents (runs keyed by document id) into a vector store.

    Resources are given as descriptors: the embedding connection, the embedding model setup
    (its ``connection`` is filled in) and the vector store.
    """

    def __init__(
        self,
        *,
        embedding_connection: ResourceDescriptor,
        embedding_model: ResourceDescriptor,
        vector_store: ResourceDescriptor,
        max_chars: int = 1000,
        name: str | None = None,
        error_policy: ErrorPolicy = "fail",
        config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(name=name, config=config, error_policy=error_policy)
        self.add_resource(
            "embedding_connection", ResourceType.EMBEDDING_MODEL_CONNECTION, embedding_connection
        )
        setup = {**embedding_model.arguments, "connection": "embedding_connection"}
        self.add_resource(
            "embedding_model",
            ResourceType.EMBEDDING_MODEL,
            embedding_model.model_copy(update={"arguments": setup}),
        )
        self.add_resource("vector_store", ResourceType.VECTOR_STORE, vector_store)
        settings = IngestionSettings(
            embedding_model="embedding_model", vector_store="vector_store", max_chars=max_chars
        )
        self.add_action(ingest_document, config=settings.model_dump())
