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
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from flink_agents.api.chat import ToolSpec
from flink_agents.api.context import InDoubtPolicy
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
from flink_agents.providers.mcp.names import NAMESPACE_PATTERN, SEPARATOR, offered_name

with sdk_from_extra("mcp", MCP_EXTRA):
    from mcp import Client
    from mcp.types import CallToolResult, GetPromptResult, Prompt
    from mcp.types import Tool as ListedTool

T = TypeVar("T")

IDEMPOTENCY_KEY_META = "flink-agents/idempotency-key"
"""The ``_meta`` entry of a ``tools/call`` request that carries the durable call's key."""


class McpToolError(RuntimeError):
    """The tool ran and reported a failure (a result with ``isError``); shown to the model."""


class McpToolSettings(BaseModel):
    """Settings of one tool of a server, overriding the server's."""

    model_config = ConfigDict(extra="forbid")

    idempotent: bool = Field(
        default=True,
        description="False for a tool with side effects (an insert, a message sent): a call is "
        "sent at most once; one sent and not answered (a timeout, a broken connection) fails as "
        "in doubt, and one in flight at a failover is not sent again (in-doubt policy 'fail'). "
        "The model is told either way.",
    )
    timeout_seconds: float | None = Field(
        default=None, gt=0, description="Per attempt, instead of the server's."
    )
    retry: RetryPolicy | None = Field(default=None, description="Instead of the server's.")


@dataclass(frozen=True)
class _McpCallLabel(CallLabel):
    """Names the server (namespace and command or URL) and the request in a failure's one line,
    e.g. ``MCP server 'units' (npx units-mcp): call tool 'convert' (call #2)``."""

    server: str = ""
    what: str = ""

    def __str__(self) -> str:
        return f"{self.server}: {self.what} (call #{self.ordinal})"


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
    tool_settings: dict[str, McpToolSettings] = Field(
        default_factory=dict,
        description="By the tool's name on the server: idempotent, timeout_seconds, retry.",
    )

    lists_on_demand: ClassVar[bool] = True

    _connection: McpConnection = PrivateAttr()
    _tools: list[McpTool] | None = PrivateAttr(default=None)
    _prompts: dict[str, Prompt] = PrivateAttr(default_factory=dict)
    _ordinals: itertools.count[int] = PrivateAttr(default_factory=lambda: itertools.count(1))

    def open(self) -> None:
        """Resolve the headers or environment (an unset variable fails here); the server is
        not contacted: it is listed when its tools or prompts are first needed."""
        super().open()
        self._connection = McpConnection(self.transport, self.timeout_seconds)
        self._tools = None

    def _listed(self) -> list[McpTool]:
        """The offered tools, listed (with the prompts) on first need.

        An unreachable server or an ``include`` entry the server does not list fails here.
        """
        if self._tools is not None:
            return self._tools
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
        unknown = sorted(set(self.tool_settings) - {tool.name for tool in listed_tools})
        if unknown:
            raise ValueError(
                f"MCP server {self.namespace!r} ({self._connection.target}): tool_settings "
                f"name(s) {', '.join(map(repr, unknown))} that it does not offer; it offers "
                f"{sorted(tool.name for tool in listed_tools)}"
            )
        tools = [McpTool.listed(self, tool) for tool in listed_tools]
        offered: dict[str, str | None] = {}
        for tool in tools:
            if tool.offered_name in offered:
                raise ValueError(
                    f"MCP server {self.namespace!r}: tools {offered[tool.offered_name]!r} and "
                    f"{tool.server_tool!r} are both offered as {tool.offered_name!r}"
                )
            offered[tool.offered_name] = tool.server_tool
        self._prompts = {prompt.name: prompt for prompt in listed_prompts}
        self._tools = tools
        return tools

    def tools(self) -> list[Tool]:
        return list(self._listed())

    def tool_named(self, name: str) -> Tool | None:
        """The tool offered as ``name``: before the listing, one standing for it (listed when
        it is first described or called) if ``name`` is in this server's namespace."""
        if self._tools is not None:
            return next((tool for tool in self._tools if tool.offered_name == name), None)
        if not name.startswith(f"{self.namespace}{SEPARATOR}"):
            return None
        return McpTool.unlisted(self, name)

    def listed_tool(self, offered: str) -> McpTool:
        """The listed tool offered as ``offered`` (the server is listed if it was not)."""
        for tool in self._listed():
            if tool.offered_name == offered:
                return tool
        raise LookupError(
            f"MCP server {self.namespace!r} ({self._connection.target}) offers no tool "
            f"{offered!r}; it offers {sorted(tool.offered_name for tool in self._listed())}"
        )

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
        """The prompts the server listed (on first need, with its tools), by name."""
        self._listed()
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

    def in_doubt(self, offered: str) -> InDoubtPolicy:
        """The in-doubt policy of the tool offered as ``offered`` (known without listing):
        ``fail`` for a tool that is not idempotent."""
        for name, settings in self.tool_settings.items():
            if offered_name(self.namespace, name) == offered and not settings.idempotent:
                return "fail"
        return "resend"

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], idempotency_key: str | None
    ) -> CallToolResult:
        """``tools/call``, retried within the durable call's attempt budget (the tool's
        ``tool_settings`` first): one of a tool that is not idempotent only while it was not
        sent (the server could not be reached)."""
        settings = self.tool_settings.get(tool, McpToolSettings())
        meta = {IDEMPOTENCY_KEY_META: idempotency_key} if idempotency_key else None
        return await self._request(
            f"call tool {tool!r}",
            lambda client: client.call_tool(tool, arguments, meta=meta),  # type: ignore[arg-type]
            tool,
            settings,
        )

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> GetPromptResult:
        """``prompts/get``, retried like a tool call."""
        return await self._request(
            f"get prompt {name!r}", lambda client: client.get_prompt(name, arguments), name
        )

    async def _request(
        self,
        what: str,
        request: Callable[[Client], Awaitable[T]],
        target: str = "server",
        settings: McpToolSettings | None = None,
    ) -> T:
        settings = settings or McpToolSettings()
        label = _McpCallLabel(
            "mcp",
            f"{self.namespace}/{target}",
            next(self._ordinals),
            server=f"MCP server {self.namespace!r} ({self._connection.target})",
            what=what,
        )
        return await call_with_retries(
            lambda: self._connection.attempt(
                request, timeout_seconds=settings.timeout_seconds, resendable=settings.idempotent
            ),
            settings.retry or self.retry,
            label,
        )


