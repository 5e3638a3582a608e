"""The MCP provider against real MCP servers written with the SDK (tests/providers/mcp_servers):
one over stdio (a subprocess), one over streamable HTTP on 127.0.0.1.

Listing, namespaced names, calls, a tool's own error, a server gone, a timeout, the idempotency
key in ``_meta`` and how the tools are offered to a chat model.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flink_agents.api.chat import ChatMessage
from flink_agents.api.chat_models import ChatModelSetup
from flink_agents.api.resources import Resource, ResourceType, UnresolvedSecretError
from flink_agents.api.tools import FunctionTool
from flink_agents.providers._http_errors import ModelCallError
from flink_agents.providers.mcp import (
    IDEMPOTENCY_KEY_META,
    PYTHON_COMMAND,
    HttpTransport,
    McpPrompt,
    McpServer,
    McpTool,
    McpToolError,
    offered_name,
)
from flink_agents.providers.mcp.connection import resolved_headers
from tests.providers import mcp_servers
from tests.providers.mcp_servers import HttpServer, invocations

SERVER_SCRIPT = str(Path(mcp_servers.__file__))
QUICK_RETRY = {"max_attempts": 2, "initial_backoff_seconds": 0.01, "jitter": 0}


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the servers log ``record`` invocations (the HTTP one runs in this process)."""
    path = tmp_path / "invocations.jsonl"
    monkeypatch.setenv("MCP_TEST_LOG", str(path))
    return path


@pytest.fixture
def http_server(log: Path) -> Iterator[HttpServer]:
    with HttpServer() as served:
        yield served


def stdio_server(log: Path, **arguments: Any) -> McpServer:
    transport = {
        "type": "stdio",
        "command": sys.executable,
        "args": [SERVER_SCRIPT],
        "env": {"MCP_TEST_LOG": str(log)},
    }
    server = McpServer(namespace="local", transport=transport, **arguments)
    server.open()
    return server


def http(url: str, **arguments: Any) -> McpServer:
    server = McpServer(namespace="remote", transport={"type": "http", "url": url}, **arguments)
    server.open()
    return server


def tool(server: McpServer, name: str) -> McpTool:
    [found] = [t for t in server.tools() if isinstance(t, McpTool) and t.server_tool == name]
    return found


def test_stdio_server_tools_are_listed_under_namespaced_names(log: Path) -> None:
    server = stdio_server(log)
    specs = {t.spec().name: t.spec() for t in server.tools()}
    assert sorted(specs) == [
        "local__add",
        "local__fail",
        "local__pid",
        "local__record",
        "local__slow",
        "local__text_upper",  # '.' is not allowed in OpenAI/Anthropic tool names
    ]
    add = specs["local__add"]
    assert add.description == "Add two integers."
    assert add.parameters["properties"].keys() == {"a", "b"}
    assert add.parameters["required"] == ["a", "b"]
    assert sorted(server.prompts) == ["review"]


def test_stdio_server_calls_return_the_result_text(log: Path) -> None:
    server = stdio_server(log)
    assert asyncio.run(tool(server, "add").call({"a": 2, "b": 3})) == "5"
    assert asyncio.run(tool(server, "text.upper").call_with_key({"text": "mcp"}, "k")) == "MCP"


def _pids_alive(*pids: int) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        alive.append(pid)
    return alive


async def _exited(pid: int) -> bool:
    for _ in range(100):
        if not _pids_alive(pid):
            return True
        await asyncio.sleep(0.1)
    return False


def test_a_stdio_server_serves_calls_on_one_kept_session_until_closed(log: Path) -> None:
    server = stdio_server(log)
    pid = tool(server, "pid")

    async def scenario() -> None:
        first = [int(await pid.call({})) for _ in range(3)]
        assert len(set(first)) == 1  # one server process for all three calls
        together = await asyncio.gather(*(pid.call({}) for _ in range(4)))
        assert {int(p) for p in together} == set(first)  # concurrent calls share it too
        await server.aclose()
        assert await _exited(first[0])  # closing the resource ends the process
        assert int(await pid.call({})) != first[0]  # the next call starts a new one
        await server.aclose()

    asyncio.run(scenario())


def test_a_stdio_server_that_died_is_started_again_within_the_attempt_budget(log: Path) -> None:
    server = stdio_server(log, retry=QUICK_RETRY)
    pid = tool(server, "pid")

    async def scenario() -> None:
        before = int(await pid.call({}))
        os.kill(before, signal.SIGKILL)
        assert await _exited(before)
        after = int(await pid.call({}))
        assert after != before
        await server.aclose()

    asyncio.run(scenario())


def test_the_python_command_runs_the_server_with_the_workers_interpreter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `python` to be found
    transport = {"type": "stdio", "command": PYTHON_COMMAND, "args": [SERVER_SCRIPT]}
    server = McpServer(namespace="local", transport=transport)
    server.open()
    assert asyncio.run(tool(server, "add").call({"a": 2, "b": 3})) == "5"


def test_a_tool_error_result_raises_the_tools_own_failure_without_retrying(
    http_server: HttpServer,
) -> None:
    server = http(http_server.url, retry=QUICK_RETRY)
    with pytest.raises(McpToolError, match="Error executing tool fail"):
        asyncio.run(tool(server, "fail").call({"message": "no such city"}))


def test_include_offers_a_subset_and_an_unknown_name_fails_the_listing(
    http_server: HttpServer,
) -> None:
    server = http(http_server.url, include=["add"])
    assert [t.spec().name for t in server.tools()] == ["remote__add"]
    unknown = http(http_server.url, include=["add", "mul"])  # opening contacts no server
    with pytest.raises(ValueError, match="lists no tool 'mul'"):
        unknown.tools()


