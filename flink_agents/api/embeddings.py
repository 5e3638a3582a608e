"""Embedding models, split in two resources like chat models.

* An :class:`EmbeddingModelConnection` is the endpoint: a client, a base URL, credentials.
  It turns one batch of texts into vectors.
* An :class:`EmbeddingModelSetup` is one way of using it: the model, the vectors' dimension and
  the batch size. It is what actions look up (``ResourceType.EMBEDDING_MODEL``), and it refuses
  a reply whose vectors do not have the configured dimension (without one configured: the
  dimension of its first reply).

An action embeds through ``ctx.durable_execute_async`` one batch at a time (see
:func:`flink_agents.agents.retrieval.embed_texts`), so a replay hands recorded vectors back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar, cast

from pydantic import Field, PrivateAttr, model_validator

from flink_agents.api.chat import TokenUsage
from flink_agents.api.resources import Resource, ResourceType

Vector = list[float]


class Embeddings(list[Vector]):
    """The vectors of one batch, with what embedding them spent: a list of vectors like any
    other, plus the ``usage`` the provider reported (None: it reported none) and the ``model``
    that embedded them. Budgets count the usage (docs/budgets.md); a replay hands back the
    recorded vectors as a plain list and counts the spend recorded with the call."""

    def __init__(
        self,
        vectors: Sequence[Vector] = (),
        *,
        usage: TokenUsage | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(vectors)
        self.usage = usage
        self.model = model


class EmbeddingDimensionError(ValueError):
    """An embedding reply whose vectors, or number of vectors, are not what was asked for."""


class EmbeddingModelConnection(Resource):
    """An endpoint that embeds texts. Providers subclass this."""

    resource_type: ClassVar[ResourceType] = ResourceType.EMBEDDING_MODEL_CONNECTION

    async def embed(
        self, texts: list[str], model: str | None, dimensions: int | None
    ) -> list[Vector]:
        """One vector per text, in order. ``dimensions`` is passed on to models that can shorten
        their vectors; the setup checks the result either way. A connection whose provider
        reports usage returns :class:`Embeddings` carrying it."""
        raise NotImplementedError


class EmbeddingModelSetup(Resource):
    """A configured embedding model: what actions ask for by name."""

    resource_type: ClassVar[ResourceType] = ResourceType.EMBEDDING_MODEL

    connection: str = Field(description="Name of an embedding_model_connection resource.")
    model: str | None = None
    dimensions: int | None = Field(
        default=None,
        ge=1,
        description="Length of every vector; a reply is checked. Unset: the length of the "
        "first reply's vectors, which every later reply must have.",
    )
    batch_size: int = Field(default=64, ge=1, description="Texts per call to the connection.")
    request_dimensions: bool = Field(
        default=False,
        description="Ask the server for vectors of ``dimensions`` (OpenAI text-embedding-3).",
    )

    _first_reply_dimensions: int | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _dimensions_to_request(self) -> EmbeddingModelSetup:
        if self.request_dimensions and self.dimensions is None:
            raise ValueError("request_dimensions needs dimensions: the length to ask for")
        return self

    def batches(self, texts: Sequence[str]) -> list[list[str]]:
        """``texts`` cut into the batches :meth:`embed_batch` takes, in order."""
        return [list(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]

    async def embed_batch(self, texts: list[str]) -> Embeddings:
        """Vectors of one batch (at most ``batch_size`` texts), their count and length checked,
        with the usage the connection reported (:class:`Embeddings`)."""
        if len(texts) > self.batch_size:
            raise ValueError(f"a batch holds at most {self.batch_size} texts, got {len(texts)}")
        connection = cast(
            EmbeddingModelConnection,
            self.get_resource(self.connection, ResourceType.EMBEDDING_MODEL_CONNECTION),
        )
        asked = self.dimensions if self.request_dimensions else None
        vectors = await connection.embed(texts, self.model, asked)
        expected = self.dimensions or self._first_reply_dimensions
        checked = check_vectors(vectors, len(texts), expected, self.model or self.connection)
        if expected is None and checked:
            self._first_reply_dimensions = len(checked[0])
        usage = vectors.usage if isinstance(vectors, Embeddings) else None
        return Embeddings(
            checked, usage=usage, model=self.model or getattr(connection, "model", None)
        )


def check_vectors(
    vectors: list[Vector], count: int, dimensions: int | None, model: str
) -> list[Vector]:
    """``vectors`` when there are ``count`` of them, each of ``dimensions`` finite floats
    (``None``: of the first vector's length)."""
    if len(vectors) != count:
        raise EmbeddingDimensionError(
            f"embedding model {model!r} returned {len(vectors)} vectors for {count} texts"
        )
    if dimensions is None and vectors:
        dimensions = len(vectors[0])
    for index, vector in enumerate(vectors):
        if len(vector) != dimensions:
            raise EmbeddingDimensionError(
                f"embedding model {model!r} returned a vector of dimension {len(vector)} for "
                f"text #{index}; the setup expects {dimensions} (check 'dimensions' and the model)"
            )
        if not all(math.isfinite(x) for x in vector):
            raise EmbeddingDimensionError(
                f"embedding model {model!r} returned a non-finite value in vector #{index}"
            )
    return [[float(x) for x in vector] for vector in vectors]
