"""The names an MCP server's tools are offered under: ``<namespace>__<tool>``.

OpenAI and Anthropic both accept tool names of 1 to 64 characters out of ``[a-zA-Z0-9_-]``; MCP
tool names may also hold ``.`` and ``/``. Other characters become ``_``, and a name too long is
cut and given a digest of the full name so it stays distinct.
"""

from __future__ import annotations

import hashlib
import re

from flink_agents.api.tools import TOOL_NAMESPACE_PATTERN

MAX_TOOL_NAME = 64
NAMESPACE_PATTERN = TOOL_NAMESPACE_PATTERN
SEPARATOR = "__"

_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")
_DIGEST_CHARS = 8


def offered_name(namespace: str, tool: str) -> str:
    """The name a model is offered (and calls) the server tool ``tool`` by."""
    name = f"{namespace}{SEPARATOR}{_NOT_ALLOWED.sub('_', tool)}"
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:_DIGEST_CHARS]
    return f"{name[: MAX_TOOL_NAME - _DIGEST_CHARS - 1]}_{digest}"
