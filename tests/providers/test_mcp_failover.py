"""MCP tool calls are durable calls: after a failover, completed calls are handed back from the
action-state store and never sent to the server again; the call in flight is sent again with
the same idempotency key (in ``_meta``), so the server can tell it is a repeat.

The server (tests/providers/mcp_servers, over stdio) logs every invocation with its key. The
engine is thrown away while the second call hangs in the server; a new engine over the store
(with Kafka: a new store restored from the checkpoint's recovery marker) finishes the run.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, ResourceDescriptor, ResourceType
from flink_agents.durable.store import ActionStateStore
from flink_agents.durable.store.store_config import StoreConfig
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.providers.mcp import McpServer
from flink_agents.runtime import KeyState, RunResult, Runtime, run_local
from tests.providers import mcp_servers
from tests.providers.mcp_servers import invocations
from tests.sample_agents import add_scripted_connection

# Round 1 records "first"; round 2 records "second", whose first invocation hangs; then answer.
SCRIPT = [
    {"tool_calls": [{"name": "srv__record", "arguments": {"note": "first"}}]},
    {"tool_calls": [{"name": "srv__record", "arguments": {"note": "second", "hold": True}}]},
    {"content": "done: $last"},
]


def failover_plan(log: Path, script: list[dict[str, Any]] = SCRIPT, **server: Any) -> AgentPlan:
    agent = ReActAgent(
        name="mcp_failover",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="scripted", tools=["srv"]),
        max_tool_rounds=3,
    )
    agent.add_resource(
        "srv",
        ResourceType.TOOL,
        McpServer,
        namespace="srv",
        transport={
            "type": "stdio",
            "command": sys.executable,
            "args": [str(Path(mcp_servers.__file__))],
            "env": {"MCP_TEST_LOG": str(log)},
        },
        **{"timeout_seconds": 30, **server},
    )
    add_scripted_connection(agent, "mcp_failover", script, resource="scripted")
    return compile_agent(agent)


async def crash_while_second_call_hangs(
    plan: AgentPlan, store: ActionStateStore, log: Path
) -> KeyState:
    """Run until the server has received the second call, then throw the engine away;
    returns the key state a checkpoint would hold (the input still pending)."""
    engine = Runtime.build(plan, store=store).engine
    engine.restore_key("k", KeyState())
    engine.submit("k", "go")
    engine.pump()
    for _ in range(600):
        if any(entry["note"] == "second" for entry in invocations(log)):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"the second call never reached the server: {invocations(log)}")
    state = engine.snapshot_key("k")
    await engine.close()
    return state


async def finish(plan: AgentPlan, store: ActionStateStore, state: KeyState) -> RunResult:
    engine = Runtime.build(plan, store=store).engine
    engine.restore_key("k", state)
    try:
        await engine.drain()
        [result] = engine.take_results()
        return result
    finally:
        await engine.close()


def assert_no_completed_call_was_sent_again(log: Path, result: RunResult) -> None:
    entries = invocations(log)
    per_key = Counter(entry["key"] for entry in entries)
    first = [e["key"] for e in entries if e["note"] == "first"]
    second = [e["key"] for e in entries if e["note"] == "second"]
    assert len(first) == 1, "the completed call was sent again"
    assert len(second) == 2 and second[0] == second[1], "the call in flight, resent with its key"
    assert None not in per_key and first[0] != second[0]
    assert result.output_values == ["done: recorded second"]


def test_failover_with_the_memory_store_resends_only_the_call_in_flight(tmp_path: Path) -> None:
    log = tmp_path / "invocations.jsonl"
    plan = failover_plan(log)
    store = StoreConfig().build()

    async def scenario() -> RunResult:
        state = await crash_while_second_call_hangs(plan, store, log)
        return await finish(plan, store, state)

    try:
        result = asyncio.run(scenario())
    finally:
        store.close()
    assert_no_completed_call_was_sent_again(log, result)


@pytest.mark.kafka
def test_failover_with_a_restored_kafka_store_resends_only_the_call_in_flight(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    log = tmp_path / "invocations.jsonl"
    plan = failover_plan(log)
    topic = f"test-mcp-{uuid.uuid4().hex[:12]}"
    config = StoreConfig(kind="kafka", bootstrap_servers=kafka_bootstrap, topic=topic)
    first = config.build()
    marker = first.recovery_marker()  # the checkpoint taken before the input arrived

    async def scenario() -> RunResult:
        state = await crash_while_second_call_hangs(plan, first, log)
        second = config.build()  # a new process: nothing in memory
        try:
            report = second.restore(marker)
            assert report.loaded > 0 and not report.corrupt
            return await finish(plan, second, state)
        finally:
            second.close()

    try:
        result = asyncio.run(scenario())
    finally:
        first.close()
    assert_no_completed_call_was_sent_again(log, result)


NOT_IDEMPOTENT = {"tool_settings": {"record": {"idempotent": False}}}


def test_a_call_of_a_tool_not_idempotent_in_flight_at_a_crash_is_not_sent_again(
    tmp_path: Path,
) -> None:
    log = tmp_path / "invocations.jsonl"
    plan = failover_plan(log, **NOT_IDEMPOTENT)
    store = StoreConfig().build()

    async def scenario() -> RunResult:
        state = await crash_while_second_call_hangs(plan, store, log)
        return await finish(plan, store, state)

    try:
        result = asyncio.run(scenario())
    finally:
        store.close()
    notes = [entry["note"] for entry in invocations(log)]
    assert notes == ["first", "second"]  # the second, in flight at the crash, not sent again
    [answer] = result.output_values
    assert answer.startswith("done: InDoubtCallError: ")
    assert "its in-doubt policy is 'fail', so it is not sent again" in answer


# One call whose reply takes 60 s (the first invocation of a key is held), then the answer.
SLOW_CALL = [
    {"tool_calls": [{"name": "srv__record", "arguments": {"note": "slow", "hold": True}}]},
    {"content": "told: $last"},
]
IN_DOUBT = "its outcome is in doubt (the tool may have acted): it is not idempotent"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("idempotent", "sent", "told"),
    [
        (False, 1, "told: ModelCallError: "),
        (True, 2, "told: recorded slow"),
    ],
    ids=["not-idempotent", "idempotent"],
)
def test_a_slow_reply_of_a_tool_not_idempotent_is_sent_once_and_told_in_doubt(
    tmp_path: Path, idempotent: bool, sent: int, told: str
) -> None:
    log = tmp_path / "invocations.jsonl"
    settings = {"record": {"idempotent": idempotent, "timeout_seconds": 1}}
    retry = {"max_attempts": 3, "initial_backoff_seconds": 0.01, "jitter": 0}
    plan = failover_plan(log, SLOW_CALL, retry=retry, tool_settings=settings)
    [result] = run_local(plan, ["go"], key=lambda _: "k")
    # An idempotent tool is sent again after the timeout (the repeat is answered at once).
    assert [entry["note"] for entry in invocations(log)] == ["slow"] * sent
    [answer] = result.output_values
    assert answer.startswith(told)
    assert (IN_DOUBT in answer) is not idempotent
