"""Anthropic Messages API (``POST {base_url}/v1/messages``).

Uses the official ``anthropic`` client with its own retries off (``max_retries=0``), so every
attempt counts against the durable call's budget. The protocol differs from chat completions in
three ways handled here: system prompts are a top-level field, tool calls and tool results are
content blocks (results travel in a user message), and ``max_tokens`` is required. Structured
output is a call of a tool whose input schema is the response schema: forced when no other tool
is offered, else one of the tools the model must choose from (``tool_choice: any``).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import Field

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage, ToolCall, ToolSpec
from flink_agents.providers._connection import (
    STRUCTURED_TOOL_PREFIX,
    HttpChatModelConnection,
    alternating_turns,
    structured_tool_name,
)
from flink_agents.providers._http_errors import (
    UNREADABLE_REPLY,
    sdk_call,
    unreadable_reply,
)
from flink_agents.providers._response_cap import byte_stream_of
from flink_agents.providers._sdk import sdk_from_extra

with sdk_from_extra("anthropic"):
    import anthropic


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}
        ]
    # The API rejects empty text blocks.
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": message.content}] if message.content else []
    )
    blocks += [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in message.tool_calls
    ]
    return blocks


def to_anthropic_messages(messages: list[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt and the user/assistant turns (consecutive same-role turns merged)."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    return system, alternating_turns(messages, _blocks)


def to_anthropic_tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool spec as an Anthropic tool."""
    return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}


_ANTHROPIC_MODES = {"auto": "auto", "required": "any", "none": "none"}


def anthropic_tool_choice(
    choice: str | None, parallel_tool_calls: bool | None
) -> dict[str, Any] | None:
    """``tool_choice`` in Messages form ('required' is ``any``, a name is ``tool``), with
    ``disable_parallel_tool_use`` when parallel calls are off; None: the API's default."""
    if choice is None and parallel_tool_calls is not False:
        return None
    mode = _ANTHROPIC_MODES.get(choice or "auto")
    wire: dict[str, Any] = {"type": "tool", "name": choice} if mode is None else {"type": mode}
    if parallel_tool_calls is False and wire["type"] != "none":  # "none" takes no such flag
        wire["disable_parallel_tool_use"] = True
    return wire


def anthropic_body(request: ChatRequest, model: str, max_tokens: int) -> dict[str, Any]:
    """The request body of a Messages call (without ``extra``)."""
    system, turns = to_anthropic_messages(request.messages)
    body: dict[str, Any] = {
        "model": model,
        "messages": turns,
        "max_tokens": request.max_tokens or max_tokens,
    }
    if system:
        body["system"] = system
    tools = [to_anthropic_tool(t) for t in request.tools]
    if request.response_schema is not None:
        name = structured_tool_name(request.response_schema)
        # Forcing this tool would keep the model from calling the others: beside them it is
        # one more tool the model must choose from (``any``), its call the final answer.
        body["tool_choice"] = {"type": "any"} if tools else {"type": "tool", "name": name}
        tools.append(
            {
                "name": name,
                "description": "Give the final answer in this structure.",
                "input_schema": request.response_schema,
            }
        )
    elif tools:
        choice = anthropic_tool_choice(request.tool_choice, request.parallel_tool_calls)
        if choice is not None:
            body["tool_choice"] = choice
    if tools:
        body["tools"] = tools
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def from_anthropic_message(message: Any, structured: bool) -> ChatMessage:
    """The assistant reply; with ``structured``, the forced tool's input becomes the content."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    try:
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                if structured and block.name.startswith(STRUCTURED_TOOL_PREFIX):
                    texts = [json.dumps(block.input)]
                    continue
                if not isinstance(block.input, dict):
                    raise TypeError(f"input of tool call {block.name!r} is not an object")
                calls.append(ToolCall(id=block.id, name=block.name, arguments=block.input))
        usage = TokenUsage(
            input_tokens=message.usage.input_tokens, output_tokens=message.usage.output_tokens
        )
        return ChatMessage(role="assistant", content="".join(texts), tool_calls=calls, usage=usage)
    except UNREADABLE_REPLY as exc:
        raise unreadable_reply("a Messages reply", exc, message) from None


class AnthropicChatModelConnection(HttpChatModelConnection):
    """The Anthropic Messages API. ``base_url`` is the host, without ``/v1``."""

    provider: ClassVar[str] = "anthropic"
    default_base_url: ClassVar[str] = "https://api.anthropic.com"
    requires_api_key: ClassVar[bool] = True
    api_key_hint: ClassVar[str] = "ANTHROPIC_API_KEY"
    native_schema: ClassVar[bool] = True
    native_schema_with_tools: ClassVar[bool] = True

    default_max_tokens: int = Field(
        default=1024, ge=1, description="Used when a request sets no max_tokens (required here)."
    )

    def _make_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=self.url,
            api_key=self.secret(),
            timeout=self.timeout_seconds,
            max_retries=0,
            http_client=anthropic.DefaultAsyncHttpxClient(
                event_hooks=self.response_hooks(byte_stream_of(anthropic.DefaultAsyncHttpxClient))
            ),
        )

    async def _attempt(
        self, client: anthropic.AsyncAnthropic, request: ChatRequest, model: str
    ) -> ChatMessage:
        body = anthropic_body(request, model, self.default_max_tokens)
        required = {key: body.pop(key) for key in ("model", "messages", "max_tokens")}
        message = await sdk_call(
            # The SDK's typed parameters vary between releases (temperature is gone from some),
            # so everything beyond the required fields travels as extra body: same JSON on the wire.
            client.messages.create(**required, extra_body={**body, **request.extra}),
            status_error=anthropic.APIStatusError,
            connection_error=anthropic.APIConnectionError,
        )
        return from_anthropic_message(message, structured=request.response_schema is not None)