def test_the_idempotency_key_travels_in_meta(http_server: HttpServer, log: Path) -> None:
    server = http(http_server.url)
    record = tool(server, "record")
    assert asyncio.run(record.call_with_key({"note": "a"}, "key-1")) == "recorded a"
    asyncio.run(record.call({"note": "b"}))
    assert invocations(log) == [{"key": "key-1", "note": "a"}, {"key": None, "note": "b"}]
    assert mcp_servers.IDEMPOTENCY_KEY_META == IDEMPOTENCY_KEY_META


def test_a_timeout_is_retried_within_the_budget_then_fails(http_server: HttpServer) -> None:
    server = http(http_server.url, timeout_seconds=1, retry=QUICK_RETRY)
    with pytest.raises(ModelCallError) as failure:
        asyncio.run(tool(server, "slow").call({"seconds": 5}))
    assert failure.value.attempts == 2
    assert "no answer within 1.0s" in failure.value.reason
    assert str(failure.value).startswith(
        f"MCP server 'remote' ({http_server.url}): call tool 'slow' (call #"
    )


def test_a_server_gone_fails_the_call_after_the_attempt_budget(http_server: HttpServer) -> None:
    server = http(http_server.url, retry=QUICK_RETRY)
    http_server.stop()
    with pytest.raises(ModelCallError) as failure:
        asyncio.run(tool(server, "add").call({"a": 1, "b": 1}))
    assert failure.value.attempts == 2
    assert "attempt budget of 2 spent" in failure.value.reason


def test_a_server_unreachable_fails_the_listing(http_server: HttpServer) -> None:
    url = http_server.url
    http_server.stop()
    server = http(url, retry={"max_attempts": 1})  # opening contacts no server
    with pytest.raises(ModelCallError, match="list tools and prompts"):
        server.tools()


def test_headers_come_only_from_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    transport = HttpTransport(
        url="http://127.0.0.1:1/mcp",
        header_env={"X-Tenant": "MCP_TENANT"},
        bearer_token_env="MCP_TOKEN",
    )
    environ = {"MCP_TENANT": "acme", "MCP_TOKEN": "s3cret"}
    assert resolved_headers(transport, environ) == {
        "X-Tenant": "acme",
        "Authorization": "Bearer s3cret",
    }
    with pytest.raises(UnresolvedSecretError, match="MCP_TOKEN"):
        resolved_headers(transport, {"MCP_TENANT": "acme"})
    monkeypatch.delenv("MCP_TOKEN", raising=False)
    server = McpServer(namespace="x", transport=transport)
    with pytest.raises(UnresolvedSecretError):
        server.open()  # before any connection is attempted
    assert "s3cret" not in server.model_dump_json()


def test_offered_names_keep_to_the_providers_alphabet_and_length() -> None:
    assert offered_name("gh", "repos/list.all") == "gh__repos_list_all"
    long = offered_name("ns", "x" * 100)
    assert len(long) == 64 and long.startswith("ns__xxx")
    assert long != offered_name("ns", "x" * 101)  # a digest keeps cut names apart


def test_mcp_prompt_is_fetched_with_its_arguments_and_kept_literal(log: Path) -> None:
    server = stdio_server(log)
    prompt = McpPrompt(server="local", prompt="review", arguments={"language": "Rust"})
    prompt.bind(lambda name, kind: server)
    prompt.open()
    assert prompt.format_messages() == [
        ChatMessage(role="user", content="Review this Rust code; keep {braces} as they are.")
    ]
    assert asyncio.run(prompt.render(language="Go"))[0].content.startswith("Review this Go")
    problems = (
        ({}, "missing argument(s) ['language']"),
        ({"language": "C", "x": "1"}, "unknown argument(s) ['x']"),
    )
    for arguments, problem in problems:
        bad = McpPrompt(server="local", prompt="review", arguments=arguments)
        bad.bind(lambda name, kind: server)
        bad.open()  # contacts no server
        with pytest.raises(ValueError, match=re.escape(problem)):
            bad.format_messages()


def echo(text: str) -> str:
    """Echo a text.

    Args:
        text: The text.
    """
    return text


def test_a_chat_model_offers_the_servers_tools_beside_function_tools(
    http_server: HttpServer,
) -> None:
    server = http(http_server.url, include=["add", "text.upper"])
    resources: dict[str, Resource] = {
        "remote": server,
        "echo": FunctionTool(function=f"{__name__}:echo"),
    }
    setup = ChatModelSetup(connection="c", tools=["echo", "remote"])
    setup.bind(lambda name, kind: resources[name])
    setup.open()
    assert [spec.name for spec in setup.request([]).tools] == [
        "echo",
        "remote__add",
        "remote__text_upper",
    ]
    assert setup.offered_tools == {
        "echo": "echo",
        "remote__add": "remote",
        "remote__text_upper": "remote",
    }
    assert setup.tool("remote__add") is tool(server, "add")


def test_two_servers_in_one_namespace_collide_when_listed(http_server: HttpServer) -> None:
    first, second = (http(http_server.url, include=["add"]) for _ in range(2))
    resources = {"one": first, "two": second}
    setup = ChatModelSetup(connection="c", tools=["one", "two"])
    setup.bind(lambda name, kind: resources[name])
    setup.open()  # the servers are listed when the tools are first needed
    with pytest.raises(ValueError, match="'one' and 'two' are both offered as 'remote__add'"):
        setup.request([])
    assert ResourceType.TOOL is McpServer.resource_type
