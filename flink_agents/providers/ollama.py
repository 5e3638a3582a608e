"""Ollama's native chat API (``POST {base_url}/api/chat``, non-streaming).

Uses ``httpx`` directly rather than the ``ollama`` client: the client's ``ResponseError`` keeps
only the status and message, dropping the response headers, so a ``Retry-After`` from a proxy or
gateway in front of Ollama could not be honoured. For Ollama's OpenAI-compatible ``/v1``
endpoint, use the OpenAI-compatible connection instead.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import httpx

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage, ToolCall
from flink_agents.api.json_values import read_json
from flink_agents.providers._connection import HttpChatModelConnection, tool_names
from flink_agents.providers._endpoint import HttpEndpoint
from flink_agents.providers._http_errors import (
    UNREADABLE_REPLY,
    AttemptFailure,
    status_failure,
    unreadable_reply,
)
from flink_agents.providers.openai_compatible import to_openai_tool
from flink_agents.providers.retry_loop import request_target


def to_ollama_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Messages in ``/api/chat`` form: arguments as objects, tool results named by tool."""
    names = tool_names(messages)
    wire: list[dict[str, Any]] = []
    for message in messages:
        entry: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.role == "tool" and message.tool_call_id in names:
            entry["tool_name"] = names[message.tool_call_id]
        if message.tool_calls:
            entry["tool_calls"] = [
                {"function": {"name": call.name, "arguments": call.arguments}}
                for call in message.tool_calls
            ]
        wire.append(entry)
    return wire


def ollama_body(request: ChatRequest, model: str) -> dict[str, Any]:
    """The request body of an ``/api/chat`` call, ``extra`` merged in."""
    options: dict[str, Any] = {}
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if request.max_tokens is not None:
        options["num_predict"] = request.max_tokens
    body: dict[str, Any] = {
        "model": model,
        "messages": to_ollama_messages(request.messages),
        "stream": False,
    }
    if request.tools:
        # Same function-tool shape as chat completions.
        body["tools"] = [to_openai_tool(t) for t in request.tools]
    if options:
        body["options"] = options
    if request.response_schema is not None:
        body["format"] = request.response_schema
    return {**body, **request.extra}


def from_ollama_reply(data: Any, turn: int) -> ChatMessage:
    """The assistant reply. Ollama may omit call ids; ours are unique per conversation turn."""
    try:
        message = data["message"]
        calls = []
        for index, call in enumerate(message.get("tool_calls") or ()):
            name = call["function"]["name"]
            arguments = call["function"].get("arguments") or {}
            call_id = call.get("id") or f"call_{turn}_{index}"
            if isinstance(arguments, dict):
                calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
            else:  # some models' arguments arrive as JSON text, or not as an object at all
                text = arguments if isinstance(arguments, str) else json.dumps(arguments)
                calls.append(ToolCall.from_json_text(call_id, name, text))
        usage = TokenUsage(
            input_tokens=data.get("prompt_eval_count", 0), output_tokens=data.get("eval_count", 0)
        )
        content = message.get("content") or ""
        return ChatMessage(role="assistant", content=content, tool_calls=calls, usage=usage)
    except UNREADABLE_REPLY as exc:
        raise unreadable_reply("an /api/chat reply", exc, data) from None


def _error_body(response: httpx.Response) -> Any:
    try:
        return read_json(response.content)
    except ValueError:
        return response.text


async def post_json(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> Any:
    """One attempt: POST ``body`` to an Ollama API ``path``; the reply's JSON, or an
    :class:`AttemptFailure`."""
    try:
        # Reads the whole body, so a body cut short fails here, as a transport error.
        response = await client.post(path, json=body)
    except httpx.TransportError as exc:
        raise AttemptFailure.transport("request failed", exc) from None
    if response.status_code >= 400:
        raise status_failure(
            response.status_code,
            response.headers,
            _error_body(response),
            target=request_target(response),
        )
    try:
        return read_json(response.content)
    except ValueError as exc:  # not JSON, or JSON nested too deeply
        raise AttemptFailure.malformed(f"{type(exc).__name__}: {exc}") from None


def ollama_client(endpoint: HttpEndpoint) -> httpx.AsyncClient:
    """A client of an Ollama server; a key is only sent when configured (Ollama behind an
    authenticating proxy)."""
    headers = {"Authorization": f"Bearer {endpoint.secret()}"} if endpoint.api_key else {}
    return httpx.AsyncClient(
        base_url=endpoint.url,
        headers=headers,
        timeout=endpoint.timeout_seconds,
        event_hooks=endpoint.response_hooks(httpx.AsyncByteStream),
    )


class OllamaChatModelConnection(HttpChatModelConnection):
    """An Ollama server's native chat API. ``base_url`` is the host, e.g. http://127.0.0.1:11434."""

    provider: ClassVar[str] = "ollama"
    default_base_url: ClassVar[str] = "http://127.0.0.1:11434"
    api_key_hint: ClassVar[str] = "OLLAMA_API_KEY"
    native_schema: ClassVar[bool] = True
    # A self-hosted Ollama lets ``format`` win over tools: the model answers the schema and
    # never calls a tool. With tools, ``auto`` asks by the prompt instead.
    native_schema_with_tools: ClassVar[bool] = False

    def _make_client(self) -> httpx.AsyncClient:
        return ollama_client(self)

    def unsupported_tool_settings(
        self, tool_choice: str | None, parallel_tool_calls: bool | None
    ) -> str | None:
        # /api/chat has neither field: the model always decides, and may call several tools.
        if tool_choice not in (None, "auto"):
            return (
                f"Ollama's /api/chat has no tool_choice (the model always decides), so "
                f"{tool_choice!r} cannot be honoured; leave it unset or 'auto'"
            )
        if parallel_tool_calls is False:
            return "Ollama's /api/chat cannot turn parallel tool calls off; leave it unset"
        return None

    async def _attempt(
        self, client: httpx.AsyncClient, request: ChatRequest, model: str
    ) -> ChatMessage:
        data = await post_json(client, "/api/chat", ollama_body(request, model))
        turn = sum(1 for m in request.messages if m.role == "assistant")
        return from_ollama_reply(data, turn)
