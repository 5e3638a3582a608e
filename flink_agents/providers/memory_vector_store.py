"""An in-memory vector store: exact cosine search over a dict, for unit tests and small demos.

The runtime builds resources from descriptors, so records live in a class-level registry keyed
by ``collection``: every store of one collection in a process sees the same records (an
ingestion agent's and a question-answering agent's). They are gone when the process ends.
"""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field

from flink_agents.api.embeddings import Vector
from flink_agents.api.vector_stores import (
    MetadataFilter,
    VectorMatch,
    VectorRecord,
    VectorStore,
    filter_conditions,
    matches_filter,
)


def cosine(a: Vector, b: Vector) -> float:
    """Cosine similarity (0 when either vector is all zeros)."""
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


class InMemoryVectorStore(VectorStore):
    """Records by id, searched exhaustively."""

    _collections: ClassVar[dict[str, dict[str, VectorRecord]]] = {}

    collection: str = Field(default="default", min_length=1)

    @classmethod
    def reset(cls, collection: str | None = None) -> None:
        """Forget the records of ``collection``, or of every collection."""
        if collection is None:
            cls._collections.clear()
        else:
            cls._collections.pop(collection, None)

    @property
    def _records(self) -> dict[str, VectorRecord]:
        return self._collections.setdefault(self.collection, {})

    async def upsert(self, records: list[VectorRecord]) -> int:
        for record in records:
            self.check_dimension(record.embedding, f"record {record.id!r}")
        self._records.update((record.id, record) for record in records)
        return len(records)

    async def delete(self, ids: list[str]) -> int:
        for record_id in ids:
            self._records.pop(record_id, None)
        return len(ids)

    async def query(
        self, embedding: Vector, top_k: int = 4, where: MetadataFilter | None = None
    ) -> list[VectorMatch]:
        self.check_dimension(embedding, "the query vector")
        filter_conditions(where or {})  # refuse a bad filter even on an empty store
        scored = [
            VectorMatch(
                id=record.id,
                document=record.document,
                metadata=record.metadata,
                score=cosine(embedding, record.embedding),
            )
            for record in self._records.values()
            if matches_filter(record.metadata, where)
        ]
        scored.sort(key=lambda match: (-match.score, match.id))
        return scored[:top_k]

    async def count(self) -> int:
        return len(self._records)
