"""Failover of ReAct's output retries through the real store path (``DurableCalls`` over the
in-memory store and over Kafka, the ``stores`` fixture): a retry's model call whose outcome was
recorded is handed back on replay, never sent to the model again."""

from __future__ import annotations

import pytest

from flink_agents.api.chat import ChatMessage, ChatRequest
from flink_agents.plan import compile_agent
from tests.durable.helpers import PROBE, Stores, crash_then_replay
from tests.sample_agents import RecordingChatConnection, react_agent


class AttemptProbedChat(RecordingChatConnection):
    """Each call is the probe call ``chat:<n>``, n the user messages of its request: 1 for the
    first attempt, one more for each correction asked for."""

    async def chat(self, request: ChatRequest) -> ChatMessage:
        users = sum(1 for message in request.messages if message.role == "user")
        await PROBE.call(f"chat:{users}", 0)
        return await super().chat(request)


pytestmark = pytest.mark.usefixtures("fresh_probe_and_requests")


def test_a_recorded_retry_is_handed_back_on_replay_and_never_asked_again(stores: Stores) -> None:
    turns = [
        {"content": "It is sunny."},
        {"content": '{"city": "$input"}'},
        {"content": '{"city": "$input", "total": 7}'},
    ]
    agent = react_agent(
        turns, name="retry-failover", output_retries=2, connection=AttemptProbedChat
    )

    # The crash comes as the second retry is sent: the first answer and the first retry were
    # recorded.
    result, _ = crash_then_replay(compile_agent(agent), stores, {"city": "Oslo"}, hold="chat:3")

    assert result.output_values == [{"city": "Oslo", "total": 7}]
    # Replayed: only the call in flight at the crash (no outcome recorded) is made again.
    assert dict(PROBE.counts) == {"chat:3": 1}
    first, retry, second_retry = RecordingChatConnection.requests
    # ... asking with the conversation the recorded replies give, as the live run would have.
    assert second_retry.messages[:-2] == retry.messages
    assert retry.messages[:-2] == first.messages
    assert second_retry.messages[-2].content == '{"city": "Oslo"}'
    assert "- total: Field required" in second_retry.messages[-1].content
