"""Tools and prompts of Model Context Protocol servers (the optional extra ``mcp``).

See docs/mcp.md. :class:`McpServer` is a TOOL resource offering the server's tools to chat models
as ``<namespace>__<tool>``; :class:`McpPrompt` is a PROMPT resource rendered by the server.
"""

from flink_agents.providers.mcp.connection import (
    MCP_EXTRA,
    PYTHON_COMMAND,
    HttpTransport,
    StdioTransport,
)
from flink_agents.providers.mcp.names import offered_name
from flink_agents.providers.mcp.prompt import McpPrompt
from flink_agents.providers.mcp.server import (
    IDEMPOTENCY_KEY_META,
    McpServer,
    McpTool,
    McpToolError,
    McpToolSettings,
)

__all__ = [
    "IDEMPOTENCY_KEY_META",
    "MCP_EXTRA",
    "PYTHON_COMMAND",
    "HttpTransport",
    "McpPrompt",
    "McpServer",
    "McpTool",
    "McpToolError",
    "McpToolSettings",
    "StdioTransport",
    "offered_name",
]
