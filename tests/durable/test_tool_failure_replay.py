"""A tool's failure replayed from the store reaches the model as the live failure did, through
the real store path (``DurableCalls`` over the in-memory store and over Kafka, the ``stores``
fixture): the model's conversation after a failover is the one it would have had without it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, Prompt, ResourceDescriptor
from flink_agents.durable.store import ActionStateStore, CallStatus
from flink_agents.plan import compile_agent
from tests.durable.helpers import PROBE, Stores, crash_then_replay
from tests.sample_agents import RecordingChatConnection, add_scripted_connection


def refuse(city: str) -> str:
    """Refuse every city.

    Args:
        city: City name.
    """
    PROBE.counts["refuse"] += 1
    raise ValueError(f"no such city: {city}")


REFUSAL_WRITTEN: list[Callable[[], bool]] = []
"""Whether the refusal's failed outcome is in the store's log (set by the test)."""


def refusal_in(store: ActionStateStore) -> bool:
    return any(
        call.call_id.startswith("tool:") and call.status is CallStatus.FAILED
        for state in store.history()
        for call in state.calls
    )


async def held(city: str) -> str:
    """Answer once the probe lets it (the test holds it to crash the run), after the refusal
    beside it is in the store's log: the crash then finds that failure recorded.

    Args:
        city: City name.
    """
    for _ in range(200):
        if REFUSAL_WRITTEN[0]():
            break
        await asyncio.sleep(0.05)
    return str(await PROBE.call("held", city))


pytestmark = pytest.mark.usefixtures("fresh_probe_and_requests")


def test_a_replayed_tool_failure_reads_to_the_model_as_the_live_one(stores: Stores) -> None:
    agent = ReActAgent(
        name="tool_failure_replay",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{city}"),
        tools=[refuse, held],
    )
    turns = [
        {
            "tool_calls": [
                {"name": "refuse", "arguments": {"city": "$input"}},
                {"name": "held", "arguments": {"city": "$input"}},
            ]
        },
        {"content": "$last"},
    ]
    add_scripted_connection(agent, "tool-failure", turns, connection=RecordingChatConnection)

    REFUSAL_WRITTEN[:] = [lambda: refusal_in(stores.first)]

    # The crash comes while `held` runs: `refuse` failed and its failure is in the log, but the
    # action did not finish, so the replay runs it again with the failure handed back.
    result, _ = crash_then_replay(compile_agent(agent), stores, {"city": "Oslo"}, hold="held")

    assert result.outputs, result
    assert PROBE.counts == {"held": 1}  # the refusal was not asked again
    first, answered = RecordingChatConnection.requests[0], RecordingChatConnection.requests[-1]
    assert answered is not first
    told = [m.content for m in answered.messages if m.role == "tool"]
    # What the live run's model would have been told: the tool's own type and message.
    assert "ValueError: no such city: Oslo" in told, told
    assert not any("RecordedCallError" in text for text in told), told
