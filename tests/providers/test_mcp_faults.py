"""Every wait on an MCP server is bounded by the connection's timeout and attempt budget.

A stdio server that never answers ``initialize`` (at the first request, and when a server that
died is started again mid-run) and an HTTP endpoint that accepts the connection and never
answers: each fails with ``ModelCallError`` once the attempt budget is spent, and no server
process outlives the run. The ``timeout`` marks are guards against a hang, not speed checks.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from flink_agents.providers._http_errors import ModelCallError
from flink_agents.providers.mcp import McpServer, McpTool
from tests.providers import mcp_silent_server

SILENT_SERVER = str(Path(mcp_silent_server.__file__))
TWO_QUICK_ATTEMPTS = {"max_attempts": 2, "initial_backoff_seconds": 0.01, "jitter": 0}


def silent_stdio(pids: Path, *mode: str, timeout: float = 1) -> McpServer:
    transport = {
        "type": "stdio",
        "command": sys.executable,
        "args": [SILENT_SERVER, str(pids), *mode],
    }
    return McpServer(
        namespace="silent", transport=transport, timeout_seconds=timeout, retry=TWO_QUICK_ATTEMPTS
    )


def started(pids: Path, which: str = "") -> list[int]:
    """The server processes started (only the ``serving`` or ``silent`` ones, if given)."""
    lines = pids.read_text().splitlines() if pids.exists() else []
    return [int(line.split()[0]) for line in lines if line.endswith(which)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_all_gone(pids: list[int]) -> None:
    """Each pid has exited (and been reaped: a zombie still answers ``kill(pid, 0)``)."""
    assert pids
    for pid in pids:
        assert not alive(pid), f"server process {pid} outlived the run"


@pytest.mark.timeout(60)
def test_a_stdio_server_that_never_answers_initialize_fails_the_first_request(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    server = silent_stdio(pids)
    with pytest.raises(ModelCallError) as failure:
        server.open()
        server.tools()
    assert failure.value.attempts == 2
    assert "no answer within 1.0s" in failure.value.reason
    assert len(started(pids)) == 2  # one server per attempt, each stopped when it timed out
    assert_all_gone(started(pids))


@pytest.mark.timeout(60)
def test_a_restart_that_never_answers_initialize_fails_the_call_mid_run(tmp_path: Path) -> None:
    pids, silence = tmp_path / "pids", tmp_path / "silence"
    server = silent_stdio(pids, str(silence), timeout=5)  # time for the real server to start
    server.open()
    [pid] = [t for t in server.tools() if isinstance(t, McpTool) and t.server_tool == "pid"]

    async def scenario() -> None:
        serving = int(await pid.call({}))
        silence.touch()  # from now on, a server started is silent
        os.kill(serving, signal.SIGKILL)  # the server dies; the next call starts it again
        with pytest.raises(ModelCallError) as failure:
            await pid.call({})
        assert failure.value.attempts == 2
        assert "no answer within 5.0s" in failure.value.reason
        await server.aclose()

    asyncio.run(scenario())
    # One silent restart per attempt, but for an attempt that found the killed server's
    # session broken before the session noticed the kill.
    assert 1 <= len(started(pids, "silent")) <= 2
    assert_all_gone(started(pids))


class SilentHttpEndpoint:
    """Accepts TCP connections on 127.0.0.1 and reads them, never writing a byte back."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/mcp"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # closed
            self._accepted.append(connection)

    def __enter__(self) -> SilentHttpEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        for connection in self._accepted:
            connection.close()


@pytest.fixture
def silent_endpoint() -> Iterator[SilentHttpEndpoint]:
    with SilentHttpEndpoint() as endpoint:
        yield endpoint


@pytest.mark.timeout(60)
def test_an_http_endpoint_that_never_answers_fails_within_the_budget(
    silent_endpoint: SilentHttpEndpoint,
) -> None:
    server = McpServer(
        namespace="silent",
        transport={"type": "http", "url": silent_endpoint.url},
        timeout_seconds=1,
        retry=TWO_QUICK_ATTEMPTS,
    )
    with pytest.raises(ModelCallError) as failure:
        server.open()
        server.tools()
    assert failure.value.attempts == 2
    assert "no answer within 1.0s" in failure.value.reason or "timed out" in failure.value.reason
    assert asyncio.run(server.aclose()) is None  # nothing left open to hang on
