"""An agent calling an MCP tool, run as a Flink job with the Kafka action-state store, survives a
real failure: every input answered, no completed MCP call made again, outputs as without it.

The MCP server (written with the SDK, below) is served over streamable HTTP on 127.0.0.1 by this
process, so it counts every invocation of its tool by the idempotency key the provider sends in
the request's ``_meta``. The job reads paced inputs, checkpoints every 300 ms and fails once on
purpose (``FailOnce`` of examples/demo.py, a map after the agent) once a checkpoint exists and
some outputs have passed; Flink restores the checkpoint and replays the inputs since then. The
replay must hand the recorded outcomes back: a key may be invoked twice only if its first
invocation was still in flight at the failure (its outcome possibly not recorded yet).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer
from pyflink.common import Encoder, Types
from pyflink.datastream.connectors.file_system import FileSink

from examples.demo import FailOnce, read_outputs
from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor, ResourceType
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.flink import AgentsExecutionEnvironment, OperatorOptions
from flink_agents.providers.mcp import IDEMPOTENCY_KEY_META, McpServer
from flink_agents.providers.scripted import ScriptedChatModelConnection
from flink_agents.runtime import run_local
from tests.flink.conftest import job_spec_settings
from tests.flink.failover_counts import recorded_before
from tests.providers.mcp_servers import HttpServer

pytestmark = [pytest.mark.flink, pytest.mark.kafka]

INPUTS = 30
RECORDS_PER_SECOND = 5  # inputs spread over 6 s: calls end well before the failure
FAIL_AFTER = 15  # outputs before the injected failure
TOOL_SECONDS = 0.3  # so that calls are in flight when the job fails
RESTART_DELAY_S = 0.5


@dataclass
class Invocation:
    """One invocation of the tool as the server saw it (wall-clock times)."""

    key: str | None
    started: float
    ended: float | None = None


class Witness:
    """Every invocation of the server's tool, thread-safe (uvicorn answers in its own thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.invocations: list[Invocation] = []

    def start(self, key: str | None) -> Invocation:
        invocation = Invocation(key, time.time())
        with self._lock:
            self.invocations.append(invocation)
        return invocation

    def clear(self) -> None:
        with self._lock:
            self.invocations.clear()

    def first_per_key(self) -> dict[str | None, Invocation]:
        first: dict[str | None, Invocation] = {}
        for invocation in self.invocations:
            first.setdefault(invocation.key, invocation)
        return first


WITNESS = Witness()
witness_server = MCPServer("failover-witness")


@witness_server.tool()
async def lookup(query: str, ctx: Context) -> str:
    """Facts about ``query`` (takes a moment, like a real lookup)."""
    invocation = WITNESS.start((ctx.request_context.meta or {}).get(IDEMPOTENCY_KEY_META))
    await asyncio.sleep(TOOL_SECONDS)
    invocation.ended = time.time()
    return f"facts about {query}"


def lookup_agent(url: str) -> ReActAgent:
    """Each input: one MCP tool call, then an answer quoting the tool's result."""
    agent = ReActAgent(
        name="mcp_failover_job",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="scripted", tools=["facts"]),
        prompt=Prompt(text="{text}"),
        max_tool_rounds=1,
    )
    agent.add_resource(
        "facts",
        ResourceType.TOOL,
        McpServer,
        namespace="facts",
        transport={"type": "http", "url": url},
        timeout_seconds=20,
    )
    agent.add_resource(
        "scripted",
        ResourceType.CHAT_MODEL_CONNECTION,
        ScriptedChatModelConnection,
        name="mcp_failover_job",
        turns=[
            {"tool_calls": [{"name": "facts__lookup", "arguments": {"query": "$input"}}]},
            {"content": "answer: $last"},
        ],
    )
    return agent


@pytest.fixture
def served() -> Iterator[HttpServer]:
    WITNESS.clear()
    with HttpServer(witness_server) as http:
        yield http
    WITNESS.clear()