class McpTool(Tool):
    """One tool of an :class:`McpServer`, as listed by it; built by the server, not declared.

    One built before the listing (:meth:`McpServer.tool_named`, for a replay that makes no
    call) knows only its offered name: it is described and called as the listed tool of that
    name, the server listed then.
    """

    server_tool: str | None = Field(
        default=None, description="The tool's name on the server (None: not listed yet)."
    )
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

    @classmethod
    def unlisted(cls, server: McpServer, offered: str) -> McpTool:
        """The tool ``server`` offers as ``offered``, before the server is listed."""
        tool = cls(offered_name=offered)
        tool._server = server
        return tool

    def _as_listed(self) -> McpTool:
        return self if self.server_tool is not None else self._server.listed_tool(self.offered_name)

    @property
    def implementation(self) -> str:
        return f"mcp:{self.offered_name}"

    @property
    def in_doubt(self) -> InDoubtPolicy:
        return self._server.in_doubt(self.offered_name)

    def spec(self) -> ToolSpec:
        listed = self._as_listed()
        return ToolSpec(
            name=self.offered_name,
            description=listed.description or f"The tool {listed.server_tool!r} of an MCP server.",
            parameters=listed.input_schema or {"type": "object", "properties": {}},
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
        server_tool = self.server_tool
        if server_tool is None:  # listed here, off this loop (the listing blocks its thread)
            listed = await asyncio.to_thread(self._as_listed)
            server_tool = listed.server_tool
            assert server_tool is not None
        result = await self._server.call_tool(server_tool, arguments, idempotency_key)
        text = content_text(result.content, result.structured_content)
        if result.is_error:
            raise McpToolError(text or f"tool {server_tool!r} failed")
        return text
