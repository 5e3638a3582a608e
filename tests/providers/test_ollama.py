"""Ollama's /api/chat: arguments that arrive as text are parsed, or kept as they came when
they are not a JSON object (the model is told, not the run ended); a 404 names the URL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.providers._http_errors import ModelCallError
from tests.providers.fake_servers import FakeModelServer, ScriptedResponse, ollama_reply
from tests.providers.providers import OLLAMA


def reply_with_arguments(arguments: Any) -> ScriptedResponse:
    body = ollama_reply("")
    body["message"]["tool_calls"] = [{"function": {"name": "lookup", "arguments": arguments}}]
    return ScriptedResponse(body=body)


ASK = ChatRequest(messages=[ChatMessage(role="user", content="hi")])


@pytest.mark.parametrize(
    ("arguments", "parsed", "unparsed"),
    [
        ({"word": "flink"}, {"word": "flink"}, None),
        ('{"word": "flink"}', {"word": "flink"}, None),
        ('{"word": "fli', {}, '{"word": "fli'),
        (["flink"], {}, '["flink"]'),
    ],
)
def test_arguments_as_objects_or_text(
    server: FakeModelServer, arguments: Any, parsed: dict[str, Any], unparsed: str | None
) -> None:
    server.enqueue(reply_with_arguments(arguments))
    (call,) = asyncio.run(OLLAMA.connect(server.url).chat(ASK)).tool_calls
    assert (call.id, call.name, call.arguments, call.unparsed_arguments) == (
        "call_0_0",
        "lookup",
        parsed,
        unparsed,
    )


def test_a_404_names_the_url(server: FakeModelServer) -> None:
    server.enqueue(ScriptedResponse(status=404, body={"error": "model 'm' not found"}))
    with pytest.raises(ModelCallError) as caught:
        asyncio.run(OLLAMA.connect(server.url).chat(ASK))
    assert caught.value.reason == f"HTTP 404 at {server.url}/api/chat: model 'm' not found"
