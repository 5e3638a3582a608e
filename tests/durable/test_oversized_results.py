"""A tool's result too large for the store's record is the tool call's FAILED outcome, recorded
and handed back on replay, never a job failing on every restart: through the real store path
(``StoreCallRunner`` over the in-memory store and over Kafka, the ``stores`` fixture), with the
store's default limit, which both enforce alike."""

from __future__ import annotations

import asyncio

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import (
    Agent,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    RunnerContext,
    action,
)
from flink_agents.durable.identity import canonical_json
from flink_agents.durable.store import DEFAULT_MAX_RECORD_BYTES, ActionStateStore, CallStatus
from flink_agents.plan import compile_agent
from flink_agents.testing import Stores, run_live
from tests.durable.helpers import PROBE, crash_then_replay
from tests.sample_agents import RecordingChatConnection, add_scripted_connection

pytestmark = pytest.mark.usefixtures("fresh_probe_and_requests")

RECORDED: list[ActionStateStore] = []


def dump(table: str) -> str:
    """Dump a table.

    Args:
        table: Table name.
    """
    PROBE.counts["dump"] += 1
    return "row\n" * (3 * 1024 * 1024 // 4)  # 3 MiB


def _dump_failed(store: ActionStateStore) -> bool:
    return any(
        call.function.endswith(":dump") and call.status is CallStatus.FAILED
        for state in store.history()
        if state.key.key == canonical_json("k")
        for call in state.calls
    )


async def held(table: str) -> str:
    """Answer once ``dump``'s outcome beside it is in the store's log (the test holds this
    call to crash the run).

    Args:
        table: Table name.
    """
    for _ in range(200):
        if _dump_failed(RECORDED[0]):
            break
        await asyncio.sleep(0.05)
    return str(await PROBE.call("held", table))


def test_a_result_over_the_record_limit_is_the_tools_recorded_failure(stores: Stores) -> None:
    agent = ReActAgent(
        name="oversized",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{table}"),
        tools=[dump, held],
        error_policy="emit",
    )
    turns = [
        {
            "tool_calls": [
                {"name": "dump", "arguments": {"table": "$input"}},
                {"name": "held", "arguments": {"table": "$input"}},
            ]
        },
        {"content": "$last"},
    ]
    add_scripted_connection(agent, "oversized", turns, connection=RecordingChatConnection)
    RECORDED[:] = [stores.first]

    result, _ = crash_then_replay(compile_agent(agent), stores, {"table": "t"}, hold="held")

    assert result.error is None and result.outputs, result
    assert PROBE.counts == {"held": 1}  # the failure was handed back: dump not called again
    told = [m.content for m in RecordingChatConnection.requests[-1].messages if m.role == "tool"]
    assert told[0].startswith("OutcomeTooLargeError: the result of call 'tool:"), told[0][:200]
    assert f"over the store's limit of {DEFAULT_MAX_RECORD_BYTES:,}" in told[0]


@action(InputEvent)
async def count_then_emit_a_lot(event: InputEvent, ctx: RunnerContext) -> None:
    PROBE.counts["action"] += 1
    n = await ctx.durable_execute_async(PROBE.call, "count", 1)
    ctx.send_event(OutputEvent(output={"n": n, "rows": "row\n" * (2 * 1024 * 1024 // 4)}))


def test_a_completion_over_the_record_limit_is_not_journaled(stores: Stores) -> None:
    plan = compile_agent(Agent(name="oversized_completion").add_action(count_then_emit_a_lot))
    result = run_live(plan, stores.first, {"n": 1})
    assert result.error is None and result.output_values[0]["n"] == 2
    stores.first.flush()
    [state] = [s for s in stores.restored().history() if s.key.action == "count_then_emit_a_lot"]
    # Recorded without its events: a replay runs the action again, its call handed back.
    assert not state.completed and state.events == []
    assert [c.status for c in state.calls] == [CallStatus.SUCCEEDED]
