"""OpenAI-compatible chat completions: OpenAI, vLLM, llama.cpp server, LM Studio, Ollama's
``/v1`` endpoint — any server that speaks ``POST {base_url}/chat/completions``.

Uses the official ``openai`` client with its own retries off (``max_retries=0``): every attempt
must go through :func:`~flink_agents.providers._retry.call_with_retries` so it counts against
the durable call's budget.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal

import httpx
from pydantic import Field

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage, ToolCall, ToolSpec
from flink_agents.api.chat_models import TOOL_CHOICE_MODES
from flink_agents.providers._connection import HttpChatModelConnection, schema_name
from flink_agents.providers._endpoint import HttpEndpoint
from flink_agents.providers._http_errors import (
    UNREADABLE_REPLY,
    AttemptFailure,
    sdk_call,
    unreadable_reply,
)
from flink_agents.providers._response_cap import byte_stream_of
from flink_agents.providers._sdk import sdk_from_extra

with sdk_from_extra("openai"):
    import openai

# Local servers ignore the key, but the client insists on one and would otherwise read
# OPENAI_API_KEY behind our back.
_NO_KEY = "no-key"

ToolCallContent = Literal["empty", "null", "omit"]
"""How an assistant turn that only calls tools carries its (missing) text: ``""``, ``null``
(OpenAI's own form), or no ``content`` field."""


def wire_arguments(call: ToolCall) -> str:
    """A call's arguments as JSON text; arguments that were not a JSON object go back as the
    model sent them (the model was told so)."""
    if call.unparsed_arguments is not None:
        return call.unparsed_arguments
    return json.dumps(call.arguments)


def to_openai_message(
    message: ChatMessage, tool_call_content: ToolCallContent = "empty"
) -> dict[str, Any]:
    """One message in chat-completions form; ``tool_call_content`` says what a turn that only
    calls tools sends as its content."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        if not message.content:
            if tool_call_content == "omit":
                del wire["content"]
            elif tool_call_content == "null":
                wire["content"] = None
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": wire_arguments(call)},
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


def openai_tool_choice(choice: str | None) -> str | dict[str, Any]:
    """``tool_choice`` on the wire: a mode, or a named function; unset is 'auto', sent
    explicitly because some servers (llama-cpp-python) offer no tool without it."""
    if choice is None:
        return "auto"
    if choice in TOOL_CHOICE_MODES:
        return choice
    return {"type": "function", "function": {"name": choice}}


def openai_body(
    request: ChatRequest, model: str, tool_call_content: ToolCallContent = "empty"
) -> dict[str, Any]:
    """The request body of a chat-completions call (without ``extra``)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [to_openai_message(m, tool_call_content) for m in request.messages],
    }
    if request.tools:  # the tool settings only go with tools: OpenAI refuses them alone
        body["tools"] = [to_openai_tool(t) for t in request.tools]
        body["tool_choice"] = openai_tool_choice(request.tool_choice)
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
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
            ToolCall.from_json_text(call.id, call.function.name, call.function.arguments)
            for call in message.tool_calls or ()
        ]
        usage = completion.usage
        tokens = (
            TokenUsage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens)
            if usage is not None
            else None
        )
        return ChatMessage(
            role="assistant", content=message.content or "", tool_calls=calls, usage=tokens
        )
    except UNREADABLE_REPLY as exc:
        # The SDK builds its objects from whatever JSON came back, unchecked.
        raise unreadable_reply("a chat completion", exc, completion) from None


def openai_client(endpoint: HttpEndpoint) -> openai.AsyncOpenAI:
    """A client of ``endpoint`` whose own retries are off (ours count against the budget)."""
    return openai.AsyncOpenAI(
        base_url=endpoint.url,
        api_key=endpoint.secret() or _NO_KEY,
        timeout=endpoint.timeout_seconds,
        max_retries=0,
        http_client=openai_http_client(endpoint),
    )


def openai_http_client(endpoint: HttpEndpoint) -> openai.DefaultAsyncHttpxClient:
    """The SDK's own HTTP client (its defaults kept) reading at most ``max_response_bytes``."""
    client_class = openai.DefaultAsyncHttpxClient
    return client_class(event_hooks=endpoint.response_hooks(byte_stream_of(client_class)))


# A version segment (v1, v1beta, ...) in a base URL's path.
_VERSION_SEGMENT = re.compile(r"/v\d")


def missing_version_hint(base_url: str) -> str:
    """What to add to a 404's reason when ``base_url`` has no version in its path: servers
    serve chat completions under ``/v1``, and a base URL without it is the usual mistake. The
    URL is shown without user info or query (no credentials in errors)."""
    url = httpx.URL(base_url)
    if _VERSION_SEGMENT.search(url.path):
        return ""
    port = f":{url.port}" if url.port else ""
    shown = f"{url.scheme}://{url.host}{port}{url.path.rstrip('/')}"
    return f"; base_url {shown!r} has no /v1: OpenAI-compatible servers want it ({shown}/v1)"


class OpenAICompatibleChatModelConnection(HttpChatModelConnection):
    """A chat-completions endpoint. ``base_url`` includes the ``/v1`` prefix."""

    provider: ClassVar[str] = "openai-compatible"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    api_key_hint: ClassVar[str] = "OPENAI_API_KEY"
    native_schema: ClassVar[bool] = True
    native_schema_with_tools: ClassVar[bool] = True  # the model answers in content, or calls

    tool_call_content: ToolCallContent = Field(
        default="empty",
        description="What an assistant turn that only calls tools sends as content: 'empty' "
        "(\"\", accepted by every server tried), 'null' (OpenAI's form; llama-cpp-python, "
        "LM Studio and Ollama's /v1 refuse it) or 'omit' (no field; llama-cpp-python and "
        "Ollama's /v1 refuse it).",
    )

    def _make_client(self) -> openai.AsyncOpenAI:
        return openai_client(self)

    async def _attempt(
        self, client: openai.AsyncOpenAI, request: ChatRequest, model: str
    ) -> ChatMessage:
        body = openai_body(request, model, self.tool_call_content)
        try:
            completion = await sdk_call(
                client.chat.completions.create(**body, extra_body=request.extra or None),
                status_error=openai.APIStatusError,
                connection_error=openai.APIConnectionError,
            )
        except AttemptFailure as failure:
            if failure.status == 404:
                failure.add_hint(missing_version_hint(self.url))
            raise
        return from_openai_completion(completion)
