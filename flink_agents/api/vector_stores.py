"""Vector stores: documents with their vectors and metadata, searched by similarity.

One interface for every store (:class:`VectorStore`): ``upsert`` records (id, document, vector,
metadata), ``delete`` by id, ``query`` the ``top_k`` nearest to a vector, optionally filtered on
metadata, and ``count``. Vectors always come from an embedding model resource and are passed in
explicitly; a store never embeds anything itself.

Metadata filters (:data:`MetadataFilter`) are a map ``field -> condition``, every field must
match: a plain value means equality; ``{"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte": value}``
compares, ``{"$in" | "$nin": [values]}`` tests membership. Similarity is cosine: a match's
``score`` is the cosine similarity (1 is the same direction).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.embeddings import Vector
from flink_agents.api.resources import Resource, ResourceType

MetadataValue = str | int | float | bool
MetadataFilter = Mapping[str, Any]

_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
    "$in": lambda value, options: value in options,
    "$nin": lambda value, options: value not in options,
}


class VectorRecord(BaseModel):
    """One stored entry: a document (a chunk of text), its vector and metadata."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    document: str
    embedding: Vector
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)


class VectorMatch(BaseModel):
    """One result of a query, nearest first."""

    model_config = ConfigDict(extra="forbid")

    id: str
    document: str
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    score: float = Field(description="Cosine similarity to the query vector.")


def filter_conditions(where: MetadataFilter) -> list[tuple[str, str, Any]]:
    """``where`` as ``(field, operator, operand)`` triples; an unknown operator is an error."""
    conditions: list[tuple[str, str, Any]] = []
    for field, condition in where.items():
        if isinstance(condition, Mapping):
            if len(condition) != 1 or next(iter(condition)) not in _COMPARISONS:
                raise ValueError(
                    f"filter on {field!r} must be a value or one of {list(_COMPARISONS)} with "
                    f"its operand, got {dict(condition)!r}"
                )
            ((op, operand),) = condition.items()
            if op in ("$in", "$nin") and not isinstance(operand, list):
                raise ValueError(f"filter {op} on {field!r} takes a list, got {operand!r}")
            conditions.append((field, op, operand))
        else:
            conditions.append((field, "$eq", condition))
    return conditions


def matches_filter(metadata: Mapping[str, Any], where: MetadataFilter | None) -> bool:
    """Whether ``metadata`` satisfies every condition of ``where`` (a missing field never does)."""
    for field, op, operand in filter_conditions(where or {}):
        if field not in metadata:
            return False
        try:
            if not _COMPARISONS[op](metadata[field], operand):
                return False
        except TypeError:  # ordering a string against a number: no match, not a crash
            return False
    return True


class VectorStore(Resource):
    """A collection of vector records. Providers subclass this; every method is one call that
    an action makes durable (``ctx.durable_execute_async``)."""

    resource_type: ClassVar[ResourceType] = ResourceType.VECTOR_STORE

    dimensions: int | None = Field(
        default=None, ge=1, description="When set, records and queries of another length fail."
    )

    async def upsert(self, records: list[VectorRecord]) -> int:
        """Insert or replace ``records`` by id; returns how many were written."""
        raise NotImplementedError

    async def delete(self, ids: list[str]) -> int:
        """Remove the records with ``ids`` (unknown ids are ignored); returns how many asked."""
        raise NotImplementedError

    async def query(
        self, embedding: Vector, top_k: int = 4, where: MetadataFilter | None = None
    ) -> list[VectorMatch]:
        """The ``top_k`` records nearest to ``embedding`` among those matching ``where``."""
        raise NotImplementedError

    async def count(self) -> int:
        """How many records the store holds."""
        raise NotImplementedError

    def check_dimension(self, vector: Vector, what: str) -> None:
        """Refuse a vector of the wrong length when the store knows its dimension."""
        if self.dimensions is not None and len(vector) != self.dimensions:
            raise ValueError(
                f"{what} has dimension {len(vector)}; this store holds vectors of {self.dimensions}"
            )
