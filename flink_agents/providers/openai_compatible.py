"""OpenAI-compatible chat completions: OpenAI, vLLM, llama.cpp server, LM Studio, Ollama's
``/v1`` endpoint — any server that speaks ``POST {base_url}/chat/completions``.

Uses the official ``openai`` client with its own retries off (``max_retries=0``): every attempt
must go through :func:`~flink_agents.providers._retry.call_with_retries` so it counts against
the durable call's budget.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage, ToolCall, ToolSpec
from flink_agents.providers._connection import (
    HttpChatModelConnection,
    parse_arguments,
    schema_name,
)
from flink_agents.providers._endpoint import HttpEndpoint
from flink_agents.providers._http_errors import AttemptFailure, sdk_call, what_was_sent
from flink_agents.providers._sdk import sdk_from_extra

with sdk_from_extra("openai"):
    import openai

# Local servers ignore the key, but the client insists on one and would otherwise read
# OPENAI_API_KEY behind our back.
_NO_KEY = "no-key"


def to_openai_message(message: ChatMessage) -> dict[str, Any]:
    """One message in chat-completions form."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return wire


def to_openai_tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool spec as a chat-completions function tool."""
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def openai_body(request: ChatRequest, model: str) -> dict[str, Any]:
    """The request body of a chat-completions call (without ``extra``)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [to_openai_message(m) for m in request.messages],
    }
    if request.tools:
        body["tools"] = [to_openai_tool(t) for t in request.tools]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.response_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": schema_name(request.response_schema),
                "schema": request.response_schema,
            },
        }
    return body


def from_openai_completion(completion: Any) -> ChatMessage:
    """The assistant reply of a chat completion."""
    try:
        message = completion.choices[0].message
        calls = [
            ToolCall(
                id=call.id,
                name=call.function.name,
                arguments=parse_arguments(call.function.arguments, call.function.name),
            )
            for call in message.tool_calls or ()
        ]
        usage = completion.usage
        tokens = (
            TokenUsage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens)
            if usage is not None
            else None
        )
    except (AttributeError, IndexError, TypeError):
        # The SDK parses whatever JSON (or text) came back; say what it was, not which
        # attribute was missing.
        raise AttemptFailure.malformed(
            f"not a chat completion; the server sent {what_was_sent(completion)}"
        ) from None
    return ChatMessage(
        role="assistant", content=message.content or "", tool_calls=calls, usage=tokens
    )


def openai_client(endpoint: HttpEndpoint) -> openai.AsyncOpenAI:
    """A client of ``endpoint`` whose own retries are off (ours count against the budget)."""
    return openai.AsyncOpenAI(
        base_url=endpoint.url,
        api_key=endpoint.secret() or _NO_KEY,
        timeout=endpoint.timeout_seconds,
        max_retries=0,
    )


class OpenAICompatibleChatModelConnection(HttpChatModelConnection):
    """A chat-completions endpoint. ``base_url`` includes the ``/v1`` prefix."""

    provider: ClassVar[str] = "openai-compatible"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    api_key_hint: ClassVar[str] = "OPENAI_API_KEY"
    native_schema: ClassVar[bool] = True
    native_schema_with_tools: ClassVar[bool] = True  # the model answers in content, or calls

    def _make_client(self) -> openai.AsyncOpenAI:
        return openai_client(self)

    async def _attempt(
        self, client: openai.AsyncOpenAI, request: ChatRequest, model: str
    ) -> ChatMessage:
        completion = await sdk_call(
            client.chat.completions.create(
                **openai_body(request, model), extra_body=request.extra or None
            ),
            status_error=openai.APIStatusError,
            connection_error=openai.APIConnectionError,
        )
        return from_openai_completion(completion)
