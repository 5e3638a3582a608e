"""How to reach an MCP server, and one attempt of a request to it.

A session (spawning the stdio server, or connecting over streamable HTTP) is opened on first use
and kept, one per event loop, for the requests that follow, until :meth:`McpConnection.aclose`
(the engine closes its resources when it stops), its event loop ends, or a transport failure
breaks it (the next attempt opens a new one). Each request runs within ``timeout_seconds``.
Whatever the transport or the session raises becomes an
:class:`~flink_agents.providers._http_errors.AttemptFailure`, so the provider retry loop
(:mod:`flink_agents.providers._retry`) counts it against the durable call's attempt budget.
Header values come from the environment only, by variable name, so no secret is ever written
into a plan, the store or a log.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Literal, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, Field

from flink_agents.api.resources import UnresolvedSecretError, resolve_env_references
from flink_agents.api.secret_values import remember_secret
from flink_agents.providers._http_errors import AttemptFailure
from flink_agents.providers._sdk import sdk_from_extra

MCP_EXTRA = "flink-agents-py[mcp]"
"""The extra (pyproject.toml) that installs the ``mcp`` SDK."""

with sdk_from_extra("mcp", MCP_EXTRA):
    import httpx2
    from mcp import Client, MCPError, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

T = TypeVar("T")

_RETRYABLE_MCP_CODES = frozenset({CONNECTION_CLOSED, REQUEST_TIMEOUT})

PYTHON_COMMAND = "${python}"
"""A stdio ``command`` that stands for the worker's own Python interpreter (``sys.executable``),
so a Python server runs with the job's environment whatever ``python`` is on the ``PATH``."""


class StdioTransport(BaseModel):
    """A server run as a subprocess, spoken to over its stdin and stdout."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["stdio"] = "stdio"
    command: str = Field(
        description=f"The executable, e.g. 'npx'; {PYTHON_COMMAND!r} is the worker's own Python."
    )
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(
        default_factory=dict,
        description='Extra environment of the server; a secret as {"env": "NAME"} or '
        '"${env:NAME}" (resolved when the resource is opened).',
    )
    cwd: str | None = None


class HttpTransport(BaseModel):
    """A server reached over streamable HTTP."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["http"] = "http"
    url: str = Field(description="The MCP endpoint, e.g. https://host/mcp.")
    header_env: dict[str, str] = Field(
        default_factory=dict,
        description="Request headers by the NAME of the environment variable holding the value "
        "(values never appear in a plan).",
    )
    bearer_token_env: str | None = Field(
        default=None,
        description="Environment variable holding a token sent as 'Authorization: Bearer ...'.",
    )


Transport = Annotated[StdioTransport | HttpTransport, Field(discriminator="type")]


def _from_environment(variable: str, environ: Mapping[str, str]) -> str:
    if variable not in environ:
        raise UnresolvedSecretError(f"environment variable {variable!r} is not set")
    remember_secret(environ[variable])  # scrubbed from whatever this process writes
    return environ[variable]


