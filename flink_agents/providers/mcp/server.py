"""An MCP server as a toolset: its tools offered to chat models, called as durable calls.

:class:`McpServer` is a TOOL resource (a :class:`~flink_agents.api.tools.Toolset`). When opened
it lists the server's tools and prompts; a chat model listing it offers each tool (or the
``include`` subset) as ``<namespace>__<tool>``. The tool-call action runs every call as a durable
call (recorded, handed back on replay, never made again once its outcome is recorded) and
:meth:`McpTool.call_with_key` sends the call's idempotency key in the request's ``_meta`` under
:data:`IDEMPOTENCY_KEY_META`, so a server can drop a request sent again after a failover.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import Field, PrivateAttr

from flink_agents.api.chat import ToolSpec
from flink_agents.api.tools import Tool, Toolset
from flink_agents.providers._http_errors import CallLabel
from flink_agents.providers._retry import RetryPolicy, call_with_retries
from flink_agents.providers._sdk import sdk_from_extra
from flink_agents.providers.mcp.connection import (
    MCP_EXTRA,
    McpConnection,
    Transport,
)
from flink_agents.providers.mcp.content import content_text
from flink_agents.providers.mcp.names import NAMESPACE_PATTERN, offered_name

with sdk_from_extra("mcp", MCP_EXTRA):
    from mcp import Client
    from mcp.types import CallToolResult, GetPromptResult, Prompt
    from mcp.types import Tool as ListedTool

T = TypeVar("T")

IDEMPOTENCY_KEY_META = "flink-agents/idempotency-key"
"""The ``_meta`` entry of a ``tools/call`` request that carries the durable call's key."""


class McpToolError(RuntimeError):
    """The tool ran and reported a failure (a result with ``isError``); shown to the model."""


class _ToolCallLabel(CallLabel):
    def __str__(self) -> str:
        return f"{self.provider} call #{self.ordinal} to tool {self.model!r}"


