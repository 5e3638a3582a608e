"""Context compaction: which turns a summary replaces, what it says it replaced, and where it is
configured (a ReActAgent's ``compaction``, over its chat model setup's)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from flink_agents.agents import ReActAgent
from flink_agents.agents.conversation_compaction import compacted
from flink_agents.api import ChatModelSetup, CompactionSettings, Prompt, ResourceDescriptor
from flink_agents.api.budgets import Budget, Budgets
from flink_agents.api.chat import ChatMessage, ChatRequest, TokenUsage, ToolCall
from flink_agents.api.context import RunnerContext
from flink_agents.runtime import ActionError, run_local
from tests.sample_agents import RecordingChatConnection, add, add_scripted_connection


class SummaryCalls:
    """Stands in for the context and the model: the durable call runs the function, which
    answers with a numbered summary; the requests are kept."""

    def __init__(self) -> None:
        self.requests: list[list[ChatMessage]] = []
        self.call_ids: list[str] = []

    async def durable_execute_async(self, function: Any, *args: Any, **options: Any) -> Any:
        self.call_ids.append(options["call_id"])
        return await function(*args)

    def chat_connection(self) -> SummaryCalls:
        return self

    def request_without_tools(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        return messages

    async def chat(self, messages: list[ChatMessage]) -> ChatMessage:
        self.requests.append(messages)
        return ChatMessage(role="assistant", content=f"summary {len(self.requests)}")


def compact(calls: SummaryCalls, messages: list[ChatMessage], **settings: Any) -> list[ChatMessage]:
    return asyncio.run(
        compacted(
            cast(RunnerContext, calls),
            cast(ChatModelSetup, calls),
            messages,
            CompactionSettings(**settings),
            "chat",
        )
    )


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def asks_tool(call_id: str) -> ChatMessage:
    return ChatMessage(role="assistant", tool_calls=[ToolCall(id=call_id, name="add")])


def result(call_id: str) -> ChatMessage:
    return ChatMessage(role="tool", content="3", tool_call_id=call_id)


SYSTEM = ChatMessage(role="system", content="You help.")


def test_within_the_threshold_the_conversation_is_left_as_it_is() -> None:
    calls = SummaryCalls()
    messages = [SYSTEM, user("x" * 40), asks_tool("1"), result("1"), user("y")]
    assert compact(calls, messages, max_tokens=100, keep_recent=1) is messages
    assert calls.requests == []


def test_past_it_the_older_turns_become_one_summary_after_the_system_prompt() -> None:
    calls = SummaryCalls()
    messages = [SYSTEM, user("x" * 40), asks_tool("1"), result("1"), user("y"), user("z")]

    compacted_messages = compact(calls, messages, max_tokens=5, keep_recent=2)

    assert compacted_messages == [
        SYSTEM,
        ChatMessage(
            role="system",
            content="Summary of turns 2-4 of this conversation, which it replaces:\nsummary 1",
        ),
        user("y"),
        user("z"),
    ]
    assert calls.call_ids == ["chat:compact"]
    [(instructions, transcript)] = calls.requests
    assert instructions.content == CompactionSettings(max_tokens=1).instructions
    assert transcript.content == (
        "Turns to summarize:\n"
        f"[turn 2] user: {'x' * 40}\n"
        "[turn 3] assistant: \n"
        "[turn 3] assistant asked for tool add with {}\n"
        "[turn 4] tool: 3"
    )


def test_a_tool_result_stays_with_the_reply_that_asked_for_it() -> None:
    calls = SummaryCalls()
    messages = [user("x" * 40), user("w"), asks_tool("1"), result("1")]

    compacted_messages = compact(calls, messages, max_tokens=5, keep_recent=1)

    assert compacted_messages[1:] == [asks_tool("1"), result("1")]
    assert compacted_messages[0].content.startswith("Summary of turns 1-2 ")


def test_fewer_than_two_older_turns_are_not_summarized() -> None:
    calls = SummaryCalls()
    messages = [SYSTEM, user("x" * 40), user("y")]
    assert compact(calls, messages, max_tokens=5, keep_recent=1) is messages


def test_a_later_summary_names_the_turns_of_the_one_it_replaces() -> None:
    calls = SummaryCalls()
    messages = [SYSTEM, user("x" * 40), user("a"), user("b"), user("c")]
    once = compact(calls, messages, max_tokens=5, keep_recent=2)
    grown = [*once, user("x" * 40), user("d"), user("e")]

    twice = compact(calls, grown, max_tokens=5, keep_recent=2)

    assert [m.content for m in twice] == [
        "You help.",
        "Summary of turns 2-6 of this conversation, which it replaces:\nsummary 2",
        "d",
        "e",
    ]
    assert "[turns 2-3] earlier summary: Summary of turns 2-3" in calls.requests[1][1].content


def test_usage_reported_before_a_compaction_no_longer_counts_after_it() -> None:
    calls = SummaryCalls()
    reply = ChatMessage(role="assistant", content="r", usage=TokenUsage(input_tokens=90))
    messages = [user("x" * 40), user("a"), reply, user("b")]

    compacted_messages = compact(calls, messages, max_tokens=50, keep_recent=2)

    assert [m.usage for m in compacted_messages] == [None, None, None]
    # Estimated from here on, the conversation is within the threshold: no second summary.
    assert compact(calls, compacted_messages, max_tokens=50, keep_recent=2) == (compacted_messages)
    assert len(calls.requests) == 1


TURNS: list[dict[str, Any]] = [
    {"match": "^Turns to summarize", "content": "summed up"},
    {"match": "^3$", "content": "done"},
    {"match": "Be brief", "tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
]


def agent_compacting(
    setup_compaction: dict[str, Any] | None,
    agent_compaction: CompactionSettings | None,
    connection: type[RecordingChatConnection] = RecordingChatConnection,
) -> ReActAgent:
    setup = {"compaction": setup_compaction} if setup_compaction else {}
    agent = ReActAgent(
        name="compacting",
        chat_model=ResourceDescriptor.of(ChatModelSetup, connection="conn", **setup),
        prompt=Prompt(messages=[user("{input}"), user("Be brief.")]),
        tools=[add],
        compaction=agent_compaction,
    )
    add_scripted_connection(agent, "compacting", TURNS, connection=connection)
    return agent


def summarized(requests: list[Any]) -> bool:
    return any(r.messages[-1].content.startswith("Turns to summarize") for r in requests)


def test_a_chat_model_setup_compacts_the_conversations_of_its_chat_actions() -> None:
    RecordingChatConnection.requests.clear()
    agent = agent_compacting({"max_tokens": 5, "keep_recent": 1}, None)

    [result] = run_local(agent, [{"id": 1, "input": "a question " * 10}], key="id")

    assert result.output_values == ["done"]
    assert summarized(RecordingChatConnection.requests)
    last = RecordingChatConnection.requests[-1]
    assert last.messages[0].content.startswith("Summary of turns 1-2 ")
    assert last.tools  # the answering call keeps the setup's tools; the summary has none
    [summary_request] = [r for r in RecordingChatConnection.requests if not r.tools]
    assert summary_request.messages[-1].content.startswith("Turns to summarize")


def test_a_react_agents_compaction_is_used_over_its_chat_models() -> None:
    RecordingChatConnection.requests.clear()
    agent = agent_compacting(
        {"max_tokens": 5, "keep_recent": 1}, CompactionSettings(max_tokens=10_000)
    )

    [result] = run_local(agent, [{"id": 1, "input": "a question " * 10}], key="id")

    assert result.output_values == ["done"]
    assert not summarized(RecordingChatConnection.requests)


class ThousandTokenChat(RecordingChatConnection):
    """Reports 1,000 input tokens for every call."""

    async def chat(self, request: ChatRequest) -> ChatMessage:
        reply = await super().chat(request)
        return reply.model_copy(update={"usage": TokenUsage(input_tokens=1000)})


def test_the_summary_is_metered_by_budgets_like_any_model_call() -> None:
    RecordingChatConnection.requests.clear()
    agent = agent_compacting({"max_tokens": 5, "keep_recent": 1}, None, ThousandTokenChat)
    # The first call and the summary spend 1,000 tokens each: the answering call after the
    # summary is refused (without the summary's spend, it would fit).
    agent.budgets = Budgets(
        limits=[Budget(name="per-run", window="run", tokens=1500)], assumed_max_tokens=1
    )

    with pytest.raises(ActionError, match="BudgetExceeded: budget 'per-run' exhausted: 2000"):
        run_local(agent, [{"id": 1, "input": "a question"}], key="id")

    assert len(RecordingChatConnection.requests) == 2
    assert summarized(RecordingChatConnection.requests)
