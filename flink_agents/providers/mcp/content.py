"""MCP content blocks as the text a model is shown."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel

from flink_agents.providers._sdk import sdk_from_extra
from flink_agents.providers.mcp.connection import MCP_EXTRA

with sdk_from_extra("mcp", MCP_EXTRA):
    from mcp.types import TextContent


def block_text(block: BaseModel) -> str:
    """A text block's text; any other block (image, audio, resource) as a short marker."""
    if isinstance(block, TextContent):
        return block.text
    kind = getattr(block, "type", type(block).__name__)
    mime = getattr(block, "mime_type", None)
    uri = getattr(block, "uri", None) or getattr(getattr(block, "resource", None), "uri", None)
    details = ", ".join(str(part) for part in (mime, uri) if part)
    return f"[{kind}{': ' + details if details else ''}]"


def content_text(blocks: Sequence[BaseModel], structured: object = None) -> str:
    """A tool result's text: its blocks joined by newlines, or its structured content as JSON."""
    if blocks:
        return "\n".join(block_text(block) for block in blocks)
    if structured is not None:
        return json.dumps(structured, sort_keys=True, default=str)
    return ""
