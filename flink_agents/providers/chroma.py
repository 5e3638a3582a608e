"""Chroma as a vector store: embedded (a persistent local folder) or a client of a server.

Vectors are always passed in explicitly. The collection is created with no embedding function
(``embedding_function=None``) and is only ever given ``embeddings=`` and ``query_embeddings=``,
so Chroma's default embedding function, which downloads a model when first used, never runs.

Chroma's client is synchronous; each call runs in a worker thread so the event loop (other keys'
runs) is not blocked (long-term memory's writes too, in order per key; its reads are made on the
engine's thread).

The same store can keep long-term memory (a memory set's ``vector_store``): a collection per
set and key, named from ``collection`` (:mod:`flink_agents.providers.chroma_memory`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, model_validator

from flink_agents.api.embeddings import Vector
from flink_agents.api.vector_stores import (
    MetadataFilter,
    VectorMatch,
    VectorRecord,
    VectorStore,
    filter_conditions,
)
from flink_agents.providers._sdk import sdk_from_extra

RETRIEVAL_EXTRA = "flink-agents-py[retrieval]"

with sdk_from_extra("chromadb", RETRIEVAL_EXTRA):
    import chromadb

    from flink_agents.providers.chroma_memory import ChromaCollections, ChromaMemoryNamespace

DEFAULT_PATH = ".cache/chroma/embedded"


def chroma_where(where: MetadataFilter | None) -> dict[str, Any] | None:
    """A metadata filter in Chroma's ``where`` form (several fields: ``$and``)."""
    clauses = [{field: {op: operand}} for field, op, operand in filter_conditions(where or {})]
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def matches_from_chroma(result: Any) -> list[VectorMatch]:
    """The matches of a one-vector query result; cosine distance back to similarity."""
    ids, documents = result["ids"][0], result["documents"][0]
    metadatas, distances = result["metadatas"][0], result["distances"][0]
    return [
        VectorMatch(
            id=record_id, document=document or "", metadata=dict(metadata or {}), score=1 - distance
        )
        for record_id, document, metadata, distance in zip(
            ids, documents, metadatas, distances, strict=True
        )
    ]


class ChromaVectorStore(VectorStore):
    """One Chroma collection (cosine space).

    Embedded by default: the collection lives in ``path``. With ``url``
    (``http://127.0.0.1:8000``, e.g. the server of ``scripts/chroma.sh``) it is a client of
    that server instead.
    """

    collection: str = Field(min_length=3, description="Collection name (3-512 of [a-zA-Z0-9._-]).")
    path: str = Field(default=DEFAULT_PATH, description="Folder of the embedded database.")
    url: str | None = Field(default=None, description="A Chroma server; overrides ``path``.")

    _collection: Any = PrivateAttr(default=None)
    _memory: ChromaCollections | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_location(self) -> ChromaVectorStore:
        if self.url is not None and self.path != DEFAULT_PATH:
            raise ValueError("give a Chroma server 'url' or an embedded 'path', not both")
        return self

    def open(self) -> None:
        """Connect (or open the folder) and get or create the collection."""
        self._handle()

    def _client(self) -> Any:
        if self.url is not None:
            parts = urlsplit(self.url)
            return chromadb.HttpClient(
                host=parts.hostname or "127.0.0.1",
                port=parts.port or 8000,
                ssl=parts.scheme == "https",
            )
        Path(self.path).mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=self.path)

    def _handle(self) -> Any:
        if self._collection is None:
            self._collection = self._client().get_or_create_collection(
                self.collection,
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}},
            )
        return self._collection

    def memory_namespace(self, set_name: str, key: str) -> ChromaMemoryNamespace:
        """The collection of a memory set's items for ``key`` (long-term memory on Chroma;
        ``collection`` is the prefix of its name). The store's own collection is not used."""
        if self._memory is None:
            client = self._client()
            self._memory = ChromaCollections(lambda: client)
        return ChromaMemoryNamespace(self._memory, self.collection, set_name, key, chroma_where)

    async def aclose(self) -> None:
        """Let long-term memory's writes in flight finish, then stop its writer threads."""
        if self._memory is not None:
            await asyncio.to_thread(self._memory.writers.close)

    async def upsert(self, records: list[VectorRecord]) -> int:
        if not records:
            return 0
        for record in records:
            self.check_dimension(record.embedding, f"record {record.id!r}")
        await asyncio.to_thread(
            self._handle().upsert,
            ids=[r.id for r in records],
            embeddings=[r.embedding for r in records],
            documents=[r.document for r in records],
            metadatas=[r.metadata or None for r in records],
        )
        return len(records)

    async def delete(self, ids: list[str]) -> int:
        if ids:
            await asyncio.to_thread(self._handle().delete, ids=ids)
        return len(ids)

    async def query(
        self, embedding: Vector, top_k: int = 4, where: MetadataFilter | None = None
    ) -> list[VectorMatch]:
        self.check_dimension(embedding, "the query vector")
        result = await asyncio.to_thread(
            self._handle().query,
            query_embeddings=[embedding],
            n_results=top_k,
            where=chroma_where(where),
            include=["documents", "metadatas", "distances"],
        )
        return matches_from_chroma(result)

    async def count(self) -> int:
        return int(await asyncio.to_thread(self._handle().count))
