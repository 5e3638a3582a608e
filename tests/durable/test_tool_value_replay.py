"""A tool's value reads to the model as the same bytes live, without a store, and when its
outcome is handed back from the store after a failover (``StoreCallRunner`` over the in-memory
store and over Kafka, the ``stores`` fixture): the text the model is shown is what is recorded.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor
from flink_agents.durable.store import ActionStateStore, CallStatus
from flink_agents.plan import compile_agent
from flink_agents.plan.models import AgentPlan
from flink_agents.runtime.local import run_local
from flink_agents.testing import run_live
from tests.durable.helpers import PROBE, Stores, crash_then_replay
from tests.sample_agents import RecordingChatConnection, add_scripted_connection

# The rendering docs/agents.md documents: ISO 8601 for a datetime, a set as a sorted list.
SHOWN = '{"tags": ["new", "old"], "when": "2024-05-01T12:30:00"}'

DATED_WRITTEN: list[Callable[[], bool]] = [lambda: True]
"""Whether ``dated``'s outcome is in the store's log (set by the crash test)."""


def dated(city: str) -> dict[str, Any]:
    """When the city's record changed, and its tags.

    Args:
        city: City name.
    """
    PROBE.counts["dated"] += 1
    return {"when": datetime.datetime(2024, 5, 1, 12, 30), "tags": {"old", "new"}}


def dated_in(store: ActionStateStore, key: str) -> bool:
    """Whether ``dated``'s outcome for the run of ``key`` is in the store's log."""
    return any(
        call.function.endswith(":dated") and call.status is CallStatus.SUCCEEDED
        for state in store.history()
        if state.key.key == f'"{key}"'
        for call in state.calls
    )


async def held(city: str) -> str:
    """Answer once ``dated``'s outcome beside it is in the store's log (the test holds this
    call to crash the run, so the replay finds that outcome recorded).

    Args:
        city: City name.
    """
    for _ in range(200):
        if DATED_WRITTEN[0]():
            break
        await asyncio.sleep(0.05)
    return str(await PROBE.call("held", city))


pytestmark = pytest.mark.usefixtures("fresh_probe_and_requests")


def _plan() -> AgentPlan:
    agent = ReActAgent(
        name="tool_value_replay",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{city}"),
        tools=[dated, held],
    )
    turns = [
        {
            "tool_calls": [
                {"name": "dated", "arguments": {"city": "$input"}},
                {"name": "held", "arguments": {"city": "$input"}},
            ]
        },
        {"content": "$last"},
    ]
    add_scripted_connection(agent, "tool-value", turns, connection=RecordingChatConnection)
    return compile_agent(agent)


def _shown_of_dated() -> list[str]:
    """What the model was told of ``dated`` in its last request."""
    last = RecordingChatConnection.requests[-1]
    return [m.content for m in last.messages if m.role == "tool" and m.content != "Oslo"]


def test_a_tool_value_reads_the_same_live_without_a_store_and_replayed(stores: Stores) -> None:
    plan = _plan()

    # Live, without a store (what `run --local` does).
    [local] = run_local(plan, [{"city": "Oslo"}], key=lambda _: "k")
    assert local.outputs, local
    assert _shown_of_dated() == [SHOWN]

    # Live, with a store, no failover.
    RecordingChatConnection.requests.clear()
    live = run_live(plan, stores.first, {"city": "Oslo"}, key="live")
    assert live.outputs, live
    assert _shown_of_dated() == [SHOWN]

    # A crash while `held` runs: `dated`'s outcome is in the log, the action did not finish,
    # so the replay hands that outcome back.
    RecordingChatConnection.requests.clear()
    PROBE.counts.clear()
    DATED_WRITTEN[:] = [lambda: dated_in(stores.first, "k")]
    try:
        result, _ = crash_then_replay(plan, stores, {"city": "Oslo"}, hold="held")
    finally:
        DATED_WRITTEN[:] = [lambda: True]
    assert result.outputs, result
    assert PROBE.counts == {"held": 1}  # dated was handed back, not called again
    assert _shown_of_dated() == [SHOWN]


def dated_object(city: str) -> dict[str, Any]:
    """A value with no rendering inside.

    Args:
        city: City name.
    """
    return {"rows": [{"handle": object()}]}


def test_a_tool_value_with_no_rendering_is_the_tools_failure_naming_the_path() -> None:
    agent = ReActAgent(
        name="tool_value_refused",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{city}"),
        tools=[dated_object],
    )
    turns = [
        {"tool_calls": [{"name": "dated_object", "arguments": {"city": "$input"}}]},
        {"content": "$last"},
    ]
    add_scripted_connection(agent, "tool-refused", turns, connection=RecordingChatConnection)
    [result] = run_local(compile_agent(agent), [{"city": "Oslo"}], key=lambda _: "k")
    assert result.outputs, result
    [told] = [m.content for m in RecordingChatConnection.requests[-1].messages if m.role == "tool"]
    assert told == "NotJsonError: not a JSON value at $.rows[0].handle: a object has no JSON form"
