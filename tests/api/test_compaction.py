"""How a conversation's size is counted for compaction: reported usage, else characters / 4."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from flink_agents.api.chat import ChatMessage, TokenUsage, ToolCall
from flink_agents.api.compaction import CompactionSettings, estimated_tokens, history_tokens


def test_a_message_is_estimated_at_four_characters_a_token_rounded_up() -> None:
    assert estimated_tokens(ChatMessage(role="user", content="x" * 9)) == 3
    call = ToolCall(id="c", name="add", arguments={"a": 1})  # "add" + '{"a": 1}': 11 characters
    assert estimated_tokens(ChatMessage(role="assistant", tool_calls=[call])) == 3


def test_without_reported_usage_every_message_is_estimated() -> None:
    messages = [ChatMessage(role="user", content="x" * 8), ChatMessage(role="tool", content="y")]
    assert history_tokens(messages) == 3


def test_the_last_reported_usage_counts_with_the_estimate_of_what_came_after() -> None:
    messages = [
        ChatMessage(role="user", content="x" * 400),
        ChatMessage(
            role="assistant", content="a", usage=TokenUsage(input_tokens=9, output_tokens=1)
        ),
        ChatMessage(role="user", content="x" * 40),
        ChatMessage(
            role="assistant", content="b", usage=TokenUsage(input_tokens=30, output_tokens=2)
        ),
        ChatMessage(role="tool", content="z" * 8),
    ]
    assert history_tokens(messages) == 32 + 2


@pytest.mark.parametrize("bad", [{"max_tokens": 0}, {"max_tokens": 10, "keep_recent": 0}, {}])
def test_settings_refuse_a_threshold_or_window_that_is_not_positive(bad: dict[str, int]) -> None:
    with pytest.raises(ValidationError):
        CompactionSettings.model_validate(bad)
