"""What the three HTTP providers share: configuration, credentials, retries and usage counters.

A provider subclasses :class:`HttpChatModelConnection` and implements two things: building its
client (:meth:`~HttpChatModelConnection._make_client`) and one attempt of a call
(:meth:`~HttpChatModelConnection._attempt`), which converts the request to the provider's wire
format, sends it, and converts the reply back, raising
:class:`~flink_agents.providers._http_errors.AttemptFailure` on failure.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import Field, PrivateAttr, SecretStr, field_validator

from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage
from flink_agents.api.chat_models import ChatModelConnection
from flink_agents.api.resources import resolve_env_references
from flink_agents.providers._http_errors import AttemptFailure, CallLabel, ModelCallError
from flink_agents.providers._retry import RetryPolicy, call_with_retries


class MissingCredentialError(ValueError):
    """A connection that needs an API key was opened without one."""


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


class HttpChatModelConnection(ChatModelConnection):
    """Base of connections that talk to a model server over HTTP."""

    provider: ClassVar[str]
    default_base_url: ClassVar[str]
    requires_api_key: ClassVar[bool] = False
    api_key_hint: ClassVar[str] = "API_KEY"

    base_url: str | None = Field(default=None, description="Server URL; the provider's default.")
    api_key: SecretStr | None = Field(
        default=None,
        exclude=True,
        repr=False,
        description='An environment reference such as {"env": "NAME"}; never a literal in a plan.',
    )
    model: str | None = Field(default=None, description="Model used when a request names none.")
    timeout_seconds: float = Field(default=60.0, gt=0, description="Per attempt.")
    retry: RetryPolicy = Field(default_factory=RetryPolicy)

    _ordinals: itertools.count[int] = PrivateAttr(default_factory=lambda: itertools.count(1))
    _client_loop: tuple[asyncio.AbstractEventLoop, Any] | None = PrivateAttr(default=None)
    _stats: UsageStats = PrivateAttr(default_factory=UsageStats)

    @field_validator("api_key", mode="before")
    @classmethod
    def _resolve_reference(cls, value: Any) -> Any:
        # The plan runtime resolves references before validation; this covers direct Python use.
        return resolve_env_references(value)

    @property
    def url(self) -> str:
        return (self.base_url or self.default_base_url).rstrip("/")

    @property
    def stats(self) -> UsageStats:
        """Calls, attempts and tokens of this connection so far."""
        return self._stats

    def open(self) -> None:
        """Fail now, not at the first record, when a required credential is missing."""
        if self.requires_api_key and self.api_key is None:
            raise MissingCredentialError(
                f"{self.provider} connection needs api_key: give it as an environment reference, "
                f'e.g. {{"env": "{self.api_key_hint}"}}, and set that variable'
            )

    def secret(self) -> str:
        """The API key (for the client only; never log it)."""
        return self.api_key.get_secret_value() if self.api_key is not None else ""

    async def chat(self, request: ChatRequest) -> ChatMessage:
        model = request.model or self.model
        label = CallLabel(self.provider, model or "<none>", next(self._ordinals))
        if model is None:
            reason = "no model named by the request or the connection"
            raise ModelCallError(label, reason, attempts=0)
        self._stats.calls += 1
        try:
            reply = await call_with_retries(
                lambda: self._counted_attempt(request, model), self.retry, label, self.call_slot
            )
        except ModelCallError:
            self._stats.failed_calls += 1
            raise
        self._stats.add(reply.usage)
        return reply

    async def _counted_attempt(self, request: ChatRequest, model: str) -> ChatMessage:
        self._stats.attempts += 1
        return await self._attempt(self._client(), request, model)

    def _client(self) -> Any:
        # Async HTTP clients belong to the event loop that created them. The loop itself is kept
        # (not its id, which a later loop may reuse).
        loop = asyncio.get_running_loop()
        if self._client_loop is None or self._client_loop[0] is not loop:
            self._client_loop = (loop, self._make_client())
        return self._client_loop[1]

    def _make_client(self) -> Any:
        raise NotImplementedError

    async def _attempt(self, client: Any, request: ChatRequest, model: str) -> ChatMessage:
        raise NotImplementedError


def parse_arguments(text: str | None, tool: str) -> dict[str, Any]:
    """Tool-call arguments sent as a JSON string, as a dict."""
    try:
        arguments = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        detail = f"arguments of tool call {tool!r} are not JSON: {exc}"
        raise AttemptFailure.malformed(detail) from None
    if not isinstance(arguments, dict):
        raise AttemptFailure.malformed(f"arguments of tool call {tool!r} are not a JSON object")
    return arguments


def tool_names(messages: list[ChatMessage]) -> dict[str, str]:
    """Tool name of every tool call id in the conversation (some protocols want both)."""
    return {call.id: call.name for m in messages for call in m.tool_calls}


def schema_name(schema: dict[str, Any]) -> str:
    """A protocol-safe name for a response schema."""
    title = str(schema.get("title") or "response")
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in title)[:64]