class McpServer(Toolset):
    """The tools (and prompts, see :class:`~flink_agents.providers.mcp.prompt.McpPrompt`) of
    one MCP server."""

    namespace: str = Field(
        pattern=NAMESPACE_PATTERN,
        description="Prefix of the offered tool names (<namespace>__<tool>); unique per server.",
    )
    transport: Transport
    include: list[str] | None = Field(
        default=None, description="Server tool names to offer (default: all the server lists)."
    )
    timeout_seconds: float = Field(
        default=30.0, gt=0, description="Per attempt: connecting, the request and its answer."
    )
    retry: RetryPolicy = Field(default_factory=RetryPolicy)

    _connection: McpConnection = PrivateAttr()
    _tools: list[McpTool] = PrivateAttr(default_factory=list)
    _prompts: dict[str, Prompt] = PrivateAttr(default_factory=dict)
    _ordinals: itertools.count[int] = PrivateAttr(default_factory=lambda: itertools.count(1))

    def open(self) -> None:
        """Resolve the headers or environment, then list the server's tools and prompts.

        An unreachable server, an unset variable or an ``include`` entry the server does not
        list fails here, when the job starts.
        """
        super().open()
        self._connection = McpConnection(self.transport, self.timeout_seconds)
        listed_tools, listed_prompts = self.run_blocking(self._list_all)
        by_name = {tool.name: tool for tool in listed_tools}
        if self.include is not None:
            missing = sorted(set(self.include) - set(by_name))
            if missing:
                raise ValueError(
                    f"MCP server {self.namespace!r} ({self._connection.target}) lists no tool "
                    f"{', '.join(map(repr, missing))}; it lists {sorted(by_name)}"
                )
            listed_tools = [by_name[name] for name in self.include]
        self._tools = [McpTool.listed(self, tool) for tool in listed_tools]
        offered: dict[str, str] = {}
        for tool in self._tools:
            if tool.offered_name in offered:
                raise ValueError(
                    f"MCP server {self.namespace!r}: tools {offered[tool.offered_name]!r} and "
                    f"{tool.server_tool!r} are both offered as {tool.offered_name!r}"
                )
            offered[tool.offered_name] = tool.server_tool
        self._prompts = {prompt.name: prompt for prompt in listed_prompts}

    def tools(self) -> list[Tool]:
        return list(self._tools)

    async def aclose(self) -> None:
        """Close the kept session (a stdio server process exits)."""
        await self._connection.aclose()

    def run_blocking(self, coroutine: Callable[[], Awaitable[T]]) -> T:
        """Run ``coroutine()`` to completion from synchronous code (``open``), on an event loop
        of its own in a thread of its own, so it works whether or not the caller's thread runs
        one; the session it opened is closed before that loop ends."""
        outcome: list[T] = []
        failure: list[BaseException] = []

        async def closing() -> T:
            try:
                return await coroutine()
            finally:
                await self.aclose()

        def run() -> None:
            try:
                outcome.append(asyncio.run(closing()))
            except BaseException as exc:  # handed to the caller's thread as it is
                failure.append(exc)

        worker = threading.Thread(target=run, name="mcp-open", daemon=True)
        worker.start()
        worker.join()
        if failure:
            raise failure[0]
        return outcome[0]

    @property
    def prompts(self) -> dict[str, Prompt]:
        """The prompts the server listed when opened, by name."""
        return dict(self._prompts)

    async def _list_all(self) -> tuple[list[ListedTool], list[Prompt]]:
        async def listing(client: Client) -> tuple[list[ListedTool], list[Prompt]]:
            tools: list[ListedTool] = []
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                if not (cursor := page.next_cursor):
                    break
            prompts: list[Prompt] = []
            if client.server_capabilities.prompts is not None:
                while True:
                    prompt_page = await client.list_prompts(cursor=cursor)
                    prompts.extend(prompt_page.prompts)
                    if not (cursor := prompt_page.next_cursor):
                        break
            return tools, prompts

        return await self._request("list tools and prompts", listing)

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], idempotency_key: str | None
    ) -> CallToolResult:
        """``tools/call``, retried within the durable call's attempt budget."""
        meta = {IDEMPOTENCY_KEY_META: idempotency_key} if idempotency_key else None
        return await self._request(
            f"call tool {tool!r}",
            lambda client: client.call_tool(tool, arguments, meta=meta),  # type: ignore[arg-type]
            tool,
        )

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> GetPromptResult:
        """``prompts/get``, retried like a tool call."""
        return await self._request(
            f"get prompt {name!r}", lambda client: client.get_prompt(name, arguments), name
        )

    async def _request(
        self, what: str, request: Callable[[Client], Awaitable[T]], target: str = "server"
    ) -> T:
        label = _ToolCallLabel("mcp", f"{self.namespace}/{target}", next(self._ordinals))
        return await call_with_retries(
            lambda: self._connection.attempt(what, request), self.retry, label
        )


class McpTool(Tool):
    """One tool of an :class:`McpServer`, as listed by it; built by the server, not declared."""

    server_tool: str = Field(description="The tool's name on the server.")
    offered_name: str
    description: str | None = None
    input_schema: dict[str, Any] = Field(default_factory=dict)

    _server: McpServer = PrivateAttr()

    @classmethod
    def listed(cls, server: McpServer, listed: ListedTool) -> McpTool:
        """The tool ``listed`` of ``server``, under its namespaced name."""
        tool = cls(
            server_tool=listed.name,
            offered_name=offered_name(server.namespace, listed.name),
            description=listed.description,
            input_schema=listed.input_schema,
        )
        tool._server = server
        return tool

    @property
    def implementation(self) -> str:
        return f"mcp:{self.offered_name}"

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.offered_name,
            description=self.description or f"The tool {self.server_tool!r} of an MCP server.",
            parameters=self.input_schema or {"type": "object", "properties": {}},
        )

    async def call(self, arguments: dict[str, Any]) -> str:
        """Call the tool without an idempotency key (outside the tool-call action)."""
        return await self._call(arguments, None)

    async def call_with_key(self, arguments: dict[str, Any], idempotency_key: str) -> str:
        """Call the tool, its ``_meta`` carrying ``idempotency_key``; returns the result text.

        Raises :class:`McpToolError` when the tool reports a failure and
        :class:`~flink_agents.providers._http_errors.ModelCallError` when the server cannot be
        reached, or answers an error, within the attempt budget.
        """
        return await self._call(arguments, idempotency_key)

    async def _call(self, arguments: dict[str, Any], idempotency_key: str | None) -> str:
        result = await self._server.call_tool(self.server_tool, arguments, idempotency_key)
        text = content_text(result.content, result.structured_content)
        if result.is_error:
            raise McpToolError(text or f"tool {self.server_tool!r} failed")
        return text
