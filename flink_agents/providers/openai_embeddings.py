"""OpenAI-compatible embeddings (``POST {base_url}/embeddings``): OpenAI, vLLM, llama.cpp
server, LM Studio, Ollama's ``/v1``. Uses the official ``openai`` client with its own retries
off, like the chat connection: every attempt counts against the durable call's budget."""

from __future__ import annotations

from typing import Any, ClassVar

from flink_agents.api.chat import TokenUsage
from flink_agents.api.embeddings import Embeddings
from flink_agents.providers._endpoint import HttpEmbeddingEndpoint
from flink_agents.providers._http_errors import AttemptFailure, sdk_call, what_was_sent
from flink_agents.providers._sdk import sdk_from_extra
from flink_agents.providers.openai_compatible import openai_client

with sdk_from_extra("openai"):
    import openai


def from_openai_embeddings(reply: Any) -> Embeddings:
    """The vectors of an embeddings reply, put back in the order of the texts (by ``index``),
    with the reply's ``usage`` (its ``prompt_tokens``: an embedding has no output tokens)."""
    try:
        items = sorted(reply.data, key=lambda item: item.index)
        vectors = [[float(x) for x in item.embedding] for item in items]
    except (AttributeError, TypeError, ValueError) as exc:
        raise AttemptFailure.malformed(
            f"not an embeddings reply ({exc}); the server sent {what_was_sent(reply)}"
        ) from None
    usage = getattr(reply, "usage", None)
    tokens = getattr(usage, "prompt_tokens", None)
    reported = TokenUsage(input_tokens=tokens) if isinstance(tokens, int) else None
    return Embeddings(vectors, usage=reported, model=getattr(reply, "model", None))


class OpenAICompatibleEmbeddingModelConnection(HttpEmbeddingEndpoint):
    """An embeddings endpoint. ``base_url`` includes the ``/v1`` prefix."""

    provider: ClassVar[str] = "openai-compatible"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    api_key_hint: ClassVar[str] = "OPENAI_API_KEY"

    def _make_client(self) -> openai.AsyncOpenAI:
        return openai_client(self)

    async def _embed_attempt(
        self, client: openai.AsyncOpenAI, texts: list[str], model: str, dimensions: int | None
    ) -> Embeddings:
        options: dict[str, Any] = {"dimensions": dimensions} if dimensions is not None else {}
        reply = await sdk_call(
            client.embeddings.create(model=model, input=texts, encoding_format="float", **options),
            status_error=openai.APIStatusError,
            connection_error=openai.APIConnectionError,
        )
        return from_openai_embeddings(reply)
