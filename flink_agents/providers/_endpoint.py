"""What every HTTP provider resource shares, chat or embeddings: the server's URL, credentials,
the per-attempt timeout, the retry policy, and a client per event loop.

A provider implements :meth:`HttpEndpoint._make_client`; its calls run through
:meth:`HttpEndpoint.call` so every attempt counts against the durable call's budget.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, ClassVar, TypeVar

from pydantic import Field, PrivateAttr, SecretStr, field_validator

from flink_agents.api.embeddings import EmbeddingModelConnection, Vector
from flink_agents.api.resources import Resource, resolve_env_references
from flink_agents.providers._http_errors import CallLabel, ModelCallError
from flink_agents.providers._response_cap import DEFAULT_MAX_RESPONSE_BYTES, response_cap
from flink_agents.providers._retry import RetryPolicy, call_with_retries

T = TypeVar("T")


class MissingCredentialError(ValueError):
    """A connection that needs an API key was opened without one."""


class HttpEndpoint(Resource):
    """Configuration and client of a model server reached over HTTP (a mixin of connections)."""

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
    max_response_bytes: int = Field(
        default=DEFAULT_MAX_RESPONSE_BYTES,
        gt=0,
        description="The most bytes of a response body read; a larger one fails the call "
        "(final, not retried).",
    )

    _ordinals: itertools.count[int] = PrivateAttr(default_factory=lambda: itertools.count(1))
    _client_loop: tuple[asyncio.AbstractEventLoop, Any] | None = PrivateAttr(default=None)

    @field_validator("api_key", mode="before")
    @classmethod
    def _resolve_reference(cls, value: Any) -> Any:
        # The plan runtime resolves references before validation; this covers direct Python use.
        return resolve_env_references(value)

    @property
    def url(self) -> str:
        return (self.base_url or self.default_base_url).rstrip("/")

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

    def call_label(self, model: str | None) -> CallLabel:
        """The label of the next call; fails when neither the request nor ``model`` names one."""
        label = CallLabel(self.provider, model or "<none>", next(self._ordinals))
        if model is None:
            raise ModelCallError(
                label, "no model named by the request or the connection", attempts=0
            )
        return label

    async def call(
        self,
        attempt: Callable[[Any], Awaitable[T]],
        label: CallLabel,
        gate: Callable[[], AbstractAsyncContextManager[Any]] = nullcontext,
    ) -> T:
        """Run ``attempt(client)`` with retries, within the durable call's attempt budget;
        each attempt inside ``gate`` (a connection's concurrency cap)."""
        return await call_with_retries(lambda: attempt(self._client()), self.retry, label, gate)

    def _client(self) -> Any:
        # Async HTTP clients belong to the event loop that created them. The loop itself is kept
        # (not its id, which a later loop may reuse).
        loop = asyncio.get_running_loop()
        if self._client_loop is None or self._client_loop[0] is not loop:
            self._client_loop = (loop, self._make_client())
        return self._client_loop[1]

    def _make_client(self) -> Any:
        raise NotImplementedError

    def response_hooks(self, byte_stream: type[Any]) -> dict[str, list[Any]]:
        """The event hooks a client of this endpoint gets (``max_response_bytes``), for the
        httpx-style library whose ``AsyncByteStream`` is ``byte_stream``."""
        return {"response": [response_cap(self.max_response_bytes, byte_stream)]}


class HttpEmbeddingEndpoint(HttpEndpoint, EmbeddingModelConnection):
    """An embeddings connection over HTTP: a provider implements one attempt,
    :meth:`_embed_attempt`; the model default, labels and retries are shared."""

    async def embed(
        self, texts: list[str], model: str | None, dimensions: int | None
    ) -> list[Vector]:
        model = model or self.model
        label = self.call_label(model)
        assert model is not None  # call_label refused a missing model

        async def attempt(client: Any) -> list[Vector]:
            return await self._embed_attempt(client, texts, model, dimensions)

        return await self.call(attempt, label)

    async def _embed_attempt(
        self, client: Any, texts: list[str], model: str, dimensions: int | None
    ) -> list[Vector]:
        raise NotImplementedError
