"""tool_choice and parallel_tool_calls on the wire of each protocol: chat completions (a mode
or a named function; 'auto' sent whenever tools are), Anthropic Messages ('required' is 'any',
a name is a 'tool', parallel calls off is 'disable_parallel_tool_use'), the Responses API (a
flat named function), Gemini and Bedrock (the request's choice over the connection's), and
Ollama's /api/chat, which has neither (a setup refuses what a protocol cannot send when opened:
tests/api/test_chat_models.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest, ToolSpec
from tests.providers.fake_servers import FakeModelServer, ScriptedResponse
from tests.providers.providers import (
    ANTHROPIC,
    ANTHROPIC_KEY_VAR,
    BEDROCK,
    GEMINI,
    GEMINI_KEY_VAR,
    OLLAMA,
    OPENAI,
    OPENAI_RESPONSES,
    Provider,
)

LOOKUP = ToolSpec(
    name="lookup", description="Look a word up.", parameters={"type": "object", "properties": {}}
)
UNSET = object()


@pytest.fixture(autouse=True)
def _anthropic_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ANTHROPIC_KEY_VAR, "test-key")
    monkeypatch.setenv(GEMINI_KEY_VAR, "test-key")


def sent(
    provider: Provider,
    server: FakeModelServer,
    tools: bool = True,
    connection: dict[str, Any] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    server.enqueue(ScriptedResponse(body=provider.text("ok")))
    request = ChatRequest(
        messages=[ChatMessage(role="user", content="hi")],
        tools=[LOOKUP] if tools else [],
        **settings,
    )
    asyncio.run(provider.connect(server.url, **(connection or {})).chat(request))
    body: dict[str, Any] = server.requests[-1].json()
    return body


@pytest.mark.parametrize(
    ("settings", "choice", "parallel"),
    [
        ({}, "auto", UNSET),
        ({"tool_choice": "none"}, "none", UNSET),
        ({"tool_choice": "required", "parallel_tool_calls": False}, "required", False),
        (
            {"tool_choice": "lookup", "parallel_tool_calls": True},
            {"type": "function", "function": {"name": "lookup"}},
            True,
        ),
    ],
)
def test_chat_completions(
    server: FakeModelServer, settings: dict[str, Any], choice: Any, parallel: Any
) -> None:
    body = sent(OPENAI, server, **settings)
    assert body["tool_choice"] == choice
    assert body.get("parallel_tool_calls", UNSET) == parallel


def test_chat_completions_send_no_tool_setting_without_tools(server: FakeModelServer) -> None:
    body = sent(OPENAI, server, tools=False, tool_choice="none", parallel_tool_calls=False)
    assert {"tools", "tool_choice", "parallel_tool_calls"}.isdisjoint(body)


@pytest.mark.parametrize(
    ("settings", "choice"),
    [
        ({}, UNSET),  # the API's default, auto
        ({"tool_choice": "auto"}, {"type": "auto"}),
        ({"tool_choice": "required"}, {"type": "any"}),
        ({"tool_choice": "none", "parallel_tool_calls": False}, {"type": "none"}),
        ({"tool_choice": "lookup"}, {"type": "tool", "name": "lookup"}),
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
        (
            {"tool_choice": "required", "parallel_tool_calls": False},
            {"type": "any", "disable_parallel_tool_use": True},
        ),
        ({"parallel_tool_calls": True}, UNSET),
    ],
)
def test_anthropic_messages(server: FakeModelServer, settings: dict[str, Any], choice: Any) -> None:
    assert sent(ANTHROPIC, server, **settings).get("tool_choice", UNSET) == choice


def test_ollamas_api_chat_sends_neither(server: FakeModelServer) -> None:
    body = sent(OLLAMA, server, tool_choice="auto", parallel_tool_calls=True)
    assert {"tool_choice", "parallel_tool_calls"}.isdisjoint(body)
    assert [tool["function"]["name"] for tool in body["tools"]] == ["lookup"]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, {}),  # the API's default, auto
        ({"tool_choice": "required"}, {"tool_choice": "required"}),
        (
            {"tool_choice": "lookup", "parallel_tool_calls": False},
            {"tool_choice": {"type": "function", "name": "lookup"}, "parallel_tool_calls": False},
        ),
    ],
)
def test_responses_api(
    server: FakeModelServer, settings: dict[str, Any], expected: dict[str, Any]
) -> None:
    body = sent(OPENAI_RESPONSES, server, **settings)
    assert {key: body[key] for key in ("tool_choice", "parallel_tool_calls") if key in body} == (
        expected
    )


@pytest.mark.parametrize(
    ("connection", "settings", "config"),
    [
        ({}, {}, None),
        ({"tool_choice": "required"}, {}, {"mode": "ANY"}),
        ({"tool_choice": "required"}, {"tool_choice": "none"}, {"mode": "NONE"}),
        ({}, {"tool_choice": "lookup"}, {"mode": "ANY", "allowedFunctionNames": ["lookup"]}),
    ],
)
def test_gemini_takes_the_requests_choice_over_the_connections(
    server: FakeModelServer, connection: dict[str, Any], settings: dict[str, Any], config: Any
) -> None:
    body = sent(GEMINI, server, connection=connection, **settings)
    assert body.get("toolConfig", {}).get("functionCallingConfig") == config


@pytest.mark.parametrize(
    ("connection", "settings", "choice"),
    [
        ({}, {}, None),
        ({"tool_choice": "required"}, {}, {"any": {}}),
        ({"tool_choice": "required"}, {"tool_choice": "auto"}, {"auto": {}}),
        ({}, {"tool_choice": "lookup"}, {"tool": {"name": "lookup"}}),
    ],
)
def test_bedrock_takes_the_requests_choice_over_the_connections(
    server: FakeModelServer, connection: dict[str, Any], settings: dict[str, Any], choice: Any
) -> None:
    body = sent(BEDROCK, server, connection=connection, **settings)
    assert body["toolConfig"].get("toolChoice") == choice
