"""What the three HTTP providers share: configuration, credentials, retries and usage counters.

A provider subclasses :class:`HttpChatModelConnection` (configuration and client come from
:class:`~flink_agents.providers._endpoint.HttpEndpoint`) and implements two things: building its
client (:meth:`~HttpChatModelConnection._make_client`) and one attempt of a call
(:meth:`~HttpChatModelConnection._attempt`), which converts the request to the provider's wire
format, sends it, and converts the reply back, raising
:class:`~flink_agents.providers._http_errors.AttemptFailure` on failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import PrivateAttr

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage
from flink_agents.api.chat_models import ChatModelConnection
from flink_agents.providers._endpoint import HttpEndpoint, MissingCredentialError
from flink_agents.providers._http_errors import CallLabel, ModelCallError
from flink_agents.providers.retry_loop import AttemptFailure

__all__ = ["HttpChatModelConnection", "MissingCredentialError", "UsageStats"]


@dataclass
class UsageStats:
    """Counters of one connection, for a metrics layer to read."""

    calls: int = 0
    failed_calls: int = 0
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, usage: TokenUsage | None) -> None:
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens


class HttpChatModelConnection(HttpEndpoint, ChatModelConnection):
    """Base of chat connections that talk to a model server over HTTP."""

    _stats: UsageStats = PrivateAttr(default_factory=UsageStats)

    @property
    def stats(self) -> UsageStats:
        """Calls, attempts and tokens of this connection so far."""
        return self._stats

    async def chat(self, request: ChatRequest) -> ChatMessage:
        model = request.model or self.model
        label = self.call_label(model)
        assert model is not None
        self._stats.calls += 1
        try:
            reply = await self.call(
                lambda client: self._counted_attempt(client, request, model),
                label,
                lambda: self.attempt_gate(request),
            )
        except ModelCallError as error:
            self._stats.failed_calls += 1
            if request.response_schema is not None and _refuses_the_schema(error):
                raise _with_schema_hint(error) from error
            raise
        self._stats.add(reply.usage)
        return reply

    async def _counted_attempt(self, client: Any, request: ChatRequest, model: str) -> ChatMessage:
        self._stats.attempts += 1
        try:
            reply = await self._attempt(client, request, model)
        except AttemptFailure as failure:
            if failure.status == 429:
                self.rate_limit_hold(failure.retry_after)
            raise
        self.rate_limit_settle(request, reply.usage)
        return reply

    async def _attempt(self, client: Any, request: ChatRequest, model: str) -> ChatMessage:
        raise NotImplementedError


# What a server that does not take the native schema field says (llama-cpp-python's server:
# 'response_format' ... 'json_schema' in a validation error); the user's fix is a setting.
_SCHEMA_FIELDS = ("response_format", "json_schema")
_SCHEMA_HINT = (
    "; the server refused the JSON-schema field sent for a structured answer: set "
    "structured_output_mode: prompt on the connection or the chat model to ask in the prompt "
    "instead"
)


def _refuses_the_schema(error: ModelCallError) -> bool:
    return error.status is not None and any(field in error.reason for field in _SCHEMA_FIELDS)


def _with_schema_hint(error: ModelCallError) -> ModelCallError:
    """``error`` telling how to do without the native structured-output field."""
    label = CallLabel(error.provider, error.model, error.ordinal)
    return ModelCallError(
        label,
        error.reason + _SCHEMA_HINT,
        attempts=error.attempts,
        status=error.status,
        request_id=error.request_id,
    )


def tool_names(messages: list[ChatMessage]) -> dict[str, str]:
    """Tool name of every tool call id in the conversation (some protocols want both)."""
    return {call.id: call.name for m in messages for call in m.tool_calls}


def alternating_turns(
    messages: list[ChatMessage], blocks: Callable[[ChatMessage], list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The user/assistant turns of ``messages`` as ``{"role", "content": blocks}``, system
    messages left out and consecutive same-role turns merged: Anthropic and Bedrock want them
    alternating, and a step's tool results answer it together."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks(message))
        else:
            turns.append({"role": role, "content": blocks(message)})
    return turns


def schema_name(schema: dict[str, Any]) -> str:
    """A protocol-safe name for a response schema."""
    title = str(schema.get("title") or "response")
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in title)[:64]


STRUCTURED_TOOL_PREFIX = "respond_with_"
"""Protocols without a JSON-schema answer format get structured output as a forced call of a
tool named this plus the schema's name, whose input is the answer."""


def structured_tool_name(schema: dict[str, Any]) -> str:
    """The name of the tool that carries a structured answer following ``schema``."""
    return STRUCTURED_TOOL_PREFIX + schema_name(schema)
