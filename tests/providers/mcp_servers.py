"""A real MCP server, written with the SDK, for the MCP provider tests.

Run over stdio as a subprocess (``python tests/providers/mcp_servers.py``) or served over
streamable HTTP on 127.0.0.1 in a thread of the test (:class:`HttpServer`, ephemeral port).
``record`` appends one JSON line per invocation (its idempotency key and note) to the file named
by ``MCP_TEST_LOG``, so a test counts invocations per key across processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

IDEMPOTENCY_KEY_META = "flink-agents/idempotency-key"  # what the provider sends; pinned here

server = MCPServer("flink-agents-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(name="text.upper")
def upper(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.tool()
def fail(message: str) -> str:
    """Always fails with ``message``."""
    raise ValueError(message)


@server.tool()
async def slow(seconds: float) -> str:
    """Answers after ``seconds``."""
    await asyncio.sleep(seconds)
    return "done"


@server.tool()
def pid() -> int:
    """The server process's id (tells whether calls share one stdio server)."""
    return os.getpid()


def invocations(log: Path) -> list[dict[str, Any]]:
    """The invocations of ``record`` logged in ``log``, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


@server.tool()
async def record(note: str, ctx: Context, hold: bool = False) -> str:
    """Records ``note`` once per call; with ``hold`` its first invocation per key hangs.

    Args:
        note: What to record.
        hold: Hang on the first invocation of this idempotency key (a call in flight when the
            caller dies).
    """
    key = (ctx.request_context.meta or {}).get(IDEMPOTENCY_KEY_META)
    log = Path(os.environ["MCP_TEST_LOG"])
    first = not any(entry["key"] == key for entry in invocations(log)) if key else True
    with log.open("a") as out:
        out.write(json.dumps({"key": key, "note": note}) + "\n")
    if hold and first:
        await asyncio.sleep(60)
    return f"recorded {note}"


@server.prompt()
def review(language: str) -> str:
    """Asks for a code review."""
    return f"Review this {language} code; keep {{braces}} as they are."


class HttpServer:
    """An MCP server (this module's by default) over streamable HTTP on 127.0.0.1, on a free
    port, in a daemon thread."""

    def __init__(self, served: MCPServer = server) -> None:
        self.port = 0  # the port the system picked, once started
        config = uvicorn.Config(
            served.streamable_http_app(), host="127.0.0.1", port=0, log_level="warning"
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def __enter__(self) -> HttpServer:
        self._thread.start()
        for _ in range(200):
            if self._uvicorn.started:
                self.port = self._uvicorn.servers[0].sockets[0].getsockname()[1]
                return self
            self._thread.join(0.05)
        raise RuntimeError("the MCP test server did not start")

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Shut the server down (a test of a server gone calls it early)."""
        self._uvicorn.should_exit = True
        self._thread.join(10)


if __name__ == "__main__":
    server.run("stdio" if len(sys.argv) < 2 else sys.argv[1])  # type: ignore[call-overload]
