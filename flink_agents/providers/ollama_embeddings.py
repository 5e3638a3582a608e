"""Ollama's native embedding API (``POST {base_url}/api/embed``, a batch per request), over
``httpx`` like the Ollama chat connection."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

from flink_agents.api.chat import TokenUsage
from flink_agents.api.embeddings import Embeddings
from flink_agents.providers._endpoint import HttpEmbeddingEndpoint
from flink_agents.providers._http_errors import AttemptFailure
from flink_agents.providers.ollama import ollama_client, post_json


def ollama_embed_body(texts: list[str], model: str, dimensions: int | None) -> dict[str, Any]:
    """The request body of an ``/api/embed`` call."""
    body: dict[str, Any] = {"model": model, "input": texts}
    if dimensions is not None:
        body["dimensions"] = dimensions
    return body


def from_ollama_embed(data: Any) -> Embeddings:
    """The vectors of an ``/api/embed`` reply, in the order of the texts, with its usage (its
    ``prompt_eval_count``, when it sends one)."""
    try:
        vectors = [[float(x) for x in vector] for vector in data["embeddings"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise AttemptFailure.malformed(f"not an /api/embed reply: missing or bad {exc}") from None
    tokens = data.get("prompt_eval_count")
    usage = TokenUsage(input_tokens=tokens) if isinstance(tokens, int) else None
    model = data.get("model")
    return Embeddings(vectors, usage=usage, model=model if isinstance(model, str) else None)


class OllamaEmbeddingModelConnection(HttpEmbeddingEndpoint):
    """An Ollama server's embeddings. ``base_url`` is the host, e.g. http://127.0.0.1:11434."""

    provider: ClassVar[str] = "ollama"
    default_base_url: ClassVar[str] = "http://127.0.0.1:11434"
    api_key_hint: ClassVar[str] = "OLLAMA_API_KEY"

    def _make_client(self) -> httpx.AsyncClient:
        return ollama_client(self)

    async def _embed_attempt(
        self, client: httpx.AsyncClient, texts: list[str], model: str, dimensions: int | None
    ) -> Embeddings:
        body = ollama_embed_body(texts, model, dimensions)
        return from_ollama_embed(await post_json(client, "/api/embed", body))
