"""Google Gemini, its native API (``POST {base_url}/{api_version}/models/{model}:generateContent``).

Uses the official ``google-genai`` client over an ``httpx`` client of ours, with the SDK's own
retries off (one attempt): every attempt goes through
:func:`~flink_agents.providers._retry.call_with_retries` so it counts against the durable call's
budget, and transport errors stay ``httpx``'s whether or not ``aiohttp`` is installed. The key
travels in the ``x-goog-api-key`` header, never in the URL.

The protocol differs from chat completions in these ways, handled here: the assistant role is
``model``; system prompts are ``systemInstruction``; tool calls and results are ``functionCall``
and ``functionResponse`` parts, results matched by tool name (ids only when the server issued
them); structured output is ``responseMimeType: application/json`` with ``responseJsonSchema``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable
from typing import Any, ClassVar, TypeVar

import httpx
from pydantic import Field

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage, ToolCall, ToolSpec
from flink_agents.providers._connection import HttpChatModelConnection, tool_names
from flink_agents.providers._http_errors import AttemptFailure, _body_message, what_was_sent
from flink_agents.providers._sdk import sdk_from_extra

with sdk_from_extra("google.genai", "flink-agents-py[gemini]"):
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types

T = TypeVar("T")

# Gemini 3 refuses a replayed function call without the thought signature it came with
# (HTTP 400). ToolCall has no slot to carry the real one through the durable record, so every
# replayed call carries the sentinel Google documents for histories without signatures.
_NO_SIGNATURE = b"skip_thought_signature_validator"

_LOCAL_ID = re.compile(r"gemini_call_\d+_\d+")
"""Ids made here for calls the server sent without one; never sent back (older API versions
refuse an ``id`` they did not issue)."""

_CHOICE_MODES = {
    "auto": types.FunctionCallingConfigMode.AUTO,
    "required": types.FunctionCallingConfigMode.ANY,
    "none": types.FunctionCallingConfigMode.NONE,
}

# Finish reasons of a candidate that still holds a usable answer.
_ANSWERED = {None, "STOP", "MAX_TOKENS", "FINISH_REASON_UNSPECIFIED"}


def _local_id(turn: int, index: int) -> str:
    return f"gemini_call_{turn}_{index}"


def _server_id(call_id: str | None) -> str | None:
    return None if call_id is None or _LOCAL_ID.fullmatch(call_id) else call_id


def _parts(message: ChatMessage, names: dict[str, str]) -> list[types.Part]:
    if message.role == "tool":
        call_id = message.tool_call_id or ""
        if call_id not in names:
            raise ValueError(f"tool result {call_id!r} answers no tool call of the conversation")
        return [
            types.Part(
                function_response=types.FunctionResponse(
                    id=_server_id(call_id),
                    name=names[call_id],
                    response={"output": message.content},
                )
            )
        ]
    parts = [types.Part(text=message.content)] if message.content else []  # no empty parts
    parts += [
        types.Part(
            function_call=types.FunctionCall(
                id=_server_id(call.id), name=call.name, args=call.arguments
            ),
            thought_signature=_NO_SIGNATURE,
        )
        for call in message.tool_calls
    ]
    return parts


def to_gemini_contents(messages: list[ChatMessage]) -> tuple[str, list[types.Content]]:
    """The system instruction and the user/model turns; tool results go in a user turn, and
    consecutive turns of one role are merged (all results of a step answer it together)."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    names = tool_names(messages)
    contents: list[types.Content] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "model" if message.role == "assistant" else "user"
        parts = _parts(message, names)
        if contents and contents[-1].role == role:
            contents[-1].parts = [*(contents[-1].parts or []), *parts]
        else:
            contents.append(types.Content(role=role, parts=parts))
    return system, contents


def to_gemini_tool(spec: ToolSpec) -> types.FunctionDeclaration:
    """A tool spec as a function declaration; its JSON schema is sent as it is
    (``parametersJsonSchema``), not narrowed to the OpenAPI subset of ``parameters``."""
    return types.FunctionDeclaration(
        name=spec.name, description=spec.description, parameters_json_schema=spec.parameters
    )


def tool_config(choice: str) -> types.ToolConfig:
    """``toolConfig`` for a tool choice: auto, required, none, or the name of one tool."""
    mode = _CHOICE_MODES.get(choice)
    config = (
        types.FunctionCallingConfig(mode=mode)
        if mode is not None
        else types.FunctionCallingConfig(
            mode=types.FunctionCallingConfigMode.ANY, allowed_function_names=[choice]
        )
    )
    return types.ToolConfig(function_calling_config=config)


def gemini_request(
    request: ChatRequest, tool_choice: str | None, json_mode_with_tools: bool = False
) -> tuple[list[types.Content], types.GenerateContentConfig]:
    """The contents and the rest of a ``generateContent`` body; ``extra`` is merged into the
    body as it is. A response schema is sent (JSON mode) unless tools are offered too and
    ``json_mode_with_tools`` is off: Gemini 2.x refuses the two together (HTTP 400)."""
    try:
        system, contents = to_gemini_contents(request.messages)
    except ValueError as exc:
        raise AttemptFailure(str(exc), retryable=False) from None
    config = types.GenerateContentConfig(
        system_instruction=system or None,
        temperature=request.temperature,
        max_output_tokens=request.max_tokens,
    )
    if request.tools:
        config.tools = [
            types.Tool(function_declarations=[to_gemini_tool(t) for t in request.tools])
        ]
        if tool_choice is not None:
            config.tool_config = tool_config(tool_choice)
    if request.response_schema is not None and (json_mode_with_tools or not request.tools):
        config.response_mime_type = "application/json"
        config.response_json_schema = request.response_schema
    if request.extra:
        config.http_options = types.HttpOptions(extra_body=request.extra)
    return contents, config


