"""A deterministic local embedding: feature hashing of a text's words, L2-normalised.

No model, no network, the same vector on every machine and every run: for tests, examples and
benchmarks. Each word (lower-cased, common English function words dropped) is hashed into one of
``dimensions`` buckets with a sign drawn from the same digest; counts are damped (``1 + log``)
so a repeated word does not drown the others. Texts that share words have a high cosine
similarity; meaning is not captured (synonyms are unrelated).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter

from pydantic import Field

from flink_agents.api.embeddings import EmbeddingModelConnection, Vector

_WORD = re.compile(r"[^\W_]+")
_STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "you",
        "your",
    }
)


def words(text: str) -> list[str]:
    """The words of ``text`` that count: lower-cased, without common function words."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP_WORDS]


def hashed_vector(text: str, dimensions: int) -> Vector:
    """The feature-hashed, unit-length vector of ``text`` (all zeros when it has no words)."""
    vector = [0.0] * dimensions
    for word, count in Counter(words(text)).items():
        digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
        sign = 1.0 if digest & 1 else -1.0
        vector[(digest >> 1) % dimensions] += sign * (1.0 + math.log(count))
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


class HashingEmbeddingModelConnection(EmbeddingModelConnection):
    """Embeds in-process by feature hashing; ``model`` is ignored."""

    dimensions: int = Field(
        default=256, ge=1, description="Vector length when the setup does not ask for one."
    )

    async def embed(
        self, texts: list[str], model: str | None, dimensions: int | None
    ) -> list[Vector]:
        return [hashed_vector(text, dimensions or self.dimensions) for text in texts]
