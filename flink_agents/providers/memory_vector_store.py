"""An in-memory vector store: exact cosine search over a dict, for unit tests and small demos.

Its records live in the resource instance, so they are gone when the process ends.
"""

from __future__ import annotations

import math

from pydantic import PrivateAttr

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

    _records: dict[str, VectorRecord] = PrivateAttr(default_factory=dict)

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
