"""Embedding connections over their real protocols (OpenAI-compatible, Ollama) against a local
fake server, and the deterministic hashing embedding."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import pytest

from flink_agents.api.embeddings import (
    EmbeddingDimensionError,
    EmbeddingModelConnection,
    EmbeddingModelSetup,
)
from flink_agents.api.resources import Resource, ResourceType
from flink_agents.providers._http_errors import ModelCallError
from flink_agents.providers._retry import RetryPolicy
from flink_agents.providers.hashing_embeddings import HashingEmbeddingModelConnection
from flink_agents.providers.ollama_embeddings import OllamaEmbeddingModelConnection
from flink_agents.providers.openai_embeddings import OpenAICompatibleEmbeddingModelConnection
from tests.providers.fake_servers import FakeModelServer, RecordedRequest, ScriptedResponse

FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff_seconds=0, jitter=0)


def openai_embeddings_reply(vectors: list[list[float]]) -> dict[str, object]:
    # Items deliberately out of order: the client must put them back by index.
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)][
        ::-1
    ]
    usage = {"prompt_tokens": 1, "total_tokens": 1}
    return {"object": "list", "data": data, "model": "fake-embed", "usage": usage}


def ollama_embed_reply(vectors: list[list[float]]) -> dict[str, object]:
    return {"model": "fake-embed", "embeddings": vectors, "prompt_eval_count": 1}


Provider = tuple[
    str,
    Callable[[str], EmbeddingModelConnection],
    Callable[[list[list[float]]], dict[str, object]],
    str,
]
PROVIDERS: list[Provider] = [
    (
        "openai",
        lambda url: OpenAICompatibleEmbeddingModelConnection(
            base_url=f"{url}/v1", retry=FAST_RETRY
        ),
        openai_embeddings_reply,
        "/v1/embeddings",
    ),
    (
        "ollama",
        lambda url: OllamaEmbeddingModelConnection(base_url=url, retry=FAST_RETRY),
        ollama_embed_reply,
        "/api/embed",
    ),
]


def vectors_for(request: RecordedRequest, dimensions: int) -> list[list[float]]:
    """One vector per input text: [ordinal of the text's number, 0, ...]."""
    texts = request.json()["input"]
    return [[float(text.split()[-1])] + [0.0] * (dimensions - 1) for text in texts]


def setup_on(connection: Resource, **fields: object) -> EmbeddingModelSetup:
    setup = EmbeddingModelSetup(connection="conn", **fields)  # type: ignore[arg-type]

    def lookup(name: str, resource_type: ResourceType) -> Resource:
        assert (name, resource_type) == ("conn", ResourceType.EMBEDDING_MODEL_CONNECTION)
        return connection

    setup.bind(lookup)
    return setup


@pytest.fixture(params=PROVIDERS, ids=lambda p: p[0])
def provider(request: pytest.FixtureRequest) -> Provider:
    return request.param  # type: ignore[no-any-return]


def test_batches_are_sent_in_order_and_vectors_come_back_in_text_order(
    provider: Provider, server: FakeModelServer
) -> None:
    _, connect, reply, path = provider
    server.fallback = lambda request: ScriptedResponse(body=reply(vectors_for(request, 3)))
    setup = setup_on(connect(server.url), model="fake-embed", dimensions=3, batch_size=2)
    texts = [f"text {i}" for i in range(5)]

    async def embed_all() -> list[list[float]]:
        return [v for batch in setup.batches(texts) for v in await setup.embed_batch(batch)]

    vectors = asyncio.run(embed_all())

    assert [v[0] for v in vectors] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [r.path for r in server.requests] == [path] * 3
    assert [r.json()["input"] for r in server.requests] == [
        ["text 0", "text 1"],
        ["text 2", "text 3"],
        ["text 4"],
    ]
    assert all(r.json()["model"] == "fake-embed" for r in server.requests)
    assert all("dimensions" not in r.json() for r in server.requests)


def test_a_batch_carries_the_usage_the_server_reported(
    provider: Provider, server: FakeModelServer
) -> None:
    """What budgets count (docs/budgets.md): OpenAI's ``usage.prompt_tokens``, Ollama's
    ``prompt_eval_count``; a reply without it reports nothing."""
    _, connect, reply, _ = provider
    server.fallback = lambda request: ScriptedResponse(body=reply(vectors_for(request, 2)))
    setup = setup_on(connect(server.url), model="fake-embed", dimensions=2)
    batch = asyncio.run(setup.embed_batch(["text 0"]))
    assert batch.usage is not None and batch.usage.input_tokens == 1
    assert batch.model == "fake-embed"

    def without_usage(request: RecordedRequest) -> ScriptedResponse:
        body = dict(reply(vectors_for(request, 2)))
        body.pop("usage", None)
        body.pop("prompt_eval_count", None)
        return ScriptedResponse(body=body)

    server.fallback = without_usage
    assert asyncio.run(setup.embed_batch(["text 1"])).usage is None


def test_a_reply_of_the_wrong_dimension_is_a_clear_error(
    provider: Provider, server: FakeModelServer
) -> None:
    _, connect, reply, _ = provider
    server.enqueue(ScriptedResponse(body=reply([[0.1, 0.2]])))
    setup = setup_on(connect(server.url), model="fake-embed", dimensions=3)

    with pytest.raises(EmbeddingDimensionError, match=r"dimension 2 .* expects 3"):
        asyncio.run(setup.embed_batch(["one"]))


def test_without_dimensions_the_first_reply_sets_them(
    provider: Provider, server: FakeModelServer
) -> None:
    _, connect, reply, _ = provider
    server.enqueue(ScriptedResponse(body=reply([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]])))
    server.enqueue(ScriptedResponse(body=reply([[0.1, 0.2]])))
    setup = setup_on(connect(server.url), model="fake-embed")

    assert len(asyncio.run(setup.embed_batch(["one", "two"]))[1]) == 3
    with pytest.raises(EmbeddingDimensionError, match=r"dimension 2 .* expects 3"):
        asyncio.run(setup.embed_batch(["three"]))