def no_fault_outputs(agent: ReActAgent, records: list[dict[str, Any]]) -> dict[Any, Any]:
    """Each key's output without Flink, store or failure (the local runner); the server's
    invocations it caused are forgotten."""
    results = run_local(agent, records, key="k")
    WITNESS.clear()
    return {result.key: result.output_values for result in results}


def test_a_job_failure_reinvokes_no_completed_mcp_call(
    make_flink_env, kafka_bootstrap: str, served: HttpServer, tmp_path: Path
) -> None:
    agent = lookup_agent(served.url)
    records = [{"k": i, "text": f"topic {i}"} for i in range(INPUTS)]
    expected = no_fault_outputs(agent, records)
    assert expected[0] == ["answer: facts about topic 0"]

    checkpoints = tmp_path / "ckpt"
    env = make_flink_env(
        **job_spec_settings(
            checkpoints,
            execution_mode="process",
            accept_slow_process_mode=True,
            checkpointing={"interval_ms": 300},
            restart_strategy={"delay_ms": int(RESTART_DELAY_S * 1000)},
        )
    )
    store = StoreConfig(
        kind="kafka",
        bootstrap_servers=kafka_bootstrap,
        topic=f"test-mcp-failover-{uuid.uuid4().hex[:12]}",
    )
    agents = AgentsExecutionEnvironment(env, options=OperatorOptions(max_in_flight=8), store=store)
    outputs = (
        agents.from_list(records, key="k", records_per_second=RECORDS_PER_SECOND)
        .apply(agent)
        .to_datastream()
    )
    marker = tmp_path / "failure-injected"
    outputs = outputs.map(
        FailOnce(str(marker), FAIL_AFTER, str(checkpoints)), output_type=Types.STRING()
    )
    out_dir = tmp_path / "out"
    outputs.sink_to(FileSink.for_row_format(str(out_dir), Encoder.simple_string_encoder()).build())
    env.execute("mcp-failover")

    assert marker.exists(), "the injected failure did not happen"
    failed_at = float(marker.read_text())

    # Every input answered once, with the no-fault run's output.
    answers = read_outputs(out_dir)
    assert not [line for line in answers if "error" in line], answers
    assert sorted(line["key"] for line in answers) == list(range(INPUTS))
    assert {line["key"]: [line["output"]] for line in answers} == expected

    # The server: every call carried its key; one key per input, at most one repeat each.
    first = WITNESS.first_per_key()
    assert None not in first, "a call without an idempotency key"
    assert len(first) == INPUTS
    times_invoked = {key: 0 for key in first}
    for invocation in WITNESS.invocations:
        times_invoked[invocation.key] += 1
    repeated = {key for key, times in times_invoked.items() if times > 1}
    assert max(times_invoked.values()) <= 2, times_invoked

    def recorded_before_failure(call: Invocation) -> bool:
        return recorded_before(failed_at, call.ended)

    def in_flight_at_failure(call: Invocation) -> bool:
        # Started by the failed attempt (the new one starts after the restart delay) and not
        # certainly recorded when it failed.
        return call.started < failed_at + RESTART_DELAY_S and not recorded_before_failure(call)

    completed = {key for key, call in first.items() if recorded_before_failure(call)}
    in_flight = {key for key, call in first.items() if in_flight_at_failure(call)}
    reinvoked = repeated & completed
    resent_in_flight = repeated - completed
    print(
        f"\n[mcp failover] {len(completed)} calls completed before the failure, "
        f"{len(in_flight)} in flight; re-invoked {len(reinvoked)}, "
        f"in flight sent again {len(resent_in_flight)}"
    )
    assert completed, "no call had completed before the failure: nothing to replay"
    assert len(completed) < INPUTS, "the failure came after every call"
    assert not reinvoked, f"completed MCP calls invoked again: {sorted(map(str, reinvoked))}"
    # Sent again only if in flight at the failure (so never more than were in flight).
    assert resent_in_flight <= in_flight, sorted(map(str, resent_in_flight - in_flight))
