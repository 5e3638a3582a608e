"""``max_response_bytes``: a model client never reads more of a response body than its cap; a
larger body fails the call once (not retried), naming the endpoint and the setting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.providers import ModelCallError
from flink_agents.providers._response_cap import ResponseTooLargeError, response_cap
from tests.providers.fake_servers import FakeModelServer, ScriptedResponse
from tests.providers.providers import (
    ANTHROPIC,
    ANTHROPIC_KEY_VAR,
    AZURE_OPENAI,
    BEDROCK,
    GEMINI,
    GEMINI_KEY_VAR,
    OLLAMA,
    OPENAI,
    OPENAI_RESPONSES,
    VLLM,
    Provider,
)

CAPPED = [OPENAI, ANTHROPIC, OLLAMA, AZURE_OPENAI, OPENAI_RESPONSES, VLLM, GEMINI, BEDROCK]


@pytest.mark.parametrize("provider", CAPPED, ids=lambda p: p.name)
def test_a_reply_over_the_cap_fails_once_naming_the_setting(
    provider: Provider, server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ANTHROPIC_KEY_VAR, "test-key")
    monkeypatch.setenv(GEMINI_KEY_VAR, "test-key")
    big = ScriptedResponse(body=provider.text("x" * 200_000))
    server.enqueue(big, big, big)
    connection = provider.connect(server.url, max_response_bytes=50_000)
    request = ChatRequest(messages=[ChatMessage(role="user", content="hi")])

    with pytest.raises(ModelCallError) as failed:
        asyncio.run(connection.chat(request))

    assert "is larger than 50000 bytes (max_response_bytes)" in str(failed.value)
    assert server.request_count == 1  # final: another attempt would read the same body


@pytest.mark.parametrize("provider", CAPPED, ids=lambda p: p.name)
def test_a_reply_under_the_cap_is_read(
    provider: Provider, server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ANTHROPIC_KEY_VAR, "test-key")
    monkeypatch.setenv(GEMINI_KEY_VAR, "test-key")
    server.enqueue(ScriptedResponse(body=provider.text("y" * 20_000)))
    connection = provider.connect(server.url, max_response_bytes=50_000)
    request = ChatRequest(messages=[ChatMessage(role="user", content="hi")])

    assert asyncio.run(connection.chat(request)).content == "y" * 20_000


def test_a_chunked_body_without_a_length_stops_at_the_cap() -> None:
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        for _ in range(1_000):
            sent.append(1)
            yield b"z" * 1_000

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=endless())

    async def fetch() -> None:
        hooks = {"response": [response_cap(10_000, httpx.AsyncByteStream)]}
        transport = httpx.MockTransport(answer)
        async with httpx.AsyncClient(transport=transport, event_hooks=hooks) as client:
            await client.get("http://model.test/v1/chat?key=secret")

    with pytest.raises(ResponseTooLargeError) as failed:
        asyncio.run(fetch())

    assert str(failed.value) == (
        "the response body from http://model.test/v1/chat is larger than 10000 bytes "
        "(max_response_bytes)"
    )
    assert not failed.value.retryable
    assert len(sent) == 11  # read up to the chunk that passed the cap, not the 1,000
