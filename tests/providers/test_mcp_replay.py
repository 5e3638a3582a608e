"""A replay of recorded MCP runs opens no tool server and needs none: ``flink-agents replay``
passes with the server's command pointing at a binary that does not exist, from an export of
the in-memory store and from a real Kafka store topic.

The runs are recorded by ``run_local`` against the real stdio test server
(tests/providers/mcp_servers); every tool call is then served from its record.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor, ResourceType
from flink_agents.cli import main
from flink_agents.durable.calls import DurableCalls
from flink_agents.durable.store import InMemoryActionStateStore, secret_from_env
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.plan import compile_agent
from flink_agents.providers.mcp import McpServer
from flink_agents.replay.recorded import read_store, write_states
from flink_agents.runtime import run_local
from tests.providers import mcp_servers
from tests.sample_agents import add_scripted_connection

AGENT = f"{__name__}:agent"
SCRIPT = [
    {"tool_calls": [{"name": "srv__add", "arguments": {"a": 2, "b": 3}}]},
    {"content": "sum: $last"},
]
INPUTS = [{"id": 1, "q": "add"}, {"id": 2, "q": "add"}]

server_command = sys.executable
"""The stdio server's command in the agent :func:`agent` builds (a test points it elsewhere)."""


class Sum(BaseModel):
    total: int


def agent(output_schema: type[BaseModel] | None = None) -> ReActAgent:
    """An agent calling the test server's ``add`` once, then answering with its result."""
    built = ReActAgent(
        name="mcp_replay",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="scripted", tools=["srv"]),
        prompt=Prompt(text="{q}"),
        max_tool_rounds=2,
        output_schema=output_schema,
    )
    built.add_resource(
        "srv",
        ResourceType.TOOL,
        McpServer,
        namespace="srv",
        transport={
            "type": "stdio",
            "command": server_command,
            "args": [str(Path(mcp_servers.__file__))],
        },
    )
    script = SCRIPT if output_schema is None else [SCRIPT[0], {"content": '{"total": 5}'}]
    add_scripted_connection(built, "mcp_replay", script, resource="scripted")
    return built


def agent_with_output_schema() -> ReActAgent:
    """:func:`agent` answering with a :class:`Sum` (whether the schema is sent natively
    depends on whether the model is offered tools: decided without listing the server)."""
    return agent(Sum)


def record_and_export(recorded_agent: ReActAgent, folder: Path) -> tuple[list[Any], Path]:
    """Run ``INPUTS`` through the agent against the real test server, recording into an
    in-memory store; each run's outputs, and the store exported to a file in ``folder``."""
    store = InMemoryActionStateStore()
    plan = compile_agent(recorded_agent)
    results = run_local(plan, INPUTS, key="id", call_runner=DurableCalls(store, agent=plan.name))
    store.flush()
    exported = folder / "runs.jsonl"
    write_states(read_store(store), exported, secret_from_env())  # as `store export` signs
    return [result.output_values for result in results], exported


def test_a_recorded_mcp_run_replays_with_the_server_binary_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs, recorded = record_and_export(agent(), tmp_path)
    assert outputs == [["sum: 5"], ["sum: 5"]]

    missing = tmp_path / "no-such-mcp-server"
    monkeypatch.setattr(sys.modules[__name__], "server_command", str(missing))
    assert main(["replay", AGENT, "--file", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert out.count(": same outputs (3 calls served from records, 0 made)") == 2
    assert out.endswith("2 runs: 2 same outputs; 0 calls made\n")


@pytest.mark.kafka
def test_a_recorded_mcp_run_replays_from_a_kafka_topic_with_the_server_binary_missing(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    topic = f"test-mcp-replay-{uuid.uuid4().hex[:12]}"
    store = StoreConfig(
        kind="kafka", bootstrap_servers=kafka_bootstrap, topic=topic, partitions=2
    ).build()
    plan = compile_agent(agent())
    try:
        results = run_local(
            plan, INPUTS, key="id", call_runner=DurableCalls(store, agent=plan.name)
        )
        store.flush()
    finally:
        store.close()
    assert [result.output_values for result in results] == [["sum: 5"], ["sum: 5"]]

    monkeypatch.setattr(sys.modules[__name__], "server_command", str(tmp_path / "missing"))
    where = ["--topic", topic, "--bootstrap-servers", kafka_bootstrap]
    assert main(["replay", AGENT, *where]) == 0
    assert capsys.readouterr().out.endswith("2 runs: 2 same outputs; 0 calls made\n")


def test_a_recorded_mcp_run_with_an_output_schema_replays_with_the_server_binary_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs, recorded = record_and_export(agent_with_output_schema(), tmp_path)
    assert outputs == [[{"total": 5}], [{"total": 5}]]

    monkeypatch.setattr(sys.modules[__name__], "server_command", str(tmp_path / "missing"))
    assert main(["replay", f"{__name__}:agent_with_output_schema", "--file", str(recorded)]) == 0
    assert capsys.readouterr().out.endswith("2 runs: 2 same outputs; 0 calls made\n")
