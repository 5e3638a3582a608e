"""What the three HTTP providers share: configuration, credentials, retries and usage counters.

A provider subclasses :class:`HttpChatModelConnection` (configuration and client come from
:class:`~flink_agents.providers._endpoint.HttpEndpoint`) and implements two things: building its
client (:meth:`~HttpChatModelConnection._make_client`) and one attempt of a call
(:meth:`~HttpChatModelConnection._attempt`), which converts the request to the provider's wire
format, sends it, and converts the reply back, raising
:class:`~flink_agents.providers._http_errors.AttemptFailure` on failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import PrivateAttr

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage
from flink_agents.api.chat_models import ChatModelConnection
from flink_agents.providers._endpoint import HttpEndpoint, MissingCredentialError
from flink_agents.providers._http_errors import ModelCallError

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
                self.call_slot,
            )
        except ModelCallError:
            self._stats.failed_calls += 1
            raise
        self._stats.add(reply.usage)
        return reply

    async def _counted_attempt(self, client: Any, request: ChatRequest, model: str) -> ChatMessage:
        self._stats.attempts += 1
        return await self._attempt(client, request, model)

    async def _attempt(self, client: Any, request: ChatRequest, model: str) -> ChatMessage:
        raise NotImplementedError


def tool_names(messages: list[ChatMessage]) -> dict[str, str]:
    """Tool name of every tool call id in the conversation (some protocols want both)."""
    return {call.id: call.name for m in messages for call in m.tool_calls}


def schema_name(schema: dict[str, Any]) -> str:
    """A protocol-safe name for a response schema."""
    title = str(schema.get("title") or "response")
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in title)[:64]
