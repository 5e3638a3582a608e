"""OpenAI Responses API (``POST {base_url}/responses``), used statelessly.

Every call sends the whole conversation as ``input`` items with ``store: false`` and no
``previous_response_id``. A request then depends on nothing but what this process sends, so a
call recorded by the durable layer and replayed after a restart is the same request, and a
conversation never points at server-side state that may have expired or was never stored.
Because nothing is stored, items of earlier replies are sent back by content, never by their
server ids (the API refuses ids of items it did not store).

The protocol differs from chat completions in the shape of everything: leading system messages
become ``instructions``; tool calls are ``function_call`` items and tool results
``function_call_output`` items, matched by ``call_id``; function tools are flat
(``{type: function, name, parameters}``); the reply is an ``output`` list of ``message`` and
``function_call`` items; usage counts ``input_tokens``/``output_tokens``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage, ToolCall, ToolSpec
from flink_agents.api.chat_models import TOOL_CHOICE_MODES
from flink_agents.providers._connection import HttpChatModelConnection, schema_name
from flink_agents.providers._http_errors import (
    UNREADABLE_REPLY,
    AttemptFailure,
    sdk_call,
    unreadable_reply,
)
from flink_agents.providers._sdk import sdk_from_extra
from flink_agents.providers.openai_compatible import openai_client, wire_arguments

with sdk_from_extra("openai"):
    import openai


_RETRYABLE_CODES = ("server_error", "rate_limit_exceeded")

_STATEFUL_FIELDS = ("previous_response_id", "conversation", "store", "background")
"""Fields of the API that would make a call depend on server-side state (or leave it there)."""


def _items(message: ChatMessage) -> list[dict[str, Any]]:
    """One message as input items (an assistant turn with tool calls is several)."""
    if message.role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": message.content,
            }
        ]
    items: list[dict[str, Any]] = []
    if message.content or not message.tool_calls:
        items.append({"type": "message", "role": message.role, "content": message.content})
    items += [
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": wire_arguments(call),
        }
        for call in message.tool_calls
    ]
    return items


def to_responses_input(messages: list[ChatMessage]) -> tuple[str | None, list[dict[str, Any]]]:
    """``instructions`` (the leading system messages) and the ``input`` items of the rest; a
    system message later in the conversation stays an input item where it is."""
    leading = 0
    while leading < len(messages) and messages[leading].role == "system":
        leading += 1
    instructions = "\n\n".join(m.content for m in messages[:leading] if m.content) or None
    return instructions, [item for m in messages[leading:] for item in _items(m)]


def to_responses_tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool spec as a flat Responses function tool.

    ``strict`` is sent as false: the API defaults it to true, which refuses any parameters
    schema that does not close every object (``additionalProperties: false``) and require every
    property, as most tool schemas do not.
    """
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.parameters,
        "strict": False,
    }


def responses_body(request: ChatRequest, model: str) -> dict[str, Any]:
    """The request body of a stateless Responses call (without ``extra``)."""
    instructions, items = to_responses_input(request.messages)
    body: dict[str, Any] = {"model": model, "input": items, "store": False}
    if instructions is not None:
        body["instructions"] = instructions
    if request.tools:  # the tool settings only go with tools, as in chat completions
        body["tools"] = [to_responses_tool(t) for t in request.tools]
        choice = request.tool_choice
        if choice is not None:  # unset: the API's default, auto
            named = {"type": "function", "name": choice}
            body["tool_choice"] = choice if choice in TOOL_CHOICE_MODES else named
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.response_schema is not None:
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": schema_name(request.response_schema),
                "schema": request.response_schema,
            }
        }
    return body


def from_response(response: Any) -> ChatMessage:
    """The assistant reply of a Responses ``response`` object.

    Text is the ``output_text`` (or ``refusal``) parts of ``message`` items; ``function_call``
    items become tool calls under their ``call_id`` (what a ``function_call_output`` answers).
    Other items (reasoning, hosted tools) are not part of the chat and are left out.
    """
    try:
        if response.status == "failed":
            raise _failed(response.error)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for item in response.output:
            if item.type == "message":
                texts += [
                    part.text if part.type == "output_text" else part.refusal
                    for part in item.content
                    if part.type in ("output_text", "refusal")
                ]
            elif item.type == "function_call":
                calls.append(ToolCall.from_json_text(item.call_id, item.name, item.arguments))
        usage = response.usage
        tokens = (
            TokenUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
            if usage is not None
            else None
        )
        return ChatMessage(role="assistant", content="".join(texts), tool_calls=calls, usage=tokens)
    except UNREADABLE_REPLY as exc:
        raise unreadable_reply("a Responses API response", exc, response) from None


def _failed(error: Any) -> AttemptFailure:
    """A response that came back with ``status: failed``: a server-side fault is worth another
    attempt, anything else (an invalid prompt or image) is not."""
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) or "no error given"
    return AttemptFailure(
        f"the response failed ({code}): {message}",
        retryable=code in _RETRYABLE_CODES,
    )


class OpenAIResponsesChatModelConnection(HttpChatModelConnection):
    """The OpenAI Responses API, stateless. ``base_url`` includes the ``/v1`` prefix."""

    provider: ClassVar[str] = "openai-responses"
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    api_key_hint: ClassVar[str] = "OPENAI_API_KEY"
    native_schema: ClassVar[bool] = True  # text.format, beside the tools
    native_schema_with_tools: ClassVar[bool] = True

    async def chat(self, request: ChatRequest) -> ChatMessage:
        stateful = sorted(set(request.extra) & set(_STATEFUL_FIELDS))
        if stateful:
            raise ValueError(
                f"openai-responses connection is stateless: {', '.join(stateful)} in the setup's "
                "extra would make a replayed call depend on server-side state; remove it"
            )
        return await super().chat(request)

    def _make_client(self) -> openai.AsyncOpenAI:
        return openai_client(self)

    async def _attempt(
        self, client: openai.AsyncOpenAI, request: ChatRequest, model: str
    ) -> ChatMessage:
        response = await sdk_call(
            client.responses.create(
                **responses_body(request, model), extra_body=request.extra or None
            ),
            status_error=openai.APIStatusError,
            connection_error=openai.APIConnectionError,
        )
        return from_response(response)