def resolved_headers(
    transport: HttpTransport, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The transport's request headers, read from the environment now."""
    environ = os.environ if environ is None else environ
    headers = {name: _from_environment(var, environ) for name, var in transport.header_env.items()}
    if transport.bearer_token_env is not None:
        headers["Authorization"] = (
            f"Bearer {_from_environment(transport.bearer_token_env, environ)}"
        )
    return headers


class _HeldSession:
    """An open session, entered and left by one background task: the SDK's session is an async
    context whose task groups must be exited by the task that entered them, while requests come
    from many tasks. Closing it is bounded: a session still opening (a server that never answers
    ``initialize``) is cancelled, and the SDK's own exit stops and reaps a stdio server."""

    def __init__(self, opener: Callable[[], AbstractAsyncContextManager[Client]]) -> None:
        self._client: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._cancel = anyio.CancelScope()
        self._task = asyncio.create_task(self._hold(opener))

    async def _hold(self, opener: Callable[[], AbstractAsyncContextManager[Client]]) -> None:
        with self._cancel:
            try:
                async with opener() as client:
                    self._client.set_result(client)
                    await self._closing.wait()
            except Exception as exc:
                if not self._client.done():
                    self._client.set_exception(exc)
        if not self._client.done():  # cancelled while opening
            self._client.set_exception(ConnectionAbortedError("closed while opening"))

    @property
    def opened(self) -> bool:
        """The session was established (whether or not it still is)."""
        return self._client.done() and self._client.exception() is None

    @property
    def usable(self) -> bool:
        """Neither closed nor ended (a server that exited ends its session)."""
        return not (self._closing.is_set() or self._task.done())

    async def client(self) -> Client:
        # Shielded: a request's timeout must not cancel the opening others wait for.
        return await asyncio.shield(self._client)

    async def close(self, within: float) -> None:
        """Leave the session: a session still opening is cancelled at once, an open one gets
        ``within`` seconds to exit politely before it is cancelled too."""
        self._closing.set()
        if not self.opened:
            self._cancel.cancel()
        done, _ = await asyncio.wait({self._task}, timeout=within)
        if not done:
            self._cancel.cancel()  # the SDK's exit still stops the server, shielded and bounded
            await asyncio.wait({self._task})
        if self._client.done() and not self._client.cancelled():
            self._client.exception()  # retrieved: nobody may be waiting for it any more


class McpConnection:
    """Opens and keeps sessions to one server; secrets are resolved once, when it is built."""

    def __init__(self, transport: StdioTransport | HttpTransport, timeout_seconds: float) -> None:
        self._transport = transport
        self._timeout_seconds = timeout_seconds
        # By event loop (kept itself, not its id, which a later loop may reuse).
        self._sessions: dict[asyncio.AbstractEventLoop, _HeldSession] = {}
        if isinstance(transport, HttpTransport):
            self._headers = resolved_headers(transport)
        else:
            self._env = resolve_env_references(transport.env)
            self._command = (
                sys.executable if transport.command == PYTHON_COMMAND else transport.command
            )

    @property
    def target(self) -> str:
        """What the server is, for messages (a URL or a command; never a header or env value)."""
        if isinstance(self._transport, HttpTransport):
            return self._transport.url
        return " ".join([self._command, *self._transport.args])

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[Client]:
        transport = self._transport
        if isinstance(transport, StdioTransport):
            parameters = StdioServerParameters(
                command=self._command, args=transport.args, env=self._env, cwd=transport.cwd
            )
            async with Client(parameters, cache=None) as client:
                yield client
            return
        timeout = httpx2.Timeout(self._timeout_seconds)
        async with (
            httpx2.AsyncClient(headers=self._headers, timeout=timeout) as http,
            Client(streamable_http_client(transport.url, http_client=http), cache=None) as client,
        ):
            yield client

    def _session(self) -> _HeldSession:
        loop = asyncio.get_running_loop()
        for other in [known for known in self._sessions if known.is_closed()]:
            del self._sessions[other]  # its loop ended, and its task with it
        session = self._sessions.get(loop)
        if session is None or not session.usable:
            session = self._sessions[loop] = _HeldSession(self._client)
        return session

    async def aclose(self) -> None:
        """Close the session of the running event loop (a stdio server exits with it)."""
        session = self._sessions.get(asyncio.get_running_loop())
        if session is not None:
            await self._discard(session)

    async def _discard(self, session: _HeldSession) -> None:
        loop = asyncio.get_running_loop()
        if self._sessions.get(loop) is session:
            del self._sessions[loop]
        await session.close(self._timeout_seconds)

    async def attempt(
        self,
        request: Callable[[Client], Awaitable[T]],
        *,
        timeout_seconds: float | None = None,
        resendable: bool = True,
    ) -> T:
        """One attempt: ``request`` on the loop's session (opened if need be, within the
        connection's timeout), within ``timeout_seconds`` (else the connection's timeout).

        Raises :class:`AttemptFailure`: retryable for a transport failure, a closed connection
        or a timeout; final for an error the server answered with (an unknown tool, say). A
        session that failed other than by the server's answer is closed, so the next attempt
        starts on a new one. A request not ``resendable`` (a tool that is not idempotent) that
        failed after it was sent, without an answer, is final: it may have acted, so it must
        not be sent again, and the failure says its outcome is in doubt.
        """
        timeout = self._timeout_seconds  # for the opening; the request's own once sent
        session = self._session()
        sent = False
        try:
            with anyio.fail_after(timeout):
                client = await session.client()
            timeout, sent = timeout_seconds or timeout, True
            with anyio.fail_after(timeout):
                return await request(client)
        except TimeoutError:
            if not session.opened:  # a slow tool leaves the session usable; a stuck start not
                await self._discard(session)
            failure = AttemptFailure(f"no answer within {timeout}s", retryable=True)
        except Exception as exc:
            error = _leaf(exc)
            if not isinstance(error, MCPError) or error.code in _RETRYABLE_MCP_CODES:
                await self._discard(session)  # the connection is gone
            if isinstance(error, MCPError):
                failure = AttemptFailure(
                    _mcp_error_text(error), retryable=error.code in _RETRYABLE_MCP_CODES
                )
            else:
                failure = AttemptFailure.transport("transport failed", error)
        if sent and failure.retryable and not resendable:
            failure = AttemptFailure(f"{failure.reason}; {IN_DOUBT}", retryable=False)
        raise failure


IN_DOUBT = (
    "its outcome is in doubt (the tool may have acted): it is not idempotent, so it is not "
    "sent again"
)
"""What a failed call of a tool that is not idempotent says when it was sent and not answered."""


def _mcp_error_text(error: MCPError) -> str:
    """What an MCP error says; the SDK's own "connection closed" is not the server's answer."""
    if error.code == CONNECTION_CLOSED:
        return (
            f"the connection closed (a stdio server that exited closes it): {error.error.message}"
        )
    return f"the server answered error {error.code}: {error.error.message}"


def _leaf(error: Exception) -> Exception:
    """The first non-group exception inside the task-group exception groups the SDK raises."""
    # Duck-typed: ExceptionGroup is a builtin only from Python 3.11.
    while (inner := getattr(error, "exceptions", None)) and isinstance(inner[0], Exception):
        error = inner[0]
    return error