def _usage(metadata: Any) -> TokenUsage | None:
    if metadata is None:
        return None
    # Thinking tokens are billed as output.
    output = (metadata.candidates_token_count or 0) + (metadata.thoughts_token_count or 0)
    return TokenUsage(input_tokens=metadata.prompt_token_count or 0, output_tokens=output)


def from_gemini_response(response: types.GenerateContentResponse, turn: int) -> ChatMessage:
    """The first candidate's answer; thought parts are left out, calls without an id get one
    unique within the conversation."""
    if not response.candidates:
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            why = f" ({feedback.block_reason_message})" if feedback.block_reason_message else ""
            raise AttemptFailure(
                f"the prompt was blocked: {feedback.block_reason.value}{why}", retryable=False
            )
        sent = response.model_dump(mode="json", exclude_none=True, exclude={"sdk_http_response"})
        raise AttemptFailure.malformed(f"no candidates; the server sent {what_was_sent(sent)}")
    candidate = response.candidates[0]
    parts = (candidate.content.parts if candidate.content else None) or []
    reason = candidate.finish_reason.value if candidate.finish_reason else None
    if not parts and reason not in _ANSWERED:
        raise AttemptFailure(f"no answer: the model stopped with {reason}", retryable=False)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for part in parts:
        if part.function_call is not None:
            call = part.function_call
            if not call.name:
                raise AttemptFailure.malformed(f"a function call without a name: {call.args}")
            call_id = call.id or _local_id(turn, len(calls))
            calls.append(ToolCall(id=call_id, name=call.name, arguments=call.args or {}))
        elif part.text and not part.thought:
            texts.append(part.text)
    return ChatMessage(
        role="assistant",
        content="".join(texts),
        tool_calls=calls,
        usage=_usage(response.usage_metadata),
    )


def _retry_delay(details: Any) -> float | None:
    """The wait a Gemini 429 asks for: a ``google.rpc.RetryInfo`` detail (``"retryDelay":
    "7s"``) in the error body, where other servers send a ``Retry-After`` header."""
    error = details.get("error") if isinstance(details, dict) else None
    items = error.get("details") if isinstance(error, dict) else None
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            try:
                return max(0.0, float(str(item.get("retryDelay", "")).removesuffix("s")))
            except ValueError:
                return None
    return None


def _api_failure(error: genai_errors.APIError) -> AttemptFailure:
    headers = getattr(error.response, "headers", None) or {}
    message = error.message or _body_message(error.details)
    if error.status:
        message = f"{error.status}: {message}" if message else str(error.status)
    failure = AttemptFailure.from_status(error.code, headers, message)
    if failure.retry_after is None:
        failure.retry_after = _retry_delay(error.details)
    return failure


async def gemini_call(call: Awaitable[T]) -> T:
    """Await an SDK call, turning its errors into :class:`AttemptFailure`."""
    try:
        return await call
    except genai_errors.APIError as exc:
        raise _api_failure(exc) from None
    except httpx.TransportError as exc:
        raise AttemptFailure.transport("request failed", exc) from None
    except json.JSONDecodeError as exc:
        raise AttemptFailure.malformed(f"the server sent {what_was_sent(exc.doc)}") from None


class GeminiChatModelConnection(HttpChatModelConnection):
    """The Gemini API. ``base_url`` is the host, without the API version."""

    provider: ClassVar[str] = "gemini"
    default_base_url: ClassVar[str] = "https://generativelanguage.googleapis.com"
    requires_api_key: ClassVar[bool] = True
    # JSON mode with a response schema; Gemini 2.x refuses it beside tools (json_mode_with_tools).
    native_schema: ClassVar[bool] = True
    native_schema_with_tools: ClassVar[bool] = False
    api_key_hint: ClassVar[str] = "GEMINI_API_KEY"

    api_version: str = Field(default="v1beta", description="Path segment before /models.")
    tool_choice: str | None = Field(
        default=None,
        min_length=1,
        description='"auto", "required", "none", or a tool name to force; the server default '
        "(auto) when unset.",
    )

    json_mode_with_tools: bool = Field(
        default=False,
        description="Send a response schema (JSON mode) together with tools: Gemini 3 accepts "
        "it, Gemini 2.x refuses it; off, a request offering tools is sent without the schema.",
    )

    def unsupported_tool_settings(
        self, tool_choice: str | None, parallel_tool_calls: bool | None
    ) -> str | None:
        if parallel_tool_calls is False:
            return "the Gemini API cannot turn parallel function calls off; leave it unset"
        return None

    def _make_client(self) -> genai.Client:
        timeout_ms = int(self.timeout_seconds * 1000)
        return genai.Client(
            api_key=self.secret(),
            vertexai=False,
            http_options=types.HttpOptions(
                base_url=self.url,
                api_version=self.api_version,
                timeout=timeout_ms,
                retry_options=types.HttpRetryOptions(attempts=1),
                httpx_async_client=httpx.AsyncClient(
                    timeout=self.timeout_seconds,
                    event_hooks=self.response_hooks(httpx.AsyncByteStream),
                ),
            ),
        )

    async def _attempt(self, client: genai.Client, request: ChatRequest, model: str) -> ChatMessage:
        choice = request.tool_choice or self.tool_choice  # the setup's, else the connection's
        contents, config = gemini_request(request, choice, self.json_mode_with_tools)
        response = await gemini_call(
            client.aio.models.generate_content(
                model=model,
                contents=contents,
                config=config,
            )
        )
        turn = sum(1 for m in request.messages if m.role == "assistant")
        return from_gemini_response(response, turn)
