"""Failover of context compaction through the real store path (``DurableCalls`` over the
in-memory store and over Kafka, the ``stores`` fixture): the summary is a recorded model call,
so a replay shows the model the context of the live run, and a threshold crossing is compacted
once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.api import ChatModelSetup, CompactionSettings, Prompt, ResourceDescriptor
from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.plan import compile_agent
from flink_agents.providers.scripted import ScriptedChatModelConnection
from tests.durable.helpers import PROBE, Stores, crash_then_replay
from tests.sample_agents import RecordingChatConnection, add, add_scripted_connection, lookup

POPULATION = json.dumps({"city": "x", "population": 1000})
CITY = " ".join(["Oslo"] * 50)  # the user message: some 63 tokens (characters / 4)


class CallProbedChat(ScriptedChatModelConnection):
    """Keeps each request in ``RecordingChatConnection.requests`` (also one the crash cuts
    short), then makes the probe call ``summary`` (the compaction's) or ``chat:<last message>``."""

    async def chat(self, request: ChatRequest) -> ChatMessage:
        RecordingChatConnection.requests.append(request)
        last = request.messages[-1].content
        await PROBE.call("summary" if last.startswith("Turns to summarize") else f"chat:{last}", 0)
        return await super().chat(request)


def compacting_agent() -> ReActAgent:
    """Two tool rounds (add, lookup) pass 50 tokens: the first three messages are summarized
    before the third call; one more round (add) stays under the threshold; then the answer."""
    agent = ReActAgent(
        name="compaction_failover",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", model="m"),
        prompt=Prompt(text="{city}"),
        tools=[add, lookup],
        compaction=CompactionSettings(max_tokens=50, keep_recent=2),
    )
    turns: list[dict[str, Any]] = [
        {"match": "^Turns to summarize", "content": "The user asked; add(1, 2) gave 3."},
        {"match": "population", "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 2}}]},
        {"match": "^3$", "tool_calls": [{"name": "lookup", "arguments": {"city": "x"}}]},
        {"match": "^4$", "content": "done"},
        {"match": "Oslo", "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
    ]
    add_scripted_connection(agent, "compaction", turns, connection=CallProbedChat)
    return agent


pytestmark = pytest.mark.usefixtures("fresh_probe_and_requests")


@pytest.mark.parametrize("hold", [f"chat:{POPULATION}", "chat:4"])
def test_a_recorded_summary_is_handed_back_and_the_model_sees_the_live_context(
    stores: Stores, hold: str
) -> None:
    # The crash comes at the call right after the compaction, or at the last call.
    result, _ = crash_then_replay(
        compile_agent(compacting_agent()), stores, {"city": CITY}, hold=hold
    )

    assert result.output_values == ["done"]
    # Replayed: the call in flight at the crash is made again (then the ones after it);
    # never the summary.
    assert PROBE.counts[hold] == 1
    assert "summary" not in PROBE.counts
    requests = RecordingChatConnection.requests
    summaries = [r for r in requests if r.messages[-1].content.startswith("Turns to summarize")]
    assert len(summaries) == 1  # the crossing was compacted once, live; never again
    live, replayed = [r for r in requests if f"chat:{r.messages[-1].content}" == hold]
    assert replayed.model_dump_json() == live.model_dump_json()  # byte for byte
    # The context after the crossing: the summary naming the turns it replaced, then the
    # two kept messages (the lookup reply and its result).
    after = next(r for r in requests if r.messages[-1].content == POPULATION)
    first, *kept = after.messages
    assert first.role == "system"
    assert first.content == (
        "Summary of turns 1-3 of this conversation, which it replaces:\n"
        "The user asked; add(1, 2) gave 3."
    )
    assert [m.role for m in kept] == ["assistant", "tool"]
    assert kept[0].tool_calls[0].name == "lookup"
