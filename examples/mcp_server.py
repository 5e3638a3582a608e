"""The MCP server of examples/mcp_agent.py: unit conversions and a system prompt.

Written with the official ``mcp`` SDK; it speaks MCP over stdio when run as a script::

    python examples/mcp_server.py
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("units")

_TO_METRES = {"m": 1.0, "km": 1000.0, "mi": 1609.344, "ft": 0.3048}


@server.tool()
def convert(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a length between m, km, mi and ft.

    Args:
        value: The length to convert.
        from_unit: Its unit.
        to_unit: The unit wanted.
    """
    for unit in (from_unit, to_unit):
        if unit not in _TO_METRES:
            raise ValueError(f"unknown unit {unit!r}; known: {sorted(_TO_METRES)}")
    converted = value * _TO_METRES[from_unit] / _TO_METRES[to_unit]
    return f"{value:g} {from_unit} = {converted:.2f} {to_unit}"


@server.prompt()
def assistant(style: str) -> str:
    """The system prompt of a unit-conversion assistant."""
    return f"You convert units with the convert tool. Answer in a {style} style."


if __name__ == "__main__":
    server.run("stdio")
