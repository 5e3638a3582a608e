"""Every provider reads a 2xx reply of the wrong shape as a malformed response: the call fails
with a ``ModelCallError`` that says which protocol the reply broke and what was wrong (a field
of the wrong type, JSON nested too deeply), never with a bare ``KeyError``, ``TypeError``,
``RecursionError`` or pydantic error out of the reply parser or the SDK.

The property tests send each provider's fake server a well-formed reply (a text answer or a
tool call) with one part replaced by an arbitrary JSON value; the plain tests below them are
the defects the properties found, one each.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from flink_agents.api.chat import ChatMessage
from flink_agents.api.chat_models import ChatRequest
from flink_agents.providers._http_errors import ModelCallError
from tests.adversarial import nested_text, one_part_replaced
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
    PROVIDERS,
    Provider,
)

REQUEST = ChatRequest(messages=[ChatMessage(role="user", content="q")])


@pytest.fixture(scope="module")
def reply_server() -> Iterator[FakeModelServer]:
    """One fake server for every example of the module (starting one per example is slow)."""
    with FakeModelServer() as fake:
        yield fake


@pytest.fixture(autouse=True)
def api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ANTHROPIC_KEY_VAR, "test-key")
    monkeypatch.setenv(GEMINI_KEY_VAR, "test-key")


def answer(provider: Provider, server: FakeModelServer, body: Any) -> ChatMessage | ModelCallError:
    """What ``provider``'s connection makes of one reply with ``body``: the message, or the
    call's failure (any other exception escapes)."""
    server.enqueue(ScriptedResponse(body=body))
    connection = provider.connect(server.url)
    try:
        return asyncio.run(connection.chat(REQUEST))
    except ModelCallError as error:
        return error


def well_formed_replies(provider: Provider) -> list[Any]:
    return [provider.text("hello"), provider.tool_call("call_1", "lookup", {"id": 7})]


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
def test_a_reply_with_any_part_of_the_wrong_shape_fails_the_call_naming_the_protocol(
    provider: Provider, reply_server: FakeModelServer
) -> None:
    @settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        reply=one_part_replaced(provider.text("hello"))
        | one_part_replaced(provider.tool_call("call_1", "lookup", {"id": 7}))
    )
    def check(reply: tuple[Any, Any]) -> None:
        path, body = reply
        outcome = answer(provider, reply_server, body)
        if isinstance(outcome, ModelCallError):
            assert outcome.reason, path
            assert "Traceback" not in str(outcome)

    check()


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
def test_a_body_nested_too_deeply_fails_the_call_as_malformed(
    provider: Provider, reply_server: FakeModelServer
) -> None:
    outcome = answer(provider, reply_server, nested_text(100_000).encode())
    assert isinstance(outcome, ModelCallError)
    assert "malformed response body" in outcome.reason


# --- the defects the properties found ----------------------------------------------------------


FOUND = [
    pytest.param(
        OPENAI,
        OPENAI.tool_call("call_1", "lookup", {}),
        ("choices", 0, "message", "tool_calls", 0, "id"),
        {"not": "an id"},
        "not a chat completion (ToolCall.id: Input should be a valid string)",
        id="chat completion, tool call id an object",
    ),
    pytest.param(
        OPENAI,
        OPENAI.text("hi"),
        ("choices",),
        {"first": {}},
        "not a chat completion (KeyError: 0)",
        id="chat completion, choices an object",
    ),
    pytest.param(
        ANTHROPIC,
        ANTHROPIC.text("hi"),
        ("content", 0, "text"),
        None,
        "not a Messages reply (TypeError",
        id="messages, text null",
    ),
    pytest.param(
        OLLAMA,
        OLLAMA.text("hi"),
        ("eval_count",),
        None,
        "not an /api/chat reply (TokenUsage.output_tokens",
        id="ollama, token count null",
    ),
    pytest.param(
        OPENAI_RESPONSES,
        OPENAI_RESPONSES.text("hi"),
        ("output", 0, "content", 0, "text"),
        {},
        "not a Responses API response (TypeError",
        id="responses, text an object",
    ),
    pytest.param(
        GEMINI,
        GEMINI.text("hi"),
        ("candidates", 0, "finishReason"),
        [],
        "not a generateContent response",
        id="gemini, finish reason a list",
    ),
    pytest.param(
        BEDROCK,
        BEDROCK.text("hi"),
        ("usage",),
        "many",
        "not a Converse reply",
        id="converse, usage a string",
    ),
]
"""Replies the properties above found escaping as bare errors: (provider, a good reply, the
path of the part replaced, its wrong value, what the call's failure says)."""


@pytest.mark.parametrize(("provider", "reply", "path", "wrong", "says"), FOUND)
def test_a_reply_the_properties_found_is_malformed(
    reply_server: FakeModelServer,
    provider: Provider,
    reply: dict[str, Any],
    path: tuple[str | int, ...],
    wrong: Any,
    says: str,
) -> None:
    body = copy.deepcopy(reply)
    *parents, last = path
    holder: Any = body
    for part in parents:
        holder = holder[part]
    holder[last] = wrong
    outcome = answer(provider, reply_server, body)
    assert isinstance(outcome, ModelCallError)
    assert says in outcome.reason