def test_vectors_of_one_reply_must_share_a_length_without_dimensions(
    provider: Provider, server: FakeModelServer
) -> None:
    _, connect, reply, _ = provider
    server.enqueue(ScriptedResponse(body=reply([[0.1, 0.2, 0.3], [0.3, 0.2]])))
    setup = setup_on(connect(server.url), model="fake-embed")

    with pytest.raises(EmbeddingDimensionError, match=r"dimension 2 for text #1; .* expects 3"):
        asyncio.run(setup.embed_batch(["one", "two"]))


def test_requesting_dimensions_needs_them() -> None:
    with pytest.raises(ValueError, match="request_dimensions needs dimensions"):
        EmbeddingModelSetup(connection="c", request_dimensions=True)


def test_a_reply_missing_vectors_is_an_error(provider: Provider, server: FakeModelServer) -> None:
    _, connect, reply, _ = provider
    server.enqueue(ScriptedResponse(body=reply([[0.1, 0.2, 0.3]])))
    setup = setup_on(connect(server.url), model="fake-embed", dimensions=3)

    with pytest.raises(EmbeddingDimensionError, match="1 vectors for 2 texts"):
        asyncio.run(setup.embed_batch(["one", "two"]))


def test_an_openai_reply_that_is_not_an_embeddings_reply_is_quoted(
    server: FakeModelServer,
) -> None:
    server.enqueue(ScriptedResponse(body={"object": "error", "message": "no such model"}))
    connection = OpenAICompatibleEmbeddingModelConnection(base_url=f"{server.url}/v1")
    setup = setup_on(connection, model="fake-embed", dimensions=3)

    with pytest.raises(ModelCallError) as caught:
        asyncio.run(setup.embed_batch(["one"]))
    assert 'the server sent {"object": "error", "message": "no such model"}' in str(caught.value)


def test_dimensions_are_requested_when_the_setup_asks(
    provider: Provider, server: FakeModelServer
) -> None:
    _, connect, reply, _ = provider
    server.enqueue(ScriptedResponse(body=reply([[1.0, 0.0]])))
    setup = setup_on(connect(server.url), model="fake-embed", dimensions=2, request_dimensions=True)

    asyncio.run(setup.embed_batch(["one"]))

    assert server.requests[0].json()["dimensions"] == 2


def test_server_errors_are_retried_within_the_budget(
    provider: Provider, server: FakeModelServer
) -> None:
    _, connect, reply, _ = provider
    server.enqueue(
        ScriptedResponse(status=503, body={"error": {"message": "busy"}}),
        ScriptedResponse(body=reply([[1.0]])),
    )
    setup = setup_on(connect(server.url), model="fake-embed", dimensions=1)

    assert asyncio.run(setup.embed_batch(["one"])) == [[1.0]]
    assert server.request_count == 2


def test_a_client_error_fails_at_once(provider: Provider, server: FakeModelServer) -> None:
    _, connect, _, _ = provider
    server.enqueue(ScriptedResponse(status=400, body={"error": {"message": "bad model"}}))
    setup = setup_on(connect(server.url), model="fake-embed", dimensions=1)

    with pytest.raises(ModelCallError, match="HTTP 400"):
        asyncio.run(setup.embed_batch(["one"]))
    assert server.request_count == 1


def test_a_batch_larger_than_the_batch_size_is_refused() -> None:
    setup = setup_on(HashingEmbeddingModelConnection(), dimensions=8, batch_size=2)

    with pytest.raises(ValueError, match="at most 2"):
        asyncio.run(setup.embed_batch(["a", "b", "c"]))


def test_hashing_embedding_is_deterministic_normalised_and_word_based() -> None:
    setup = setup_on(HashingEmbeddingModelConnection(dimensions=64), dimensions=64)
    texts = ["Flink checkpoints state", "flink CHECKPOINTS state!", "bananas are yellow", "the"]

    first, same, other, empty = asyncio.run(setup.embed_batch(texts))

    assert first == same
    assert math.isclose(sum(x * x for x in first), 1.0)
    assert sum(a * b for a, b in zip(first, same, strict=True)) > 0.99
    assert abs(sum(a * b for a, b in zip(first, other, strict=True))) < 0.5
    assert empty == [0.0] * 64  # only stop words: no features
    assert asyncio.run(setup.embed_batch(texts[:1])) == [first]


def test_hashing_embedding_honours_requested_dimensions() -> None:
    setup = setup_on(HashingEmbeddingModelConnection(), dimensions=16, request_dimensions=True)

    (vector,) = asyncio.run(setup.embed_batch(["stream processing"]))

    assert len(vector) == 16
